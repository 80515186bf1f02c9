"""MP209 over_embedding: deeply nested documents, or large arrays of large sub-documents."""

from __future__ import annotations

from mongopat.rules import register
from mongopat.rules.base import CollectionEvidence, Recommendation, Rule


@register
class OverEmbeddingRule(Rule):
    """Embedding is right for data read together, but documents nested ``max_depth`` levels deep, or
    arrays (p95 of at least ``min_array_length``) of sub-documents with ``min_element_fields`` fields or
    more, usually hold entities of their own that are read and updated apart from the parent."""

    code = "MP209"
    name = "over_embedding"
    kind = "anti-pattern"
    title = "Too much embedded in one document"
    defaults = {"max_depth": 5, "min_array_length": 50, "min_element_fields": 15}

    def check(self, collection: CollectionEvidence) -> list[Recommendation]:
        found = []
        depth = collection.data.get("max_depth") or 0
        if depth >= self.threshold("max_depth"):
            deepest = max(collection.fields.values(), key=lambda f: f["depth"])
            found.append(
                self.finding(
                    collection.name,
                    [deepest["path"]],
                    "warning",
                    0.6,
                    {"max_depth": depth, "deepest_path": deepest["path"]},
                    f"{collection.name} nests documents {depth} levels deep ({deepest['path']}). Deep nesting makes "
                    "queries, updates and indexes on inner fields awkward; flatten it or move inner entities out.",
                )
            )
        for field in collection.arrays():
            prefix = field["path"] + "[]."
            element_fields = [p for p in collection.fields if p.startswith(prefix) and "." not in p[len(prefix) :]]
            if (field["array"]["p95"] or 0) >= self.threshold("min_array_length") and len(
                element_fields
            ) >= self.threshold("min_element_fields"):
                found.append(
                    self.finding(
                        collection.name,
                        [field["path"]],
                        "warning",
                        0.6,
                        {
                            "field": field["path"],
                            "length_p95": field["array"]["p95"],
                            "element_fields": len(element_fields),
                        },
                        f"{collection.name}.{field['path']} embeds {field['array']['p95']}+ sub-documents of "
                        f"{len(element_fields)} fields each: these look like entities of their own.",
                    )
                )
        return found
