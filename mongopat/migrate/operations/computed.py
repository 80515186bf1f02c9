"""computed: a value computed from the document."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mongopat.expressions import ExpressionError, aggregation, evaluate, parse
from mongopat.guide.placeholders import param
from mongopat.guide.reads import ReadPlan, Stage
from mongopat.guide.writes import WritePlan, changed, command
from mongopat.migrate.operations.base import STR, AddsFields, Param, Step, StepError, StepType
from mongopat.migrate.operations.server_paths import plain, set_stages
from mongopat.migrate.transform_api import Context, Document, Result, copy_document, heads, set_path

if TYPE_CHECKING:
    from mongopat.guide.cost import Evidence


class Operation(AddsFields):
    plan_order = 0
    type = StepType(
        "computed",
        "document",
        {"field": Param(STR), "expression": Param(STR)},
        "store a value computed from the document (computed pattern)",
    )

    def rewrite_read(self, read: ReadPlan, step: Step, evidence: Evidence) -> None:
        if read.collection != step.collection:
            return
        stored, wanted = step.params["field"], parse(step.params["expression"])
        for stage in list(read.stages):
            if stage.kind != "derive":
                continue
            name, expression = stage.spec
            if (expression.function, expression.body) != (wanted.function, wanted.body):
                continue
            index = read.stages.index(stage)
            if name == stored:
                del read.stages[index]
            else:
                read.stages[index] = Stage("reshape", [{"$set": {name: f"${stored}"}}], [name])
            read.notes.append(f"`{name}` is read from the stored `{stored}` instead of computed on every read")

    def update_write(self, step: Step, per_sec: float) -> WritePlan | None:
        """An update of a field the value is computed from sets the value again in the same update."""
        stored, text = step.params["field"], step.params["expression"]
        expression = parse(text)
        sources = list(dict.fromkeys(path.split(".")[0] for path in expression.paths()))
        changes = {name: param(name) for name in sources}
        before = [command(step.collection, "updateOne", filter={"_id": param("_id")}, update={"$set": changes})]
        after = [
            command(
                step.collection,
                "updateOne",
                filter={"_id": param("_id")},
                update={"$set": {**changes, stored: param(stored, compute=text)}},
            )
        ]

        def binder(sample: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
            document = copy_document(sample.document)
            updates = {name: changed(document.get(name)) for name in sources}
            values = {"_id": document["_id"], **updates}
            document.update(updates)
            return values, {**values, stored: evaluate(expression, document)}

        return WritePlan(
            step.collection,
            "update_derived",
            f"update {', '.join(f'`{s}`' for s in sources)} of a document of {step.collection}",
            before,
            after,
            {"_id": "the document's _id", **{s: f"the new {s}" for s in sources}, stored: f"{text} of the new values"},
            per_sec,
            {"before": 1, "after": 1},
            binder,
        )

    def new_shape(self, step: Step) -> str:
        return f"`{step.params['field']}` = {step.params['expression']}"

    def deploy(self, step: Step) -> dict[str, list[str]]:
        stored = step.params["field"]
        return {
            "before": [f"`{step.collection}`: every insert and update sets `{stored}` = {step.params['expression']}"],
            "during": [f"`{step.collection}`: compute `{stored}` on read where a document has none yet"],
            "after": [f"`{step.collection}`: read the stored `{stored}`"],
        }

    def transform(self, doc: Document, step: Step, ctx: Context) -> Result:
        set_path(doc, step.params["field"], evaluate(parse(step.params["expression"]), doc))
        return Result(doc)

    def server_stages(self, step: Step) -> list[dict[str, Any]] | None:
        # The rendered expression gives the BSON value evaluate() gives (tests/test_expressions.py).
        field = step.params["field"]
        return set_stages(field, aggregation(parse(step.params["expression"]))) if plain(field) else None

    def check(self, params: dict[str, Any]) -> None:
        try:
            parse(params["expression"])
        except ExpressionError as exc:
            raise StepError(f"computed: invalid expression: {exc}") from None

    changes_only_what_it_writes = True

    def read_fields(self, step: Step) -> frozenset[str] | None:
        return heads(step.params["field"], *parse(step.params["expression"]).paths())

    def written_fields(self, step: Step) -> set[str]:
        p = step.params
        return {p["field"]}

    def added(self, step: Step) -> list[str]:
        return [step.params["field"]]
