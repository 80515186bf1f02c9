"""MP102 outlier: a few documents whose arrays (or sizes) are far beyond everyone else's."""

from __future__ import annotations

from mongopat.rules import register
from mongopat.rules.base import CollectionEvidence, Recommendation, Rule


def documents_above(histogram: list[dict], cutoff: float) -> int:
    """Documents in histogram bins that lie wholly above ``cutoff`` (a lower bound on the true count)."""
    count, lower = 0, None
    for bin_ in histogram:
        if lower is not None and lower >= cutoff:
            count += bin_["count"]
        lower = bin_["le"] if bin_["le"] is not None else lower
    return count


@register
class OutlierRule(Rule):
    """When most documents hold a small array but a few hold a huge one (the celebrity with a million
    followers), designing for the typical case and moving the excess of the few into overflow documents
    keeps every document small and the common query path simple. Fires when an array's maximum length is
    at least ``tail_factor`` times its p95 and at least ``min_max_length``, while at most
    ``max_outlier_share`` of documents are above the cut-off."""

    code = "MP102"
    name = "outlier"
    title = "Move the long tail of an array into overflow documents"
    defaults = {"tail_factor": 10, "min_max_length": 200, "max_outlier_share": 0.05}

    def check(self, collection: CollectionEvidence) -> list[Recommendation]:
        found = []
        for field in collection.arrays():
            if field["depth"] != 1:
                continue
            array = field["array"]
            p95, maximum = array["p95"] or 0, array["max"] or 0
            if maximum < self.threshold("min_max_length") or maximum < self.threshold("tail_factor") * max(p95, 1):
                continue
            cutoff = _cutoff(array)
            above = documents_above(array["histogram"], cutoff)
            share = above / array["count"] if array["count"] else 0
            if share > self.threshold("max_outlier_share"):
                continue
            path = field["path"]
            severity = "error" if maximum >= 10_000 else "warning"
            found.append(
                self.finding(
                    collection.name,
                    [path],
                    severity,
                    0.6 + min(0.3, maximum / max(p95, 1) / 100),
                    {
                        "field": path,
                        "length_p50": array["p50"],
                        "length_p95": p95,
                        "length_p99": array["p99"],
                        "length_max": maximum,
                        "cutoff": cutoff,
                        "documents_above_cutoff_at_least": above,
                        "documents_read": array["count"],
                    },
                    f"In {collection.name}, {path} holds {array['p50']} elements in the median document and {p95} at "
                    f"p95, but up to {maximum:,}. Capping the embedded array at {cutoff} and moving the rest into "
                    f"overflow documents keeps the outliers from dictating document size and update cost for all.",
                    tradeoffs=[
                        "Code that needs the whole list must also read the overflow documents of flagged parents.",
                        "Appends must check the cap and spill into an overflow document when it is reached.",
                    ],
                    migration={
                        "step": "outlier",
                        "collection": collection.name,
                        "field": path,
                        "threshold": cutoff,
                        "overflow_collection": f"{collection.name}_{path}_overflow",
                        "flag_field": "has_overflow",
                    },
                )
            )
        return found


def _cutoff(array: dict) -> int:
    """A round cap above the p99 of typical documents (never below 2x p95)."""
    base = max(array["p99"] or 0, 2 * (array["p95"] or 0), 10)
    for nice in (10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000):
        if nice >= base:
            return nice
    return int(base)
