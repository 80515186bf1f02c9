"""document_versioning: a revision number (the history collection is dropped by down)."""

from __future__ import annotations

from mongopat.migrate.operations.base import AddsFields
from mongopat.migrate.steps import Step


class Operation(AddsFields):
    name = "document_versioning"

    def added(self, step: Step) -> list[str]:
        return [step.params["version_field"]]
