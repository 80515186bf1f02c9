"""set_field: a field set to a value (everywhere, or only where it is missing)."""

from __future__ import annotations

import copy
from typing import Any

from mongopat.migrate.operations.base import DocumentOperation, restore_field
from mongopat.migrate.steps import Step
from mongopat.migrate.transforms import Document, _has, get_path


class Operation(DocumentOperation):
    name = "set_field"

    def pending(self, step: Step) -> dict[str, Any]:
        field = step.params["field"]
        if step.params["only_missing"]:
            return {field: {"$exists": False}}
        return {"$or": [{field: {"$exists": False}}, {field: {"$ne": step.params["value"]}}]}

    def is_pending(self, doc: Document, step: Step) -> bool:
        field = step.params["field"]
        if not _has(doc, field):
            return True
        return not step.params["only_missing"] and get_path(doc, field) != step.params["value"]

    def inverse(self, current: Document, original: Document, step: Step, side: list[Document]) -> Document | None:
        result = copy.deepcopy(current)
        field = step.params["field"]
        # A value the application wrote since is its own: only the value the step set goes back.
        if _has(result, field) and get_path(result, field) == step.params["value"]:
            restore_field(result, original, field)
        return result
