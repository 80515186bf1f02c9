"""MP202 bloated_documents: documents that are large, or close to the 16 MiB limit."""

from __future__ import annotations

from mongopat.rules import register
from mongopat.rules.base import CollectionEvidence, Recommendation, Rule

MIB = 1024 * 1024


@register
class BloatedDocumentsRule(Rule):
    """Large documents fill the cache with bytes most reads do not need and approach MongoDB's 16 MiB
    document limit. Warning when p95 size reaches ``warn_p95_bytes``; error when any document reaches
    ``error_max_bytes`` (half the limit by default)."""

    code = "MP202"
    name = "bloated_documents"
    kind = "anti-pattern"
    title = "Documents too large"
    defaults = {"warn_p95_bytes": MIB, "error_max_bytes": 8 * MIB}

    def check(self, collection: CollectionEvidence) -> list[Recommendation]:
        size = collection.size
        if not size.get("count"):
            return []
        p95, maximum = size["p95"] or 0, size["max"] or 0
        if maximum >= self.threshold("error_max_bytes"):
            severity = "error"
        elif p95 >= self.threshold("warn_p95_bytes"):
            severity = "warning"
        else:
            return []
        largest = max(collection.arrays(), key=lambda f: f["array"]["max"] or 0, default=None)
        return [
            self.finding(
                collection.name,
                [largest["path"]] if largest else [],
                severity,
                0.9,
                {
                    "p50_bytes": size["p50"],
                    "p95_bytes": p95,
                    "max_bytes": maximum,
                    "over_1mb": size.get("over_1mb"),
                    "over_8mb": size.get("over_8mb"),
                    "largest_array": largest["path"] if largest else None,
                },
                f"Documents of {collection.name} reach {maximum / MIB:,.1f} MiB (p95 {p95 / MIB:,.2f} MiB; "
                "the limit is 16 MiB). Split rarely read parts into another collection, or cap the arrays that grow.",
                tradeoffs=["Reads that need the split-off parts need a second query."],
            )
        ]
