"""map_to_array: a sub-document keyed by values turned into an array of documents holding the key."""

from __future__ import annotations

from typing import Any

from mongopat.migrate.operations.base import DocumentOperation
from mongopat.migrate.steps import Step
from mongopat.migrate.transforms import Document, array_to_map, get_path


class Operation(DocumentOperation):
    name = "map_to_array"

    def pending(self, step: Step) -> dict[str, Any]:
        # $type matches an array by its elements: an array of documents is "object" too, hence the $not.
        field = step.params["field"]
        return {"$and": [{field: {"$type": "object"}}, {field: {"$not": {"$type": "array"}}}]}

    def is_pending(self, doc: Document, step: Step) -> bool:
        return isinstance(get_path(doc, step.params["field"]), dict)

    def inverse(self, current: Document, original: Document, step: Step, side: list[Document]) -> Document | None:
        import copy

        elements = get_path(current, step.params["field"])
        result = array_to_map(copy.deepcopy(current), step)
        if isinstance(elements, list) and not isinstance(get_path(result, step.params["field"]), dict):
            return None  # an element the application added without a key: no map holds it
        return result
