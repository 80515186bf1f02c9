"""MP203 too_many_collections: a database with a very large number of collections."""

from __future__ import annotations

from mongopat.rules import register
from mongopat.rules.base import Recommendation, Rule


@register
class TooManyCollectionsRule(Rule):
    """Each collection and index is a file with its own cache and checkpoint cost; tens of thousands of
    them (often one per tenant or per day) slow the whole deployment. Warning from ``max_collections``
    collections in one database."""

    code = "MP203"
    name = "too_many_collections"
    kind = "anti-pattern"
    title = "Too many collections"
    defaults = {"max_collections": 10000}

    def check_database(self) -> list[Recommendation]:
        count = len(self.context.collections)
        if count < self.threshold("max_collections"):
            return []
        return [
            self.finding(
                None,
                [],
                "warning",
                0.9,
                {"collections": count, "database": self.context.report["source"]["database"]},
                f"The database holds {count:,} collections. Collections split by tenant or date usually belong in "
                "one collection with that value as a field (and in the shard key or a TTL index).",
            )
        ]
