"""outlier: array elements past a threshold moved into overflow documents."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any

from mongopat.migrate.operations.base import INT, STR, DocumentOperation, Param, Step, StepType, restore_field
from mongopat.migrate.transforms import Context, Document, Result


class Operation(DocumentOperation):
    type = StepType(
        "outlier",
        "document",
        {
            "field": Param(STR),
            "threshold": Param(INT),
            "overflow_collection": Param(STR),
            "flag_field": Param(STR, False, "has_overflow"),
        },
        "move array elements past a threshold into overflow documents (outlier pattern)",
        creates=("overflow_collection",),
    )
    side_collections = ("overflow_collection",)

    def transform(self, doc: Document, step: Step, ctx: Context) -> Result:
        name, limit = step.params["field"], step.params["threshold"]
        elements = doc.get(name)
        if not isinstance(elements, list) or len(elements) <= limit:
            return Result(doc)
        overflow = [
            {"_id": {"parent": doc.get("_id"), "page": page}, "parentId": doc.get("_id"), "page": page,
             name: elements[start : start + limit]}
            for page, start in enumerate(range(limit, len(elements), limit), 1)
        ]  # fmt: skip
        doc[name] = elements[:limit]
        doc[step.params["flag_field"]] = True
        return Result(doc, {step.params["overflow_collection"]: overflow})

    def written_fields(self, step: Step) -> set[str]:
        p = step.params
        return {p["field"], p["flag_field"]}

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

    def verify_files(
        self,
        step: Step,
        stats: dict[str, Any],
        documents: Callable[[str], Iterable[Document]],
        count: Callable[[str], int],
    ) -> list[str]:
        """Every element is still there: kept embedded or moved to an overflow page."""
        field = step.params["field"]
        kept = sum(len(d.get(field) or []) for d in documents(step.collection))
        moved = sum(len(d.get(field) or []) for d in documents(step.params["overflow_collection"]))
        expected = stats.get("elements", 0)
        if kept + moved != expected:
            return [f"{step.collection}.{field}: {kept} kept + {moved} moved, expected {expected}"]
        return []
