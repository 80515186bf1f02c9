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
    defaults = {"max_subset": 100, "min_bucket": 10, "max_bucket": 1000, "max_bucket_bytes": 2 * 1024 * 1024}

    def _bucket_size(self, collection: CollectionEvidence, evidence: dict) -> list[Recommendation]:
        median = evidence["readings_p50"] or 0
        largest = evidence["bucket_bytes_max"] or 0
        problems = []
        if median < self.threshold("min_bucket"):
            problems.append(("small", f"hold {median} readings at the median"))
        elif median > self.threshold("max_bucket"):
            problems.append(("large", f"hold {median} readings at the median"))
        if largest > self.threshold("max_bucket_bytes"):
            problems.append(("large", f"reach {largest:,} bytes (largest bucket)"))
        if not problems:
            return []
        size = problems[0][0]
        return [
            self.finding(
                collection.name,
                [evidence["array"]],
                "error" if largest > 8 * 1024 * 1024 else "warning",
                0.6,
                {
                    "field": evidence["array"],
                    "median_bucket_length": median,
                    **evidence,
                    "min_bucket": self.threshold("min_bucket"),
                    "max_bucket": self.threshold("max_bucket"),
                    "max_bucket_bytes": self.threshold("max_bucket_bytes"),
                },
                f"Buckets in {collection.name}.{evidence['array']} {' and '.join(p[1] for p in problems)}: too "
                f"{size}. Resize the bucket window (or cap the readings per bucket) so that buckets hold tens to "
                "hundreds of measurements and stay far below the 16 MiB document limit: every push rewrites the "
                "bucket.",
                title=f"Buckets too {size}",
            )
        ]

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
        for bucketed in collection.in_place("bucket"):
            found.extend(self._bucket_size(collection, bucketed["evidence"]))
        for embedded in collection.in_place("subset"):
            evidence = embedded["evidence"]
            median = evidence["embedded_p50"] or 0
            if median > self.threshold("max_subset"):
                found.append(
                    self.finding(
                        collection.name,
                        [evidence["array"]],
                        "warning",
                        0.65,
                        {**evidence, "max_subset": self.threshold("max_subset")},
                        f"{collection.name}.{evidence['array']} embeds {median} elements at the median next to "
                        f"{evidence['count_field']}: a subset that large keeps documents big. Embed what the first "
                        "screen shows and page the rest from the full list.",
                        title="Subset too large",
                    )
                )
        return found
