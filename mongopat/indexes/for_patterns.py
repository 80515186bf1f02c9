"""Index advice after a pattern: the reads a pattern's migration rewrites for the new shape need indexes on
the new fields, and an index advised for today's shape of those reads no longer helps once it runs.
An index a rewritten read needs on the same fields as today's read is not the pattern's to add: today's
read needs it already, and the missing-index rule says so (with what the data says of existing indexes).

Indexes only the old shape used go too: a plain index on a field the step removes from the collection's
documents (``ts`` once readings are buckets, the sparse fields the attribute pattern pivots) gets a
``drop_index`` step after the pattern's (``down`` creates it again); a unique, TTL, partial, sparse,
hidden or special index is left for a person to decide.

For each recommendation whose migration reshapes documents, the guide rewrites the declared reads
(:func:`mongopat.guide.build.recommendation_guide`); the indexes those reads need that neither exist nor
are created by the step itself become ``create_index`` steps of the same migration (``index_steps``). A
missing-index finding (MP210) whose reads the pattern rewrites says so (``superseded_by``): ``migrate
plan`` leaves its index out when it plans that pattern too, since the index would be built on fields the
pattern removes.
"""

from __future__ import annotations

from typing import Any

from mongopat.indexes.catalog import default_name

INDEX_RULES = ("MP205", "MP210", "MP211")


def attach(found: list[Any], report: dict[str, Any], access: Any) -> None:
    """Give pattern recommendations their ``index_steps``; withhold the migration of index findings their
    rewrites supersede."""
    for rec in found:
        if rec.migration and rec.code not in INDEX_RULES:
            rec.index_steps.extend(_drops(rec, report))
    if access is None:
        return
    from mongopat.guide.build import index_keys, recommendation_guide

    rewritten: dict[tuple[str, str], str] = {}  # (collection, read) -> the recommendation that rewrites it
    for rec in found:
        if not rec.migration or rec.code in INDEX_RULES:
            continue
        try:
            guide = recommendation_guide(rec.code, rec.title, rec.migration, access, report)
        except Exception:  # noqa: BLE001 - a migration the guide cannot follow gets no index steps
            continue
        for read in guide.reads:
            if read.changed:
                rewritten.setdefault((read.before.collection, read.name), rec.code)
        keys_today = {read.name: index_keys(read.before) for read in guide.reads}
        keys_after = {read.name: index_keys(read.after) for read in guide.reads}
        for entry in guide.indexes:
            if entry["status"] != "to add":
                continue
            today = {read.before.collection for read in guide.reads if read.name in entry["reads"]}
            if entry["collection"] in today and all(
                set(keys_after.get(name) or {}) <= set(keys_today.get(name) or {}) for name in entry["reads"]
            ):
                continue  # the read needs an index on these fields today already: the missing-index rule's advice
            key = list(entry["keys"].items())
            name = default_name(key)
            spec = {"step": "create_index", "collection": entry["collection"], "keys": dict(key), "name": name}
            rec.index_steps.append(spec)
    for rec in found:
        if rec.code != "MP210" or not rec.migration:
            continue
        reads = [_declared(read, rec.collection or "") for read in rec.evidence.get("reads", [])]
        if reads and all(read in rewritten for read in reads):
            codes = sorted({rewritten[read] for read in reads})
            rec.evidence["superseded_by"] = codes
            which = "this read" if len(reads) == 1 else "these reads"
            rec.rationale += (
                f" {', '.join(codes)} rewrites {which} for its new shape, and its migration creates the indexes that "
                "shape needs: where both are planned, migrate plan leaves this index out."
            )


def _drops(rec: Any, report: dict[str, Any]) -> list[dict[str, Any]]:
    """``drop_index`` steps for the plain indexes on fields the recommendation's step removes."""
    from mongopat.indexes.catalog import Index
    from mongopat.migrate.preview import example_document, preview
    from mongopat.migrate.steps import StepError, build_step

    collection = next((c for c in report.get("collections", []) if c["name"] == rec.collection), None)
    if collection is None or not collection.get("indexes"):
        return []
    try:
        step = build_step(rec.migration)
        before, after, _note = preview(step, example_document(collection, False))
    except (StepError, KeyError, TypeError, ValueError):
        return []
    if not before or not after or step.collection != rec.collection:
        return []
    removed = _paths(before[0]) - set().union(*(_paths(document) for document in after))
    drops = []
    for entry in collection["indexes"]:
        index = Index.from_report(entry)
        if not index.restrictions() and any(name in removed for name in index.fields):
            drops.append({"step": "drop_index", "collection": rec.collection, "name": index.name})
    return drops


def _paths(document: dict[str, Any], prefix: str = "") -> set[str]:
    """Every field path of a document (through sub-documents and arrays of them)."""
    found: set[str] = set()
    for key, value in document.items():
        path = prefix + key
        found.add(path)
        items = value if isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, dict):
                found |= _paths(item, path + ".")
    return found


def _declared(read: dict[str, Any], collection: str) -> tuple[str, str]:
    """The declared read an index finding's read is, or is made by (a join from another collection)."""
    joined = read.get("joined_from")
    return (joined["collection"], joined["read"]) if joined else (collection, read["read"])
