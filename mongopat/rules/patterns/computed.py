"""MP104 computed: a value derived from the document's own fields on every read."""

from __future__ import annotations

from mongopat.rules import register
from mongopat.rules.base import CollectionEvidence, Recommendation, Rule


@register
class ComputedRule(Rule):
    """A value computed from the document on every read (an order total from its items) is computed
    again for each of thousands of reads per write. Storing it, and recomputing it only when the inputs
    change, moves the cost to the rare write. Fires for a ``derive`` entry whose field is not already
    stored (presence below ``stored_presence``) when reads exceed writes ``min_read_write_ratio`` times."""

    code = "MP104"
    name = "computed"
    title = "Store a value that is computed on every read"
    defaults = {"min_read_write_ratio": 10, "min_reads_per_sec": 1, "stored_presence": 0.95}

    def check(self, collection: CollectionEvidence) -> list[Recommendation]:
        if not collection.access:
            return []
        writes = collection.access.writes.total()
        found = []
        for query in collection.access.queries:
            reads = query.per_sec or 0
            for target, expression in query.derive.items():
                stored = collection.field(target)
                if stored and (stored["presence"] or 0) >= self.threshold("stored_presence"):
                    continue
                ratio = reads / writes if writes else float("inf")
                if reads < self.threshold("min_reads_per_sec") or ratio < self.threshold("min_read_write_ratio"):
                    continue
                prefix = expression.array_prefix()
                array = collection.field(prefix) if prefix else None
                per_read = array["array"]["mean"] if array and array.get("array") else None
                found.append(
                    self.finding(
                        collection.name,
                        [target, *expression.paths()],
                        "warning" if reads >= 100 else "info",
                        0.8 if collection.fields else 0.6,
                        {
                            "query": query.name,
                            "field": target,
                            "expression": expression.text,
                            "reads_per_sec": reads,
                            "writes_per_sec": writes,
                            "read_write_ratio": None if ratio == float("inf") else round(ratio, 1),
                            "elements_per_computation": per_read,
                            "stored_presence": stored["presence"] if stored else 0,
                        },
                        f"{query.name} computes {target} = {expression.text} on every read ({reads:,.0f}/s) while "
                        f"{collection.name} is written {writes:,.2f} times/s. Storing {target} in the document and "
                        "updating it with the inputs turns a per-read computation into a per-write one.",
                        tradeoffs=[
                            "Every write that changes the inputs must update the stored value in the same operation.",
                            "Documents written by older code need a backfill (the migration does it).",
                        ],
                        migration={
                            "step": "computed",
                            "collection": collection.name,
                            "field": target,
                            "expression": expression.text,
                        },
                    )
                )
        return found
