"""References: fields whose values are ``_id``s of a collection (the same one, for trees).

A field is a candidate when its values are ObjectIds, or when its name says it refers to something
(``customerId``, ``parent``, ``ancestors``...) and its type matches the target's ``_id`` type. Up to
``MAX_CANDIDATES`` of its distinct values are looked up among the target's ``_id``s: in the target's
distinct sketch when every target document was read (exact for the values the sketch can decide), or by
one ``$in`` query on the server otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from mongopat.analysis.collection import CollectionAnalysis
from mongopat.analysis.schema import Slot, iter_slots
from mongopat.sources.base import Source

MAX_CANDIDATES = 200
MIN_MATCH_RATE = 0.2
REFERENCE_NAME = re.compile(
    r"(?:Id|_id|ID|Ids|_ids|IDs|Ref|_ref|Refs|_refs)$|^(?:parent|ancestors|children|ref|owner|author)",
    re.IGNORECASE,
)


def _dominant_type(slot: Slot) -> str | None:
    if not slot.types:
        return None
    name, count = slot.types.most_common(1)[0]
    return name if count >= 0.9 * sum(slot.types.values()) else None


def _value_slots(analysis: CollectionAnalysis) -> Iterator[tuple[str, Slot]]:
    """Scalar-valued places: fields, and the elements of arrays of scalars (``ancestors[]``)."""
    for slot, _parent in iter_slots(analysis.root):
        if slot.path == "_id":
            continue
        if slot.types:
            yield slot.path, slot
        if slot.element is not None and slot.element.types:
            yield slot.element.path, slot.element


def find_references(analyses: dict[str, CollectionAnalysis], source: Source) -> None:
    """Fill ``analysis.references`` for every analysed collection."""
    targets = {}
    for name, analysis in analyses.items():
        id_slot = analysis.root.fields.get("_id")
        if id_slot is not None and _dominant_type(id_slot):
            targets[name] = id_slot
    for analysis in analyses.values():
        found: list[dict[str, Any]] = []
        for path, slot in _value_slots(analysis):
            kind = _dominant_type(slot)
            if kind is None:
                continue
            leaf = path.rsplit(".", 1)[-1].rstrip("[]")
            if kind != "objectId" and not REFERENCE_NAME.search(leaf):
                continue
            for target, id_slot in targets.items():
                if _dominant_type(id_slot) != kind:
                    continue
                result = _match(slot, target, id_slot, analyses[target], source)
                if result is None:
                    continue
                checked, matched, method = result
                if checked and matched / checked >= MIN_MATCH_RATE:
                    found.append(
                        {
                            "field": path,
                            "target": target,
                            "checked": checked,
                            "matched": matched,
                            "match_rate": round(matched / checked, 4),
                            "method": method,
                        }
                    )
        found.sort(key=lambda ref: (-ref["match_rate"], ref["field"]))
        analysis.references = found


def _match(
    slot: Slot, target: str, id_slot: Slot, target_analysis: CollectionAnalysis, source: Source
) -> tuple[int, int, str] | None:
    target_sketch = id_slot.distinct
    complete = target_analysis.sampling is not None and target_analysis.sampling.complete
    if complete:
        candidates = [v for v in slot.distinct.values if v is not None and target_sketch.passes_filter(v)][
            :MAX_CANDIDATES
        ]
        if not candidates:
            return None
        matched = sum(1 for v in candidates if v in target_sketch)
        return len(candidates), matched, "sketch"
    candidates = [v for v in slot.distinct.values if v is not None][:MAX_CANDIDATES]
    if not candidates:
        return None
    matched = source.count_existing_ids(target, candidates)
    if matched is None:
        return None
    return len(candidates), matched, "query"
