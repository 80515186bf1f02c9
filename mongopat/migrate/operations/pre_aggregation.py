"""pre_aggregation: aggregates of related documents stored in the document."""

from __future__ import annotations

from typing import Any

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
