"""MP108 polymorphic: documents of several kinds in one collection, or kinds split over collections."""

from __future__ import annotations

from mongopat.rules import register
from mongopat.rules.base import CollectionEvidence, Recommendation, Rule
from mongopat.rules.kinds import find_kinds


@register
class PolymorphicRule(Rule):
    """Documents that share a core of fields but differ by kind (activity types in a feed, product
    categories) belong in one collection with a field that says the kind, so that one query and one index
    serve all kinds while each kind keeps its own fields. Fires when at least two shapes, each holding at
    least ``min_shape_share`` of the documents, coexist in time (not a schema change) and share at least
    ``min_core_fields`` fields; or when collections share at least ``min_shared_fields`` top-level fields
    with a Jaccard similarity of at least ``min_similarity``, each with fields of its own (a collection
    holding all of another's fields and more, such as a copy with embeddings added, is not another kind)."""

    code = "MP108"
    name = "polymorphic"
    title = "Model documents of several kinds with a type field"
    defaults = {"min_shape_share": 0.05, "min_core_fields": 2, "min_shared_fields": 3, "min_similarity": 0.6}

    def check(self, collection: CollectionEvidence) -> list[Recommendation]:
        found = find_kinds(collection, self.threshold("min_shape_share"), self.threshold("min_core_fields"))
        if found is None:
            return []
        core, discriminator = found.core, found.discriminator
        specific = {",".join(kind.specific) or "(core only)": kind.documents for kind in found.kinds}
        rules = [{"when_has": kind.specific[0], "type": kind.specific[0]} for kind in found.kinds if kind.specific]
        evidence = {
            "shapes": len(found.kinds),
            "documents_by_shape": specific,
            "core_fields": core,
            "discriminator": discriminator,
        }
        if discriminator:
            rationale = (
                f"{collection.name} holds {len(found.kinds)} kinds of documents that share {', '.join(core)} and "
                f"differ by kind, told apart by '{discriminator}'. Treat it as one polymorphic collection: index "
                f"'{discriminator}' with the common query fields, filter on it, and validate each kind's fields."
            )
            migration = {"step": "create_index", "collection": collection.name, "keys": {discriminator: 1}}
        else:
            rationale = (
                f"{collection.name} holds {len(found.kinds)} shapes of documents side by side, sharing "
                f"{', '.join(core)}, with no field naming the kind. A 'type' field set from each shape's "
                "own fields makes the kinds explicit to queries, indexes and validation."
            )
            migration = {"step": "polymorphic", "collection": collection.name, "type_field": "type", "rules": rules}
        return [
            self.finding(
                collection.name,
                core,
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
                if similarity < self.threshold("min_similarity") or left_fields <= right_fields:
                    continue
                if right_fields <= left_fields:
                    continue  # one holds the other's fields and more: a copy extended, not two kinds
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
