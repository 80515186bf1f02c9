"""MP207 subset_or_bucket_size: an embedded subset, or existing buckets, sized badly."""

from __future__ import annotations

from mongopat.rules import register
from mongopat.rules.base import CollectionEvidence, Recommendation, Rule


@register
class SubsetOrBucketSizeRule(Rule):
    """A subset that embeds hundreds of elements has lost the point of the pattern; buckets that hold a
    handful of measurements do not save enough documents, and buckets of thousands are large to
    rewrite on every push. Warns when a declared ``embed.limit`` exceeds ``max_subset``, or when a
    bucket-shaped collection (an array of timestamped documents and a count field) holds fewer than
    ``min_bucket`` or more than ``max_bucket`` elements per document at the median."""

    code = "MP207"
    name = "subset_or_bucket_size"
    kind = "anti-pattern"
    title = "Subset or bucket sized badly"
    defaults = {"max_subset": 100, "min_bucket": 10, "max_bucket": 1000}

    def check(self, collection: CollectionEvidence) -> list[Recommendation]:
        found = []
        for query in collection.access.queries if collection.access else []:
            if query.embed and query.embed.limit and query.embed.limit > self.threshold("max_subset"):
                found.append(
                    self.finding(
                        collection.name,
                        [query.embed.field],
                        "warning",
                        0.7,
                        {
                            "query": query.name,
                            "embed_limit": query.embed.limit,
                            "max_subset": self.threshold("max_subset"),
                        },
                        f"{query.name} embeds {query.embed.limit} elements of {query.embed.field}: a subset that large "
                        "keeps documents big. Embed what the first screen shows and page the rest from the full list.",
                        title="Subset too large",
                    )
                )
        has_count = any(f["path"] in ("count", "nReadings", "n", "size") for f in collection.top_level())
        for field in collection.arrays():
            if field["depth"] != 1 or not has_count:
                continue
            timestamped = any(
                collection.dominant_type(path) == "date"
                for path in collection.fields
                if path.startswith(field["path"] + "[].")
            )
            median = field["array"]["p50"] or 0
            if not timestamped:
                continue
            if median < self.threshold("min_bucket") or median > self.threshold("max_bucket"):
                size = "small" if median < self.threshold("min_bucket") else "large"
                found.append(
                    self.finding(
                        collection.name,
                        [field["path"]],
                        "warning",
                        0.6,
                        {
                            "field": field["path"],
                            "median_bucket_length": median,
                            "min_bucket": self.threshold("min_bucket"),
                            "max_bucket": self.threshold("max_bucket"),
                        },
                        f"Buckets in {collection.name}.{field['path']} hold {median} elements at the median: "
                        f"too {size}. "
                        "Resize the bucket window so that buckets hold tens to hundreds of measurements.",
                        title=f"Buckets too {size}",
                    )
                )
        return found
