"""approximation: a counter's factor recorded (and the counter initialised where it was not a number)."""

from __future__ import annotations

import copy

from mongopat.migrate.operations.base import INT, STR, AddsFields, Param, Step, StepType, restore_field
from mongopat.migrate.transforms import Context, Document, Result, get_path, set_path


class Operation(AddsFields):
    type = StepType(
        "approximation",
        "document",
        {"field": Param(STR), "factor": Param(INT)},
        "initialise an approximate counter and record its factor (approximation pattern)",
    )

    def transform(self, doc: Document, step: Step, ctx: Context) -> Result:
        name = step.params["field"]
        value = get_path(doc, name)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            set_path(doc, name, 0)
        set_path(doc, f"{name}Factor", step.params["factor"])
        return Result(doc)

    def written_fields(self, step: Step) -> set[str]:
        p = step.params
        return {p["field"], f"{p['field']}Factor"}

    def added(self, step: Step) -> list[str]:
        return [f"{step.params['field']}Factor"]

    def inverse(self, current: Document, original: Document, step: Step, side: list[Document]) -> Document | None:
        result = copy.deepcopy(current)
        restore_field(result, original, self.added(step)[0])
        counter = step.params["field"]
        before = get_path(original, counter)
        initialised = not isinstance(before, (int, float)) or isinstance(before, bool)
        # A counter the step initialised to 0 goes back to what it was, unless the application counted since.
        if initialised and get_path(result, counter) == 0:
            restore_field(result, original, counter)
        return result
