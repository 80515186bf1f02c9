"""rename_field: a field moved to a new name."""

from __future__ import annotations

import copy
from typing import Any

from mongopat.migrate.operations.base import STR, DocumentOperation, Param, Step, StepType
from mongopat.migrate.transforms import Context, Document, Result, has_path, pop_path, set_path


class Operation(DocumentOperation):
    type = StepType("rename_field", "document", {"from": Param(STR), "to": Param(STR)}, "rename a field")

    def transform(self, doc: Document, step: Step, ctx: Context) -> Result:
        if has_path(doc, step.params["from"]):
            set_path(doc, step.params["to"], pop_path(doc, step.params["from"]))
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
        return has_path(doc, step.params["from"])

    def inverse(self, current: Document, original: Document, step: Step, side: list[Document]) -> Document | None:
        result = copy.deepcopy(current)
        old, new = step.params["from"], step.params["to"]
        if has_path(result, new) and not has_path(result, old):
            set_path(result, old, pop_path(result, new))
        return result
