"""MP107 attribute: many sparse fields with similar roles, which queries filter on."""

from __future__ import annotations

from mongopat.rules import register
from mongopat.rules.base import CollectionEvidence, Recommendation, Rule

CONTAINERS = ("object", "array")


@register
class AttributeRule(Rule):
    """A catalog whose products carry different specifications (screen size for phones, RAM for laptops)
    ends up with many fields that each appear in few documents, and an index per field to search them.
    Moving them into one array of ``{k, v}`` pairs lets one compound index on ``k`` and ``v`` serve every
    attribute. Fires when at least ``min_sparse_fields`` top-level scalar fields each appear in at most
    ``max_presence`` of the documents; severity rises when declared queries filter on them."""

    code = "MP107"
    name = "attribute"
    title = "Pivot sparse fields into an array of key/value pairs"
    defaults = {"min_sparse_fields": 8, "max_presence": 0.5, "min_documents": 20}

    def check(self, collection: CollectionEvidence) -> list[Recommendation]:
        if collection.documents_read < self.threshold("min_documents"):
            return []
        sparse = [
            f["path"] for f in collection.top_level()
            if f["path"] != "_id" and (f["presence"] or 0) <= self.threshold("max_presence")
            and f["types"] and not any(t["type"] in CONTAINERS for t in f["types"])
        ]  # fmt: skip
        if len(sparse) < self.threshold("min_sparse_fields"):
            return []
        queried = sorted(
            {
                name
                for q in (collection.access.queries if collection.access else [])
                for name in q.filter
                if name in sparse
            }
        )
        presence = [collection.field(p)["presence"] for p in sparse]
        return [
            self.finding(
                collection.name,
                sparse,
                "warning" if queried else "info",
                0.45 + min(0.3, len(sparse) / 50) + (0.2 if queried else 0),
                {
                    "sparse_fields": len(sparse),
                    "median_presence": sorted(presence)[len(presence) // 2],
                    "max_presence": max(presence),
                    "fields_filtered_by_queries": queried,
                    "indexes": len(collection.data.get("indexes", [])),
                },
                f"{collection.name} has {len(sparse)} fields that each appear in at most "
                f"{max(presence) * 100:.0f}% of documents. As an 'attributes' array of {{k, v}} pairs they can be "
                "searched with one index on attributes.k and attributes.v instead of one index per field"
                + (f"; queries already filter on {', '.join(queried)}." if queried else "."),
                tradeoffs=[
                    "Queries use $elemMatch on {k, v} instead of plain field names.",
                    "Values of one key may mix types; validation per key moves to the application.",
                ],
                migration={
                    "step": "attribute",
                    "collection": collection.name,
                    "fields": sparse,
                    "into": "attributes",
                    "index": {"attributes.k": 1, "attributes.v": 1},
                },
            )
        ]
