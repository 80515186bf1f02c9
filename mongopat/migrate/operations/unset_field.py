"""unset_field: a field removed."""

from __future__ import annotations

import copy
from typing import Any

from mongopat.migrate.operations.base import STR, DocumentOperation, Param, Step, StepType
from mongopat.migrate.transforms import Context, Document, Result, _has, _pop_path, _set_path, get_path


class Operation(DocumentOperation):
    type = StepType("unset_field", "document", {"field": Param(STR)}, "remove a field")

    def transform(self, doc: Document, step: Step, ctx: Context) -> Result:
        _pop_path(doc, step.params["field"])
        return Result(doc)

    def written_fields(self, step: Step) -> set[str]:
        p = step.params
        return {p["field"]}

    def removed_fields(self, step: Step) -> set[str]:
        p = step.params
        return {p["field"]}

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
