"""subset: the first N elements kept embedded, the full list in its own collection."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any

from mongopat.migrate.operations.base import DICT, INT, STR, DocumentOperation, Param, Step, StepType, restore_field
from mongopat.migrate.transforms import Context, Document, Result, get_path


class Operation(DocumentOperation):
    type = StepType(
        "subset",
        "document",
        {"field": Param(STR), "keep": Param(INT), "sort": Param(DICT, False, {}), "full_collection": Param(STR)},
        "keep the first N elements embedded, the full list in its own collection (subset pattern)",
        creates=("full_collection",),
    )
    side_collections = ("full_collection",)

    def transform(self, doc: Document, step: Step, ctx: Context) -> Result:
        name = step.params["field"]
        elements = doc.get(name)
        if not isinstance(elements, list):
            return Result(doc)
        full = [
            {"_id": {"parent": doc.get("_id"), "index": index}, "parentId": doc.get("_id"), "index": index,
             **(element if isinstance(element, dict) else {"value": element})}
            for index, element in enumerate(elements)
        ]  # fmt: skip
        doc[name] = _sorted(elements, step.params["sort"])[: step.params["keep"]]
        doc[f"{name}Count"] = len(elements)
        return Result(doc, {step.params["full_collection"]: full})

    def written_fields(self, step: Step) -> set[str]:
        p = step.params
        return {p["field"], f"{p['field']}Count"}

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


def _sort_key(spec: dict[str, int]) -> Callable[[Any], tuple]:
    def key(element: Any) -> tuple:
        values = []
        for name, _direction in spec.items():
            value = get_path(element, name) if isinstance(element, dict) else None
            values.append((value is None, value))
        return tuple(values)

    return key


def _sorted(elements: list[Any], spec: dict[str, int]) -> list[Any]:
    if not spec:
        return list(elements)
    # One direction for the whole sort: the first field's (mixed directions are rare in subsets).
    reverse = next(iter(spec.values())) == -1
    try:
        return sorted(elements, key=_sort_key(spec), reverse=reverse)
    except TypeError:  # values of mixed types: keep the stored order
        return list(elements)

    def verify_files(
        self,
        step: Step,
        stats: dict[str, Any],
        documents: Callable[[str], Iterable[Document]],
        count: Callable[[str], int],
    ) -> list[str]:
        """The full list holds every element the documents had."""
        expected = stats.get("elements", 0)
        if count(step.params["full_collection"]) != expected:
            return [f"{step.params['full_collection']}: expected {expected} elements"]
        return []
