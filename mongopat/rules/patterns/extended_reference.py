"""MP106 extended_reference: a frequent join that needs a few, rarely changing fields of the other side."""

from __future__ import annotations

from mongopat.rules import register
from mongopat.rules.base import CollectionEvidence, Recommendation, Rule


@register
class ExtendedReferenceRule(Rule):
    """A join done on most reads (``$lookup`` or a second query) for a few fields of a document that
    rarely changes (a company's name and logo) can be avoided by copying those fields next to the
    reference. Fires when a declared ``lookup`` runs at least ``min_lookups_per_sec`` times a second, needs
    at most ``max_fields`` fields, and the referenced collection is updated at most once per
    ``min_lookups_per_update`` lookups (volatile targets are reported by MP208 instead)."""

    code = "MP106"
    name = "extended_reference"
    title = "Copy the few fields a frequent join needs"
    defaults = {"min_lookups_per_sec": 10, "max_fields": 5, "min_lookups_per_update": 100}

    def check(self, collection: CollectionEvidence) -> list[Recommendation]:
        if not collection.access:
            return []
        found = []
        for query in collection.access.queries:
            lookup = query.lookup
            if lookup is None or (query.per_sec or 0) < self.threshold("min_lookups_per_sec"):
                continue
            if not lookup.fields or len(lookup.fields) > self.threshold("max_fields"):
                continue
            target_access = self.context.access_for(lookup.source)
            target_updates = target_access.writes.updates_per_sec if target_access else None
            per_update = query.per_sec / target_updates if target_updates else float("inf")
            if per_update < self.threshold("min_lookups_per_update"):
                continue
            measured = next(
                (
                    r
                    for r in collection.data.get("references", [])
                    if r["field"] == lookup.local and r["target"] == lookup.source
                ),
                None,
            )
            alias = lookup.alias
            if all(collection.field(f"{alias}.{name}") for name in lookup.fields):
                continue  # the copies are there already (MP100 names them, MP208 checks they stay fresh)
            found.append(
                self.finding(
                    collection.name,
                    [lookup.local, *(f"{alias}.{name}" for name in lookup.fields)],
                    "warning" if query.per_sec >= 100 else "info",
                    (0.85 if target_updates is not None else 0.6) + (0.1 if measured else 0),
                    {
                        "query": query.name,
                        "lookups_per_sec": query.per_sec,
                        "target": lookup.source,
                        "fields": lookup.fields,
                        "target_updates_per_sec": target_updates,
                        "lookups_per_target_update": None if per_update == float("inf") else round(per_update),
                        "measured_reference_match_rate": measured["match_rate"] if measured else None,
                    },
                    f"{query.name} joins {lookup.source} {query.per_sec:,.0f} times/s for {', '.join(lookup.fields)}"
                    + (
                        f", which change {target_updates:,.3f} times/s"
                        if target_updates
                        else ", which are not declared to change"
                    )
                    + f". Copying those fields into {collection.name}.{alias} next to {lookup.local} removes the join.",
                    tradeoffs=[
                        f"When {lookup.source} changes these fields, the copies must be updated (or accepted stale).",
                        "Documents grow by the copied fields.",
                    ],
                    migration={
                        "step": "extended_reference",
                        "collection": collection.name,
                        "from": lookup.source,
                        "local": lookup.local,
                        "foreign": lookup.foreign,
                        "fields": lookup.fields,
                        "as": alias,
                    },
                )
            )
        return found
