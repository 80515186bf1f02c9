"""rename_field: a field moved to a new name."""

from __future__ import annotations

import copy
from typing import Any

from mongopat.migrate.operations.base import STR, DocumentOperation, Param, Step, StepType
from mongopat.migrate.transforms import Context, Document, Result, _has, _pop_path, _set_path


class Operation(DocumentOperation):
    type = StepType("rename_field", "document", {"from": Param(STR), "to": Param(STR)}, "rename a field")

    def transform(self, doc: Document, step: Step, ctx: Context) -> Result:
        if _has(doc, step.params["from"]):
            _set_path(doc, step.params["to"], _pop_path(doc, step.params["from"]))
        return Result(doc)

    def written_fields(self, step: Step) -> set[str]:
        p = step.params
        return {p["from"], p["to"]}

    def removed_fields(self, step: Step) -> set[str]:
        p = step.params
        return {p["from"]}

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
