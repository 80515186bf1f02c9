"""schema_versioning: a schema version stamped on every document."""

from __future__ import annotations

from mongopat.migrate.operations.base import AddsFields
from mongopat.migrate.steps import Step


class Operation(AddsFields):
    name = "schema_versioning"

    def added(self, step: Step) -> list[str]:
        return [step.params["field"]]
