"""MP201 unbounded_arrays: arrays that grow without bound."""

from __future__ import annotations

from mongopat.rules import register
from mongopat.rules.base import CollectionEvidence, Recommendation, Rule


@register
class LargeArraysRule(Rule):
    """Arrays that keep growing make every update rewrite a larger document, slow multikey indexes, and
    eventually meet the 16 MiB limit. Warning when an array's maximum length reaches ``warn_length`` or
    its p95 reaches ``warn_p95``; error from ``error_length`` elements. GeoJSON geometries, vectors and
    coordinate pairs (``array.kind`` in the report) are bounded by what they stand for and are left alone:
    capping them would break ``2dsphere`` queries and vector search."""

    code = "MP201"
    name = "unbounded_arrays"
    kind = "anti-pattern"
    title = "Array too large"
    defaults = {"warn_length": 1000, "warn_p95": 200, "error_length": 10000}

    def check(self, collection: CollectionEvidence) -> list[Recommendation]:
        found = []
        for field in collection.arrays():
            array = field["array"]
            if array.get("kind"):
                continue
            maximum, p95 = array["max"] or 0, array["p95"] or 0
            if maximum >= self.threshold("error_length"):
                severity = "error"
            elif maximum >= self.threshold("warn_length") or p95 >= self.threshold("warn_p95"):
                severity = "warning"
            else:
                continue
            found.append(
                self.finding(
                    collection.name,
                    [field["path"]],
                    severity,
                    0.9,
                    {"field": field["path"], "length_p50": array["p50"], "length_p95": p95, "length_max": maximum},
                    f"{collection.name}.{field['path']} reaches {maximum:,} elements (p95 {p95:,}). Large arrays make "
                    "each update rewrite more, inflate multikey indexes and head for the 16 MiB document limit; "
                    "cap them (subset, outlier) or move the elements to their own collection.",
                    tradeoffs=["Moving elements out makes reading them a second query."],
                )
            )
        return found
