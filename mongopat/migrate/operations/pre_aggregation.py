"""pre_aggregation: aggregates of related documents stored in the document."""

from __future__ import annotations

from mongopat.migrate.operations.base import AddsFields
from mongopat.migrate.steps import Step


class Operation(AddsFields):
    name = "pre_aggregation"

    def added(self, step: Step) -> list[str]:
        return [step.params["into"]]
