"""computed: a value computed from the document."""

from __future__ import annotations

from typing import Any

from mongopat.expressions import ExpressionError, evaluate, parse
from mongopat.migrate.operations.base import STR, AddsFields, Param, Step, StepError, StepType
from mongopat.migrate.transforms import Context, Document, Result, set_path


class Operation(AddsFields):
    type = StepType(
        "computed",
        "document",
        {"field": Param(STR), "expression": Param(STR)},
        "store a value computed from the document (computed pattern)",
    )

    def transform(self, doc: Document, step: Step, ctx: Context) -> Result:
        set_path(doc, step.params["field"], evaluate(parse(step.params["expression"]), doc))
        return Result(doc)

    def check(self, params: dict[str, Any]) -> None:
        try:
            parse(params["expression"])
        except ExpressionError as exc:
            raise StepError(f"computed: invalid expression: {exc}") from None

    def written_fields(self, step: Step) -> set[str]:
        p = step.params
        return {p["field"]}

    def added(self, step: Step) -> list[str]:
        return [step.params["field"]]
