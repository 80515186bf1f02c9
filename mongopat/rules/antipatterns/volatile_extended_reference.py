"""MP208 volatile_extended_reference: copying fields of a document that changes often."""

from __future__ import annotations

from mongopat.rules import register
from mongopat.rules.base import CollectionEvidence, Recommendation, Rule


@register
class VolatileExtendedReferenceRule(Rule):
    """Copying fields of another document (extended reference) pays off only when they rarely change;
    if the source changes often, every change fans out to all the copies. Warning when a declared join's
    target is updated at least once per ``max_lookups_per_update`` lookups, or when a copied field (an
    embedded ``<alias>.<field>`` matching the join) already exists in such a case."""

    code = "MP208"
    name = "volatile_extended_reference"
    kind = "anti-pattern"
    title = "Copied fields change often"
    defaults = {"max_lookups_per_update": 100, "min_lookups_per_sec": 1}

    def check(self, collection: CollectionEvidence) -> list[Recommendation]:
        if not collection.access:
            return []
        found = []
        for query in collection.access.queries:
            lookup = query.lookup
            if lookup is None or not lookup.fields or (query.per_sec or 0) < self.threshold("min_lookups_per_sec"):
                continue
            target = self.context.access_for(lookup.source)
            updates = target.writes.updates_per_sec if target else None
            if not updates or query.per_sec / updates >= self.threshold("max_lookups_per_update"):
                continue
            copied = [p for p in collection.fields if p.split(".")[-1] in lookup.fields and "." in p]
            found.append(
                self.finding(
                    collection.name,
                    [lookup.local, *lookup.fields],
                    "warning",
                    0.75,
                    {
                        "query": query.name,
                        "lookups_per_sec": query.per_sec,
                        "target": lookup.source,
                        "target_updates_per_sec": updates,
                        "lookups_per_update": round(query.per_sec / updates, 1),
                        "copied_fields_present": copied,
                    },
                    f"{lookup.source} is updated {updates:,.2f} times/s against {query.per_sec:,.0f} lookups/s from "
                    f"{collection.name}: copies of {', '.join(lookup.fields)} would go stale quickly or cost a fan-out "
                    "update per change. Keep the join, or copy only fields that do not change.",
                )
            )
        return found
