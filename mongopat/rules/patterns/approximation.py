"""MP112 approximation: a counter incremented at a high rate that need not be exact."""

from __future__ import annotations

import math

from mongopat.rules import register
from mongopat.rules.base import CollectionEvidence, Recommendation, Rule


@register
class ApproximationRule(Rule):
    """A hot counter (likes on a viral post, page views) incremented thousands of times a second makes
    every increment a write on the same document. When the exact value does not matter, incrementing by
    N with probability 1/N (or in batches of N) divides those writes by N and keeps the expected value.
    Fires for counters declared ``exact: false`` with at least ``min_increments_per_sec``; the factor keeps
    writes near ``target_writes_per_sec``."""

    code = "MP112"
    name = "approximation"
    title = "Count approximately where exact counts are not needed"
    defaults = {"min_increments_per_sec": 100, "target_writes_per_sec": 10}

    def check(self, collection: CollectionEvidence) -> list[Recommendation]:
        if not collection.access:
            return []
        found = []
        for counter in collection.access.counters:
            rate = counter.increments_per_sec
            if counter.exact or rate < self.threshold("min_increments_per_sec"):
                continue
            if collection.field(f"{counter.field}Factor"):
                continue  # counted approximately already (MP100 names it)
            factor = 10 ** max(1, math.ceil(math.log10(rate / self.threshold("target_writes_per_sec"))))
            found.append(
                self.finding(
                    collection.name,
                    [counter.field],
                    "warning" if rate >= 1000 else "info",
                    0.9,
                    {
                        "field": counter.field,
                        "increments_per_sec": rate,
                        "exact": False,
                        "factor": factor,
                        "writes_per_sec_after": round(rate / factor, 2),
                        "relative_error_per_1000": round(math.sqrt(factor / 1000), 3),
                    },
                    f"{collection.name}.{counter.field} is incremented {rate:,.0f} times/s and need not be exact. "
                    f"Adding {factor} with probability 1/{factor} keeps the expected count and cuts the writes on "
                    f"each hot document to about {rate / factor:,.1f}/s.",
                    tradeoffs=[
                        "Displayed counts are estimates; small counts are the least accurate.",
                        "Reconcile with an exact count periodically if the value is ever audited.",
                    ],
                    migration={
                        "step": "approximation",
                        "collection": collection.name,
                        "field": counter.field,
                        "factor": factor,
                    },
                )
            )
        return found
