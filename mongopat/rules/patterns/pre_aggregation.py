"""MP105 pre_aggregation: an aggregate over related documents, read far more often than they change."""

from __future__ import annotations

from mongopat.rules import register
from mongopat.rules.base import CollectionEvidence, Recommendation, Rule


@register
class PreAggregationRule(Rule):
    """A dashboard that sums or counts related documents (an account's deals) on every view repeats the
    same aggregation until a source document changes. Keeping the results in the parent document and
    updating them on each write to the source makes the read a single document fetch. Fires for an
    ``aggregate`` query whose rate is at least ``min_read_write_ratio`` times the declared writes of the
    source collection."""

    code = "MP105"
    name = "pre_aggregation"
    title = "Keep aggregates of related documents up to date in the parent"
    defaults = {"min_read_write_ratio": 5, "min_reads_per_sec": 1}

    def check(self, collection: CollectionEvidence) -> list[Recommendation]:
        if not collection.access:
            return []
        found = []
        for query in collection.access.queries:
            spec = query.aggregate
            if spec is None:
                continue
            reads = query.per_sec or 0
            source_access = self.context.access_for(spec.source)
            source_writes = source_access.writes.total() if source_access else None
            ratio = reads / source_writes if source_writes else float("inf")
            if reads < self.threshold("min_reads_per_sec") or ratio < self.threshold("min_read_write_ratio"):
                continue
            source = self.context.collection(spec.source)
            fan_in = None
            if source is not None and source.count:
                keys = source.cardinality(spec.foreign)
                fan_in = round(source.count / keys, 1) if keys else None
            found.append(
                self.finding(
                    collection.name,
                    [*spec.compute],
                    "warning" if reads >= 50 else "info",
                    0.8 if source_writes is not None else 0.55,
                    {
                        "query": query.name,
                        "reads_per_sec": reads,
                        "source": spec.source,
                        "source_writes_per_sec": source_writes,
                        "read_write_ratio": None if ratio == float("inf") else round(ratio, 1),
                        "source_documents_per_parent": fan_in,
                        "compute": spec.compute,
                    },
                    f"{query.name} aggregates {spec.source} by {spec.foreign} on every read ({reads:,.0f}/s)"
                    + (f", about {fan_in:,} documents each time" if fan_in else "")
                    + (
                        f", while {spec.source} changes {source_writes:,.2f} times/s"
                        if source_writes is not None
                        else ""
                    )
                    + ". Keeping the results in the parent document and updating them with each source write "
                    "serves the read from one document.",
                    tradeoffs=[
                        "Each write to the source also updates the parent's aggregates ($inc, or a recompute).",
                        "Figures can lag if that second update fails: schedule a periodic reconciliation.",
                    ],
                    migration={
                        "step": "pre_aggregation",
                        "collection": collection.name,
                        "from": spec.source,
                        "local": spec.local,
                        "foreign": spec.foreign,
                        "compute": spec.compute,
                        "into": query.name,
                    },
                )
            )
        return found
