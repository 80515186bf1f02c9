"""pre_aggregation: aggregates of related documents stored in the document."""

from __future__ import annotations

from typing import Any

from mongopat.guide.cost import Evidence
from mongopat.guide.placeholders import OMIT, param
from mongopat.guide.reads import ReadPlan, Stage
from mongopat.guide.writes import WritePlan, command, insert_one
from mongopat.migrate.operations.base import DICT, STR, AddsFields, Param, Step, StepError, StepType
from mongopat.migrate.transforms import Context, Document, Result, get_path, hashable_key


class Operation(AddsFields):
    type = StepType(
        "pre_aggregation",
        "document",
        {
            "from": Param(STR),
            "local": Param(STR, False, "_id"),
            "foreign": Param(STR),
            "compute": Param(DICT),
            "into": Param(STR),
        },
        "store aggregates of related documents (pre-aggregation pattern)",
    )

    def rewrite_read(self, read: ReadPlan, step: Step, evidence: Evidence) -> None:
        if read.collection != step.collection:
            return
        p = step.params
        stage = read.find("aggregate")
        aggregate = stage.spec if stage is not None else None
        if aggregate is None or (aggregate.source, aggregate.local, aggregate.foreign) != (
            p["from"],
            p["local"],
            p["foreign"],
        ):
            return
        if any(p["compute"].get(name) != spec for name, spec in aggregate.compute.items()):
            read.notes.append(f"the read computes aggregates of {p['from']} the step does not store: it stays computed")
            return
        outputs = {name: f"${p['into']}.{name}" for name in aggregate.compute}
        read.stages[read.stages.index(stage)] = Stage("reshape", [{"$set": outputs}], list(outputs))
        read.notes.append(f"the aggregates of {p['from']} are read from `{p['into']}`, not computed on every read")

    def writes(self, step: Step, evidence: Evidence) -> list[WritePlan]:
        plans = super().writes(step, evidence)
        per_sec = evidence.per_sec(step.params["from"], "inserts")
        if per_sec:
            plans.append(self._related_insert(step, per_sec))
        return plans

    def _related_insert(self, step: Step, per_sec: float) -> WritePlan:
        """An insert of a related document updates the stored aggregates of the document it belongs to."""
        p = step.params
        source, into = p["from"], p["into"]
        increments: dict[str, Any] = {}
        lows: dict[str, Any] = {}
        highs: dict[str, Any] = {}
        recomputed: dict[str, Any] = {}
        descriptions: dict[str, str] = {"document": f"the new {source} document", p["foreign"]: f"its {p['foreign']}"}
        for name, spec in p["compute"].items():
            op, argument = next(iter(spec.items()))
            if op in ("sum", "count"):
                increments[f"{into}.{name}"] = param(name)
                descriptions[name] = (
                    f"the document's {argument}" if op == "sum" else f"1 when the document matches {argument!r}, else 0"
                )
            elif op in ("min", "max"):
                (lows if op == "min" else highs)[f"{into}.{name}"] = param(name)
                descriptions[name] = f"the document's {argument}"
            else:
                recomputed[f"{into}.{name}"] = param(name, compute=f"avg of {argument} over {source}")
                descriptions[name] = f"the average of {argument} over the related documents, the new one included"
        update: dict[str, Any] = {}
        for operator, values in (("$inc", increments), ("$min", lows), ("$max", highs), ("$set", recomputed)):
            if values:
                update[operator] = values
        after = [
            command(source, "insertOne", document=param("document")),
            command(step.collection, "updateOne", filter={p["local"]: param(p["foreign"])}, update=update),
        ]

        def binder(sample: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
            document = sample.fresh()
            key = get_path(document, p["foreign"])
            values: dict[str, Any] = {"document": document, p["foreign"]: key}
            for name, spec in p["compute"].items():
                op, argument = next(iter(spec.items()))
                if op == "count":
                    values[name] = int(argument is True or all(document.get(k) == v for k, v in argument.items()))
                elif op == "avg":
                    from mongopat.migrate.runner import aggregate_in_python

                    rows = [*sample.after[source].find({p["foreign"]: key}), document]
                    values[name] = aggregate_in_python(rows, step)[hashable_key(key)][name]
                else:
                    value = get_path(document, argument)
                    values[name] = value if isinstance(value, (int, float)) and not isinstance(value, bool) else OMIT
                    if op == "sum" and values[name] is OMIT:
                        values[name] = 0
            return {"document": document}, values

        return WritePlan(
            source,
            "insert_related",
            f"insert a document into {source}",
            [insert_one(source)],
            after,
            descriptions,
            per_sec,
            {"before": 1, "after": 2},
            binder,
        )

    def new_shape(self, step: Step) -> str:
        p = step.params
        return f"`{p['into']}` = aggregates of its {p['from']} ({', '.join(p['compute'])})"

    def deploy(self, step: Step) -> dict[str, list[str]]:
        p = step.params
        return {
            "before": [
                f"`{step.collection}`: inserts set `{p['into']}` (zeros for a new document)",
                f"`{p['from']}`: every insert updates `{p['into']}` of its {step.collection} document; updates and "
                f"deletes of {p['from']} adjust it the same way",
            ],
            "during": [f"`{step.collection}`: compute the aggregates on read where `{p['into']}` is missing"],
            "after": [f"`{step.collection}`: read `{p['into']}`"],
        }

    def transform(self, doc: Document, step: Step, ctx: Context) -> Result:
        key = get_path(doc, step.params["local"])
        results = ctx.aggregates.get(hashable_key(key))
        doc[step.params["into"]] = dict(results) if results is not None else empty_aggregates(step.params["compute"])
        return Result(doc)

    def check(self, params: dict[str, Any]) -> None:
        for output, spec in params["compute"].items():
            if (
                not isinstance(spec, dict)
                or len(spec) != 1
                or next(iter(spec)) not in ("sum", "count", "avg", "min", "max")
            ):
                raise StepError(f"pre_aggregation: compute.{output} must be one of sum, count, avg, min, max")

    def written_fields(self, step: Step) -> set[str]:
        p = step.params
        return {p["into"]}

    def added(self, step: Step) -> list[str]:
        return [step.params["into"]]


def empty_aggregates(compute: dict[str, dict[str, Any]]) -> Document:
    return {name: 0 if next(iter(spec)) in ("sum", "count") else None for name, spec in compute.items()}
