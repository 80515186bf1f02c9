"""approximation: a counter's factor recorded (and the counter initialised where it was not a number)."""

from __future__ import annotations

import copy

from mongopat.migrate.operations.base import AddsFields, restore_field
from mongopat.migrate.steps import Step
from mongopat.migrate.transforms import Document, get_path


class Operation(AddsFields):
    name = "approximation"

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
