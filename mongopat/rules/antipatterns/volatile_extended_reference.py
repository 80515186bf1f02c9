"""MP208 volatile_extended_reference: copying fields of a document that changes often."""

from __future__ import annotations

from mongopat.rules import register
from mongopat.rules.base import CollectionEvidence, Recommendation, Rule


@register
class VolatileExtendedReferenceRule(Rule):
    """Copying fields of another document (extended reference) pays off only when they rarely change;
    if the source changes often, every change fans out to all the copies. Warning when a declared join's
    target is updated at least once per ``max_lookups_per_update`` lookups, or when a copied field (an
    embedded ``<alias>.<field>`` matching the join) already exists in such a case. Copies already in place
    (MP100's recognition: a sub-document next to a measured reference) are checked too: warning when the
    referenced collection is declared to change at least once per ``max_lookups_per_update`` reads of the
    collection holding the copies, or at least ``max_fanout_writes_per_sec`` copy updates per second."""

    code = "MP208"
    name = "volatile_extended_reference"
    kind = "anti-pattern"
    title = "Copied fields change often"
    defaults = {"max_lookups_per_update": 100, "min_lookups_per_sec": 1, "max_fanout_writes_per_sec": 100}

    def _copies_in_place(self, collection: CollectionEvidence) -> list[Recommendation]:
        found = []
        declared = {q.lookup.source for q in (collection.access.queries if collection.access else []) if q.lookup}
        for item in collection.in_place("extended_reference"):
            evidence = item["evidence"]
            target = self.context.access_for(evidence["target"])
            updates = target.writes.updates_per_sec if target else None
            if not updates or evidence["target"] in declared:
                continue  # nothing known of the target's changes, or the join check below covers it
            reads = collection.access.reads_per_sec() if collection.access else 0
            referenced = self.context.collection(evidence["target"])
            copies_each = collection.count / referenced.count if referenced is not None and referenced.count else 1
            fanout = updates * max(copies_each, 1)
            per_update = reads / updates if reads else 0
            if per_update >= self.threshold("max_lookups_per_update") and fanout < self.threshold(
                "max_fanout_writes_per_sec"
            ):
                continue
            found.append(
                self.finding(
                    collection.name,
                    [evidence["object"], *(f"{evidence['object']}.{name}" for name in evidence["copied_fields"])],
                    "warning",
                    0.7,
                    {
                        **evidence,
                        "target_updates_per_sec": updates,
                        "reads_per_sec": reads,
                        "reads_per_update": round(per_update, 1),
                        "copies_per_target_document": round(copies_each, 1),
                        "copy_updates_per_sec": round(fanout, 2),
                    },
                    f"{collection.name}.{evidence['object']} copies {', '.join(evidence['copied_fields'])} of "
                    f"{evidence['target']}, which is updated {updates:,.2f} times/s: about {fanout:,.1f} copy "
                    f"updates/s across {copies_each:,.1f} copies per {evidence['target']} document"
                    + (f", for {reads:,.0f} reads/s" if reads else "")
                    + ". Copy only fields that do not change, or read them with a join.",
                )
            )
        return found

    def check(self, collection: CollectionEvidence) -> list[Recommendation]:
        found = self._copies_in_place(collection)
        if not collection.access:
            return found
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
