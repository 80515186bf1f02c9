"""rename_field: a field moved to a new name."""

from __future__ import annotations

import copy
from typing import Any

from mongopat.migrate.operations.base import DocumentOperation
from mongopat.migrate.steps import Step
from mongopat.migrate.transforms import Document, _has, _pop_path, _set_path


class Operation(DocumentOperation):
    name = "rename_field"

    def pending(self, step: Step) -> dict[str, Any]:
        return {step.params["from"]: {"$exists": True}}

    def is_pending(self, doc: Document, step: Step) -> bool:
        return _has(doc, step.params["from"])

    def inverse(self, current: Document, original: Document, step: Step, side: list[Document]) -> Document | None:
        result = copy.deepcopy(current)
        old, new = step.params["from"], step.params["to"]
        if _has(result, new) and not _has(result, old):
            _set_path(result, old, _pop_path(result, new))
        return result
