"""computed: a value computed from the document."""

from __future__ import annotations

from mongopat.migrate.operations.base import AddsFields
from mongopat.migrate.steps import Step


class Operation(AddsFields):
    name = "computed"

    def added(self, step: Step) -> list[str]:
        return [step.params["field"]]
