"""MP204 too_many_indexes: a collection with more indexes than writes can afford."""

from __future__ import annotations

from mongopat.rules import register
from mongopat.rules.base import CollectionEvidence, Recommendation, Rule


@register
class TooManyIndexesRule(Rule):
    """Every index is updated on every insert and on updates of its fields, and competes for cache.
    Warning from ``max_indexes`` indexes on one collection (MongoDB allows 64)."""

    code = "MP204"
    name = "too_many_indexes"
    kind = "anti-pattern"
    title = "Too many indexes"
    defaults = {"max_indexes": 30}

    def check(self, collection: CollectionEvidence) -> list[Recommendation]:
        indexes = collection.data.get("indexes", [])
        if len(indexes) < self.threshold("max_indexes"):
            return []
        return [
            self.finding(
                collection.name,
                [],
                "warning",
                0.9,
                {"indexes": len(indexes), "names": [i["name"] for i in indexes]},
                f"{collection.name} has {len(indexes)} indexes, each maintained on every write. Look for unused and "
                "prefix-redundant ones; sparse per-field indexes are often replaced by the attribute pattern.",
            )
        ]
