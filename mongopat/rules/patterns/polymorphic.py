"""MP108 polymorphic: documents of several kinds in one collection, or kinds split over collections."""

from __future__ import annotations

from mongopat.rules import register
from mongopat.rules.base import CollectionEvidence, Recommendation, Rule

DISCRIMINATOR_NAMES = ("type", "kind", "category", "class", "_type", "_t", "activityType", "eventType")


@register
class PolymorphicRule(Rule):
    """Documents that share a core of fields but differ by kind (activity types in a feed, product
    categories) belong in one collection with a field that says the kind, so that one query and one index
    serve all kinds while each kind keeps its own fields. Fires when at least two shapes, each holding at
    least ``min_shape_share`` of the documents, coexist in time (not a schema change) and share at least
    ``min_core_fields`` fields; or when collections share at least ``min_shared_fields`` top-level fields
    with a Jaccard similarity of at least ``min_similarity``."""

    code = "MP108"
    name = "polymorphic"
    title = "Model documents of several kinds with a type field"
    defaults = {"min_shape_share": 0.05, "min_core_fields": 2, "min_shared_fields": 3, "min_similarity": 0.6}

    def check(self, collection: CollectionEvidence) -> list[Recommendation]:
        drift = collection.data.get("drift") or {}
        total = sum(s["documents"] for s in drift.get("shapes", []))
        major = [
            s for s in drift.get("shapes", []) if total and s["documents"] / total >= self.threshold("min_shape_share")
        ]
        if len(major) < 2 or drift.get("appeared") or drift.get("vanished"):
            return []  # one shape, or shapes that follow each other in time (schema versioning's case)
        core = set.intersection(*(set(s["fields"]) for s in major)) - {"_id"}
        if len(core) < self.threshold("min_core_fields"):
            return []
        # Kinds have fields of their own; a shape that only lacks an optional field is not a kind.
        distinct = 0
        for shape in major:
            others = set().union(*(set(o["fields"]) for o in major if o is not shape))
            distinct += bool(set(shape["fields"]) - others)
        if distinct < 2:
            return []
        discriminator = self._discriminator(collection, core, len(major))
        specific = {",".join(sorted(set(s["fields"]) - core - {"_id"})) or "(core only)": s["documents"] for s in major}
        rules = []
        for shape in major:
            own = sorted(set(shape["fields"]) - core - {"_id"})
            if own:
                rules.append({"when_has": own[0], "type": own[0]})
        evidence = {
            "shapes": len(major),
            "documents_by_shape": specific,
            "core_fields": sorted(core),
            "discriminator": discriminator,
        }
        if discriminator:
            rationale = (
                f"{collection.name} holds {len(major)} kinds of documents that share {', '.join(sorted(core))} and "
                f"differ by kind, told apart by '{discriminator}'. Treat it as one polymorphic collection: index "
                f"'{discriminator}' with the common query fields, filter on it, and validate each kind's fields."
            )
            migration = {"step": "create_index", "collection": collection.name, "keys": {discriminator: 1}}
        else:
            rationale = (
                f"{collection.name} holds {len(major)} shapes of documents side by side, sharing "
                f"{', '.join(sorted(core))}, with no field naming the kind. A 'type' field set from each shape's "
                "own fields makes the kinds explicit to queries, indexes and validation."
            )
            migration = {"step": "polymorphic", "collection": collection.name, "type_field": "type", "rules": rules}
        return [
            self.finding(
                collection.name,
                sorted(core),
                "info",
                0.75 if discriminator else 0.6,
                evidence,
                rationale,
                tradeoffs=[
                    "Code reading the collection must branch on the type.",
                    "Per-kind constraints live in validation rules or the application, not in the collection.",
                ],
                migration=migration,
            )
        ]

    def _discriminator(self, collection: CollectionEvidence, core: set[str], kinds: int) -> str | None:
        candidates = []
        for name in core:
            field = collection.field(name)
            card = field.get("cardinality") if field else None
            if not card or not card.get("top") or collection.dominant_type(name) != "string":
                continue
            if 2 <= card["distinct"] <= max(kinds * 2, 10):
                candidates.append((name in DISCRIMINATOR_NAMES, -abs(card["distinct"] - kinds), name))
        return max(candidates)[2] if candidates else None

    def check_database(self) -> list[Recommendation]:
        found = []
        collections = self.context.collections
        for index, left in enumerate(collections):
            left_fields = {f["path"] for f in left.top_level()} - {"_id"}
            for right in collections[index + 1 :]:
                right_fields = {f["path"] for f in right.top_level()} - {"_id"}
                shared = left_fields & right_fields
                union = left_fields | right_fields
                if len(shared) < self.threshold("min_shared_fields") or not union:
                    continue
                similarity = len(shared) / len(union)
                if similarity < self.threshold("min_similarity") or left_fields == right_fields:
                    continue
                found.append(
                    self.finding(
                        None,
                        sorted(shared),
                        "info",
                        0.4 + similarity / 3,
                        {
                            "collections": [left.name, right.name],
                            "shared_fields": sorted(shared),
                            "similarity": round(similarity, 2),
                        },
                        f"{left.name} and {right.name} share {len(shared)} of their {len(union)} fields "
                        f"({', '.join(sorted(shared))}). If they are kinds of one thing that is queried together, "
                        "one collection with a type field serves both with one query and one index.",
                        tradeoffs=[
                            "Merging collections is a larger migration; keep them apart if never read together."
                        ],
                        migration=None,
                        title="Collections that look like kinds of one thing",
                    )
                )
        return found
