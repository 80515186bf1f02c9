"""MP103 subset: screens show only the first N elements of a large embedded array."""

from __future__ import annotations

from mongopat.rules import register
from mongopat.rules.base import CollectionEvidence, Recommendation, Rule


@register
class SubsetRule(Rule):
    """When reads show only a slice of an embedded array (the ten newest comments) while the array keeps
    growing, embedding just that slice and moving the full list to its own collection keeps the hot
    document small. Fires for a query declaring ``embed: {field, limit}`` when the measured array's p95
    exceeds ``length_factor`` times the limit (or, with no data for it, as information); and for a list
    view (a query with ``fields``) that leaves out an array of at least ``list_view_p95`` elements at p95
    in documents of at least ``list_view_bytes`` at the median: every read drags that array along."""

    code = "MP103"
    name = "subset"
    title = "Embed only the subset of an array that reads use"
    defaults = {"length_factor": 2, "list_view_p95": 100, "list_view_bytes": 16384}

    def check(self, collection: CollectionEvidence) -> list[Recommendation]:
        if not collection.access:
            return []
        found = self._list_views(collection)
        for query in collection.access.queries:
            embed = query.embed
            if embed is None or embed.limit is None:
                continue
            field = collection.field(embed.field)
            array = field.get("array") if field else None
            if array:
                if (array["p95"] or 0) <= self.threshold("length_factor") * embed.limit:
                    continue
                severity = "warning" if (array["max"] or 0) >= 10 * embed.limit else "info"
                confidence = 0.85
                measured = f"measured p95 {array['p95']:,} and max {array['max']:,} elements"
            else:
                severity, confidence, measured = "info", 0.4, "no measured data for the array"
            reads = query.per_sec or 0
            found.append(
                self.finding(
                    collection.name,
                    [embed.field],
                    severity,
                    confidence,
                    {
                        "query": query.name,
                        "reads_per_sec": reads,
                        "shown": embed.limit,
                        "length_p95": array["p95"] if array else None,
                        "length_max": array["max"] if array else None,
                        "median_document_bytes": collection.size.get("p50"),
                    },
                    f"The {query.name} read ({reads:,.0f}/s) shows {embed.limit} elements of {embed.field}, "
                    f"{measured}. Keeping only the {embed.limit} needed elements embedded and the full list in its "
                    f"own collection means each read moves a fraction of the document.",
                    tradeoffs=[
                        "Writes touch two places: the full collection and the embedded slice ($push with $slice).",
                        "Pages beyond the first need a query on the full collection.",
                    ],
                    migration={
                        "step": "subset",
                        "collection": collection.name,
                        "field": embed.field,
                        "keep": embed.limit,
                        "sort": embed.sort,
                        "full_collection": f"{collection.name}_{embed.field}",
                    },
                )
            )
        return found

    def _list_views(self, collection: CollectionEvidence) -> list[Recommendation]:
        found: list[Recommendation] = []
        median = collection.size.get("p50") or 0
        if median < self.threshold("list_view_bytes"):
            return found
        embedded = {q.embed.field for q in collection.access.queries if q.embed} if collection.access else set()
        for query in collection.access.queries if collection.access else []:
            if not query.fields:
                continue
            for field in collection.arrays():
                path, array = field["path"], field["array"]
                if field["depth"] != 1 or path in embedded or path in query.fields:
                    continue
                if (array["p95"] or 0) < self.threshold("list_view_p95"):
                    continue
                keep = 10
                found.append(
                    self.finding(
                        collection.name,
                        [path],
                        "info",
                        0.6,
                        {
                            "query": query.name,
                            "fields_read": query.fields,
                            "array": path,
                            "length_p95": array["p95"],
                            "median_document_bytes": median,
                            "reads_per_sec": query.per_sec,
                        },
                        f"{query.name} reads {', '.join(query.fields)} from {collection.name}, whose median "
                        f"document is {median:,} bytes because {path} holds {array['p95']:,} elements at p95. "
                        f"Keeping a short subset of {path} embedded and the full list in its own collection "
                        "makes those reads light.",
                        tradeoffs=["Writes update both the embedded subset and the full collection."],
                        migration={
                            "step": "subset",
                            "collection": collection.name,
                            "field": path,
                            "keep": keep,
                            "sort": {},
                            "full_collection": f"{collection.name}_{path}",
                        },
                    )
                )
        return found
