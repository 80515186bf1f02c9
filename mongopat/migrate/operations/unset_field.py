"""unset_field: a field removed."""

from __future__ import annotations

import copy
from typing import Any

from mongopat.migrate.operations.base import DocumentOperation
from mongopat.migrate.steps import Step
from mongopat.migrate.transforms import Document, _has, _set_path, get_path


class Operation(DocumentOperation):
    name = "unset_field"

    def pending(self, step: Step) -> dict[str, Any]:
        return {step.params["field"]: {"$exists": True}}

    def is_pending(self, doc: Document, step: Step) -> bool:
        return _has(doc, step.params["field"])

    def inverse(self, current: Document, original: Document, step: Step, side: list[Document]) -> Document | None:
        result = copy.deepcopy(current)
        field = step.params["field"]
        if _has(original, field) and not _has(result, field):  # one the application set again stays
            _set_path(result, field, copy.deepcopy(get_path(original, field)))
        return result
