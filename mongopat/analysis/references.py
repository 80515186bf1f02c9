"""References: fields whose values are ``_id``s of a collection (the same one, for trees).

A field is a candidate when its values are ObjectIds, or when its name says it refers to something
(``customerId``, ``parent``, ``ancestors``, or a collection's name: ``images`` of integers beside an
``images`` collection) and its values are of the target ``_id``'s kind: numbers
compare as MongoDB compares them (``3.0 == 3``, whatever their BSON types). Up to ``MAX_CANDIDATES`` of its
distinct values are looked up among the target's ``_id``s: in the target's distinct sketch when every
target document was read (exact for the values the sketch can decide), or by one ``$in`` query on the
server otherwise.

A field references at most one collection. Dense small integers match any collection whose ``_id``s are
1..N by chance, so where the target's ``_id``s fill most of the range the field's values fall in, a match
says nothing by itself: the field's name must name the target (``student_id`` and ``students``). Among the
targets left, the one the field names wins, then the higher match rate; two that cannot be told apart make
the field *ambiguous* (``ambiguous_references``), which no rule builds on.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mongopat.analysis.collection import CollectionAnalysis
from mongopat.analysis.schema import Slot, iter_slots
from mongopat.analysis.sketches import stable_order
from mongopat.sources.base import Source

MAX_CANDIDATES = 200
MIN_MATCH_RATE = 0.2
# A match rate no better than this many times what chance gives (the target's density over the values'
# range) is no evidence of a reference without the field's name.
CHANCE_MARGIN = 2.0
REFERENCE_NAME = re.compile(
    r"(?:Id|_id|ID|Ids|_ids|IDs|Ref|_ref|Refs|_refs)$|^(?:parent|ancestors|children|ref|owner|author)",
    re.IGNORECASE,
)
_SUFFIX = re.compile(r"(?:_?ids?|_?refs?)$", re.IGNORECASE)
# Names that point into the collection itself (a hierarchy).
SELF_NAMES = ("parent", "parents", "ancestors", "children", "child")
NUMBERS = ("int", "long", "double", "decimal")


def _kind(type_name: str) -> str:
    """What MongoDB compares alike: every numeric BSON type is one kind."""
    return "number" if type_name in NUMBERS else type_name


def _dominant_kind(slot: Slot) -> str | None:
    if not slot.types:
        return None
    kinds: dict[str, int] = {}
    for name, count in slot.types.items():
        kinds[_kind(name)] = kinds.get(_kind(name), 0) + count
    name, count = max(kinds.items(), key=lambda item: item[1])
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


def names_collection(path: str, collection: str) -> bool:
    """Whether a field's name names ``collection``: ``customerId`` and ``customers``, ``category_id`` and
    ``categories``, ``parent`` and the collection the field is in (checked by the caller)."""
    leaf = path.rsplit(".", 1)[-1].replace("[]", "")
    stem = _SUFFIX.sub("", leaf).rstrip("_").lower()
    target = collection.lower().replace("-", "_")
    if not stem:
        return False
    forms = {stem, stem + "s", stem + "es"}
    if stem.endswith("y"):
        forms.add(stem[:-1] + "ies")
    return target in forms or target.split(".")[-1] in forms


@dataclass
class Candidate:
    target: str
    checked: int
    matched: int
    method: str
    named: bool  # the field's name names the target (or is a parent/ancestors field of its own collection)
    chance: float | None  # the match rate dense ids would give by chance, where it can be told

    @property
    def rate(self) -> float:
        return self.matched / self.checked

    def evidence(self) -> bool:
        """A match that is more than chance, or that the field's name backs."""
        if self.rate < MIN_MATCH_RATE:
            return False
        return self.named or self.chance is None or self.rate > CHANCE_MARGIN * self.chance

    def to_dict(self, path: str) -> dict[str, Any]:
        return {
            "field": path,
            "target": self.target,
            "checked": self.checked,
            "matched": self.matched,
            "match_rate": round(self.rate, 4),
            "method": self.method,
            "named": self.named,
            "chance_rate": None if self.chance is None else round(self.chance, 4),
        }


def find_references(analyses: dict[str, CollectionAnalysis], source: Source) -> None:
    """Fill ``analysis.references`` (and ``analysis.ambiguous_references``) for every analysed collection."""
    targets = {}
    for name, analysis in analyses.items():
        id_slot = analysis.root.fields.get("_id")
        if id_slot is not None and _dominant_kind(id_slot):
            targets[name] = id_slot
    for own, analysis in analyses.items():
        found: list[dict[str, Any]] = []
        ambiguous: list[dict[str, Any]] = []
        for path, slot in _value_slots(analysis):
            kind = _dominant_kind(slot)
            if kind is None:
                continue
            leaf = path.rsplit(".", 1)[-1].rstrip("[]")
            if (
                kind != "objectId"
                and not REFERENCE_NAME.search(leaf)
                and not any(names_collection(path, t) for t in targets)
            ):
                continue  # numbers and strings are looked up only where the field's name says they refer
            candidates = []
            for target, id_slot in targets.items():
                if _dominant_kind(id_slot) != kind:
                    continue
                result = _match(slot, target, id_slot, analyses[target], source)
                if result is None:
                    continue
                checked, matched, method = result
                if not checked:
                    continue
                named = names_collection(path, target) or (target == own and leaf.lower() in SELF_NAMES)
                chance = _chance(slot, id_slot) if kind == "number" else None
                candidate = Candidate(target, checked, matched, method, named, chance)
                if candidate.evidence():
                    candidates.append(candidate)
            if not candidates:
                continue
            candidates.sort(key=lambda c: (not c.named, -c.rate, c.target))
            best = candidates[0]
            rival = candidates[1] if len(candidates) > 1 else None
            if rival is not None and rival.named == best.named and abs(rival.rate - best.rate) < 0.05:
                ambiguous.append({"field": path, "targets": [c.to_dict(path) for c in candidates]})
                continue
            found.append(best.to_dict(path))
        found.sort(key=lambda ref: (-ref["match_rate"], ref["field"]))
        analysis.references = found
        analysis.ambiguous_references = ambiguous


def _numbers(values: Any) -> list[float]:
    return [v for v in values if type(v) in (int, float) or isinstance(v, int)]


def _chance(slot: Slot, id_slot: Slot) -> float | None:
    """The share of the field's values that would match the target's ``_id``s by chance: the density of
    those ``_id``s over the range the values fall in (None when they are not integers)."""
    ids = _numbers(id_slot.distinct.values)
    values = _numbers(slot.distinct.values)
    if not ids or not values or any(float(v) != int(v) for v in ids[:1000]):
        return None
    low, high = max(min(values), min(ids)), min(max(values), max(ids))
    if high < low:
        return 0.0
    inside = sum(1 for v in ids if low <= v <= high) << id_slot.distinct.level
    return min(1.0, inside / (high - low + 1))


def _match(
    slot: Slot, target: str, id_slot: Slot, target_analysis: CollectionAnalysis, source: Source
) -> tuple[int, int, str] | None:
    target_sketch = id_slot.distinct
    complete = target_analysis.sampling is not None and target_analysis.sampling.complete
    values = stable_order(v for v in slot.distinct.values if v is not None)
    if complete:
        candidates = [v for v in values if target_sketch.passes_filter(v)][:MAX_CANDIDATES]
        if not candidates:
            return None
        matched = sum(1 for v in candidates if v in target_sketch)
        return len(candidates), matched, "sketch"
    candidates = values[:MAX_CANDIDATES]
    if not candidates:
        return None
    matched = source.count_existing_ids(target, candidates)
    if matched is None:
        return None
    return len(candidates), matched, "query"
