"""MP205 unused_indexes: indexes with no recorded use."""

from __future__ import annotations

from mongopat.indexes import catalog
from mongopat.indexes.planner import best
from mongopat.indexes.selectivity import Selectivity
from mongopat.indexes.shape import declared_reads
from mongopat.rules import register
from mongopat.rules.base import CollectionEvidence, Recommendation, Rule


@register
class UnusedIndexesRule(Rule):
    """An index that no query uses still costs a write on every insert and space in the cache. Reported
    where ``$indexStats`` gave usage: indexes with at most ``max_ops`` uses, other than ``_id_``, unique
    indexes (they enforce a constraint) and TTL indexes (used by the TTL monitor, not by queries). An index
    that a declared read of the access file would use is not reported: usage counters restart with the
    server, and a read that runs once a month has not run yet."""

    code = "MP205"
    name = "unused_indexes"
    kind = "anti-pattern"
    title = "Unused index"
    defaults = {"max_ops": 0}

    def check(self, collection: CollectionEvidence) -> list[Recommendation]:
        found = []
        used = self._declared_use(collection)
        for index in collection.data.get("indexes", []):
            usage = index.get("usage")
            if usage is None or index["name"] == "_id_" or index.get("unique") or index.get("ttl_seconds") is not None:
                continue
            if usage["ops"] > self.threshold("max_ops") or index["name"] in used:
                continue
            found.append(
                self.finding(
                    collection.name,
                    [name for name, _direction in index["key"]],
                    "warning",
                    0.7,
                    {"index": index["name"], "ops": usage["ops"], "since": usage.get("since")},
                    f"Index {index['name']} on {collection.name} has been used {usage['ops']} times since "
                    f"{usage.get('since') or 'the last restart'}. Usage counters reset on restart and are per node: "
                    "confirm on every member, then hide it (hideIndex) before dropping it.",
                    migration={"step": "drop_index", "collection": collection.name, "name": index["name"]},
                )
            )
        return found

    def _declared_use(self, collection: CollectionEvidence) -> set[str]:
        """Names of the indexes the declared reads of the collection would use."""
        if self.context.access is None:
            return set()
        indexes = catalog.listed(collection.data.get("indexes"))
        selectivity = Selectivity(collection, collection.declared_inserts())
        reads = declared_reads(self.context.access).get(collection.name, [])
        chosen = (best(read, indexes, selectivity) for read in reads)
        return {plan.index.name for plan in chosen if plan is not None and plan.index is not None}
