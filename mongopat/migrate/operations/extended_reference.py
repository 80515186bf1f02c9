"""extended_reference: fields of the referenced document copied next to the reference."""

from __future__ import annotations

from typing import Any

from mongopat.migrate.operations.base import AddsFields
from mongopat.migrate.steps import Step
from mongopat.migrate.transforms import Document, _has


class Operation(AddsFields):
    name = "extended_reference"

    def added(self, step: Step) -> list[str]:
        return [step.params["as"]]

    def pending(self, step: Step) -> dict[str, Any]:
        # A document without the reference has nothing to copy: not pending. One whose referenced document is
        # missing stays pending, and is reported as such.
        return {step.params["as"]: {"$exists": False}, step.params["local"]: {"$exists": True}}

    def is_pending(self, doc: Document, step: Step) -> bool:
        return not _has(doc, step.params["as"]) and _has(doc, step.params["local"])
