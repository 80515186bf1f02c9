"""subset: the first N elements kept embedded, the full list in its own collection."""

from __future__ import annotations

import copy
from typing import Any

from mongopat.migrate.operations.base import DocumentOperation, restore_field
from mongopat.migrate.steps import Step
from mongopat.migrate.transforms import Document


class Operation(DocumentOperation):
    name = "subset"
    side_collections = ("full_collection",)

    def pending(self, step: Step) -> dict[str, Any]:
        field = step.params["field"]
        return {f"{field}Count": {"$exists": False}, field: {"$type": "array"}}

    def is_pending(self, doc: Document, step: Step) -> bool:
        return isinstance(doc.get(step.params["field"]), list) and f"{step.params['field']}Count" not in doc

    def inverse(self, current: Document, original: Document, step: Step, side: list[Document]) -> Document | None:
        """The full list back in place, in its order, with the elements the application added since, to the
        embedded subset or to the full list, after it."""
        field = step.params["field"]
        result = copy.deepcopy(current)
        full = [_element(item) for item in sorted(side, key=lambda item: item.get("index", 0))]
        embedded = result.get(field) if isinstance(result.get(field), list) else []
        added = [element for element in embedded if element not in full]
        result[field] = full + added
        restore_field(result, original, f"{field}Count")
        return result


def _element(item: Document) -> Any:
    """A full-list document back to the element it was (a document, or a wrapped scalar)."""
    element = {key: value for key, value in item.items() if key not in ("_id", "parentId", "index")}
    return element["value"] if set(element) == {"value"} else element
