"""MP100 in_place: patterns a collection already follows, named so that nobody applies them twice."""

from __future__ import annotations

from mongopat.rules import register
from mongopat.rules.base import CollectionEvidence, Recommendation, Rule

WHAT = {
    "bucket": "buckets of readings",
    "attribute": "attributes as key/value pairs",
    "extended_reference": "an extended reference (copied fields of another collection)",
    "subset": "a subset of a list embedded, with the full count",
    "schema_versioning": "a schema version field",
    "outlier": "overflow documents for outliers",
    "tree": "materialised ancestors",
    "approximation": "a counter incremented approximately, with its factor",
}


@register
class InPlaceRule(Rule):
    """A collection that is already bucketed, pivoted into ``{k, v}`` attributes, carrying an extended
    reference, embedding a subset, versioned, flagged for overflow, holding materialised ancestors or
    counting approximately with a stored factor follows the pattern already: it gets an info line naming
    it (with the figures the common-mistake rules MP207 and MP208 check), never a recommendation to apply
    it again."""

    code = "MP100"
    name = "in_place"
    kind = "in-place"
    title = "Pattern already in place"

    def check(self, collection: CollectionEvidence) -> list[Recommendation]:
        return [
            self.finding(
                collection.name,
                item["fields"],
                "info",
                0.9,
                item["evidence"],
                f"{collection.name} already follows the {item['pattern']} pattern: {WHAT[item['pattern']]} "
                f"({', '.join(item['fields'])}). Nothing to apply; the size and staleness checks run on it.",
                title=f"{item['pattern'].replace('_', ' ').capitalize()} pattern already in place",
            )
            for item in collection.in_place()
            if item["pattern"] in WHAT
        ]
