"""outlier: array elements past a threshold moved into overflow documents."""

from __future__ import annotations

import copy
from typing import Any

from mongopat.migrate.operations.base import DocumentOperation, restore_field
from mongopat.migrate.steps import Step
from mongopat.migrate.transforms import Document


class Operation(DocumentOperation):
    name = "outlier"
    side_collections = ("overflow_collection",)

    def pending(self, step: Step) -> dict[str, Any]:
        # Arrays longer than the threshold in documents not flagged yet; a flagged document's new elements are
        # the application's to place (the outlier pattern's write path).
        field, limit = step.params["field"], step.params["threshold"]
        return {f"{field}.{limit}": {"$exists": True}, step.params["flag_field"]: {"$exists": False}}

    def is_pending(self, doc: Document, step: Step) -> bool:
        elements = doc.get(step.params["field"])
        return (
            isinstance(elements, list)
            and len(elements) > step.params["threshold"]
            and step.params["flag_field"] not in doc
        )

    def inverse(self, current: Document, original: Document, step: Step, side: list[Document]) -> Document | None:
        """Overflow pages merged back after the embedded elements the step kept; elements the application
        pushed since (embedded or into a page) are kept too."""
        field, limit = step.params["field"], step.params["threshold"]
        result = copy.deepcopy(current)
        embedded = result.get(field) if isinstance(result.get(field), list) else []
        moved = [e for page in sorted(side, key=lambda p: p.get("page", 0)) for e in page.get(field) or []]
        result[field] = embedded[:limit] + moved + embedded[limit:]
        restore_field(result, original, step.params["flag_field"])
        return result
