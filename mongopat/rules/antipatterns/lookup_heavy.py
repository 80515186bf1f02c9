"""MP206 lookup_heavy: most reads of a collection join another one."""

from __future__ import annotations

from mongopat.rules import register
from mongopat.rules.base import CollectionEvidence, Recommendation, Rule


@register
class LookupHeavyRule(Rule):
    """Data read together should be stored together: when most reads of a collection join another
    collection (``$lookup`` or a second query), the model follows tables rather than access patterns.
    Warning when joins make up at least ``min_share`` of the declared reads and at least
    ``min_lookups_per_sec`` per second."""

    code = "MP206"
    name = "lookup_heavy"
    kind = "anti-pattern"
    title = "Reads depend on joins"
    defaults = {"min_share": 0.5, "min_lookups_per_sec": 50}

    def check(self, collection: CollectionEvidence) -> list[Recommendation]:
        if not collection.access:
            return []
        reads = collection.access.reads_per_sec()
        joins = [q for q in collection.access.queries if q.lookup or q.aggregate]
        joined = sum(q.per_sec or 0 for q in joins)
        if not reads or joined < self.threshold("min_lookups_per_sec") or joined / reads < self.threshold("min_share"):
            return []
        return [
            self.finding(
                collection.name,
                sorted({(q.lookup or q.aggregate).local for q in joins}),
                "warning",
                0.8,
                {
                    "reads_per_sec": reads,
                    "join_reads_per_sec": joined,
                    "share": round(joined / reads, 2),
                    "queries": [q.name for q in joins],
                },
                f"{joined / reads * 100:.0f}% of the declared reads of {collection.name} ({joined:,.0f}/s) "
                "join another collection. Embed or copy what those reads need (extended reference, pre-aggregation).",
            )
        ]
