"""approximation: a counter's factor recorded (and the counter initialised where it was not a number)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mongopat.guide.placeholders import param
from mongopat.guide.writes import WritePlan, command
from mongopat.migrate.operations.base import INT, STR, AddsFields, Param, ServerInverse, Step, StepType, restore_field
from mongopat.migrate.operations.server_paths import plain, set_stages, value_at
from mongopat.migrate.transform_api import Context, Document, Result, copy_document, get_path, heads, set_path

if TYPE_CHECKING:
    from mongopat.guide.cost import Evidence


class Operation(AddsFields):
    plan_order = 1
    type = StepType(
        "approximation",
        "document",
        {"field": Param(STR), "factor": Param(INT)},
        "initialise an approximate counter and record its factor (approximation pattern)",
    )

    def writes(self, step: Step, evidence: Evidence) -> list[WritePlan]:
        plans = super().writes(step, evidence)
        spec = evidence.access.collection(step.collection)
        name, factor = step.params["field"], step.params["factor"]
        for counter in spec.counters if spec is not None else []:
            if counter.field != name:
                continue
            before = [command(step.collection, "updateOne", filter={"_id": param("_id")}, update={"$inc": {name: 1}})]
            after = [
                command(
                    step.collection,
                    "updateOne",
                    filter={"_id": param("_id")},
                    update={"$inc": {name: factor}},
                    probability=round(1 / factor, 6),
                )
            ]
            plans.append(
                WritePlan(
                    step.collection,
                    "counter",
                    f"count one more `{name}`",
                    before,
                    after,
                    {"_id": "the document's _id"},
                    counter.increments_per_sec,
                    {"before": 1, "after": round(1 / factor, 6)},
                    lambda sample: ({"_id": sample.document["_id"]}, {"_id": sample.document["_id"]}),
                    approximate=True,
                )
            )
        return plans

    def new_shape(self, step: Step) -> str:
        p = step.params
        return f"`{p['field']}` a number (0 when new) and `{p['field']}Factor` = {p['factor']}"

    def deploy(self, step: Step) -> dict[str, list[str]]:
        p = step.params
        return {
            "before": [],
            "during": [],
            "after": [
                f"`{step.collection}`: increment `{p['field']}` by {p['factor']} once in {p['factor']} times, at "
                "random; readers show it as an approximate count"
            ],
        }

    def transform(self, doc: Document, step: Step, ctx: Context) -> Result:
        name = step.params["field"]
        value = get_path(doc, name)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            set_path(doc, name, 0)
        set_path(doc, f"{name}Factor", step.params["factor"])
        return Result(doc)

    def server_stages(self, step: Step) -> list[dict[str, Any]] | None:
        name = step.params["field"]
        if not plain(name):
            return None
        # A counter that is not an int, a long or a double (bool, Decimal128, missing, under a prefix that is
        # no sub-document...) starts at 0.
        counter = value_at(name)
        number = {"$in": [{"$type": counter}, ["int", "long", "double"]]}
        return [
            *set_stages(name, {"$cond": [number, counter, 0]}),
            *set_stages(f"{name}Factor", {"$literal": step.params["factor"]}),
        ]

    changes_only_what_it_writes = True

    def read_fields(self, step: Step) -> frozenset[str] | None:
        return heads(step.params["field"], f"{step.params['field']}Factor")

    def written_fields(self, step: Step) -> set[str]:
        p = step.params
        return {p["field"], f"{p['field']}Factor"}

    def added(self, step: Step) -> list[str]:
        return [f"{step.params['field']}Factor"]

    def server_inverse(self, step: Step) -> ServerInverse | None:
        return None  # the inverse also gives the counter back its value (below)

    def inverse(self, current: Document, original: Document, step: Step, side: list[Document]) -> Document | None:
        result = copy_document(current)
        restore_field(result, original, self.added(step)[0])
        counter = step.params["field"]
        before = get_path(original, counter)
        initialised = not isinstance(before, (int, float)) or isinstance(before, bool)
        # A counter the step initialised to 0 goes back to what it was, unless the application counted since.
        if initialised and get_path(result, counter) == 0:
            restore_field(result, original, counter)
        return result
