"""Kinds of documents side by side in one collection, read off the report's shapes.

Shared by the polymorphic rule (which recommends modelling the kinds) and the attribute rule (which must
not read the kinds' own fields as sparse attributes): both answer the same evidence, so they read it
through one function.
"""

from __future__ import annotations

from dataclasses import dataclass

from mongopat.rules.base import CollectionEvidence

DISCRIMINATOR_NAMES = ("type", "kind", "category", "class", "_type", "_t", "activityType", "eventType")


@dataclass
class Kind:
    fields: list[str]  # every top-level field of the shape
    specific: list[str]  # fields beyond the core (some other kind may have them too)
    own: list[str]  # fields no other kind has
    documents: int


@dataclass
class Kinds:
    kinds: list[Kind]
    core: list[str]  # fields every kind has (``_id`` aside)
    discriminator: str | None  # a core field whose few values tell the kinds apart

    def kind_of(self, field: str) -> int | None:
        """Index of the kind whose own field ``field`` is, if any."""
        return next((index for index, kind in enumerate(self.kinds) if field in kind.own), None)


def find_kinds(collection: CollectionEvidence, min_shape_share: float, min_core_fields: int) -> Kinds | None:
    """At least two shapes, each holding ``min_shape_share`` of the documents, that coexist in time (not a
    schema change), share ``min_core_fields`` fields, and of which at least two have fields of their own."""
    drift = collection.data.get("drift") or {}
    shapes = drift.get("shapes", [])
    total = sum(s["documents"] for s in shapes)
    major = [s for s in shapes if total and s["documents"] / total >= min_shape_share]
    if len(major) < 2 or drift.get("appeared") or drift.get("vanished"):
        return None  # one shape, or shapes that follow each other in time (schema versioning's case)
    core = set.intersection(*(set(s["fields"]) for s in major)) - {"_id"}
    if len(core) < min_core_fields:
        return None
    kinds = []
    for shape in major:
        others = set().union(*(set(o["fields"]) for o in major if o is not shape))
        own = sorted(set(shape["fields"]) - others)
        specific = sorted(set(shape["fields"]) - core - {"_id"})
        kinds.append(Kind(sorted(shape["fields"]), specific, own, shape["documents"]))
    # Kinds have fields of their own; a shape that only lacks an optional field is not a kind.
    if sum(1 for kind in kinds if kind.own) < 2:
        return None
    return Kinds(kinds, sorted(core), _discriminator(collection, core, len(major)))


def _discriminator(collection: CollectionEvidence, core: set[str], kinds: int) -> str | None:
    candidates = []
    for name in core:
        field = collection.field(name)
        card = field.get("cardinality") if field else None
        if not card or not card.get("top") or collection.dominant_type(name) != "string":
            continue
        if 2 <= card["distinct"] <= max(kinds * 2, 10):
            candidates.append((name in DISCRIMINATOR_NAMES, -abs(card["distinct"] - kinds), name))
    return max(candidates)[2] if candidates else None
