"""MP210 missing_index: a declared read that no index serves."""

from __future__ import annotations

from typing import Any

from mongopat.indexes import catalog
from mongopat.indexes.catalog import Index, default_name, describe_key
from mongopat.indexes.planner import ReadCost, advised_index, best, cost
from mongopat.indexes.selectivity import Selectivity
from mongopat.indexes.shape import ReadShape, declared_reads
from mongopat.predictions import prediction
from mongopat.rules import register
from mongopat.rules.base import CollectionEvidence, Recommendation, Rule

MAX_INDEXES = 64  # MongoDB's limit per collection


@register
class MissingIndexRule(Rule):
    """A declared read (the access file's queries, and the reads their joins make on the joined collection)
    that examines at least ``min_examined`` documents and ``min_ratio`` times what it returns, where an
    index by the equality, sort, range rule would examine ``min_ratio`` times fewer. Reads that one index
    serves equally well share it: one finding per index, naming its reads. A text search without a text
    index fails outright (error). Where the data carries no index list (an export without metadata) the
    finding is information: the index may exist. Each extra index costs an index entry per insert and
    delete (per array element when multikey) and cache; none is advised past MongoDB's 64 per collection.
    Error where the declared rates make the reads examine ``error_examined_per_sec`` documents a second or
    more without it (rate times documents examined, summed over the reads the index serves), so that a CI
    gate at its default fails on a read that lost its index."""

    code = "MP210"
    name = "missing_index"
    kind = "anti-pattern"
    title = "Read without an index"
    defaults = {"min_examined": 1000, "min_ratio": 10, "error_examined_per_sec": 100_000}

    def check(self, collection: CollectionEvidence) -> list[Recommendation]:
        access = self.context.access
        if access is None:
            return []
        reads = declared_reads(access).get(collection.name, [])
        if not reads:
            return []
        selectivity = Selectivity(collection, collection.declared_inserts())
        listed = collection.data.get("indexes") or []
        existing = catalog.listed(listed)
        unserved: list[tuple[ReadShape, ReadCost | None, ReadCost]] = []
        for read in reads:
            now = best(read, existing, selectivity)
            wanted = advised_index(read, selectivity)
            if not wanted.key:
                continue
            after = cost(read, wanted, selectivity)
            if after is None:
                continue
            if now is not None and not self._worth_it(read, now, after):
                continue
            unserved.append((read, now, after))
        return [self._finding(collection, index, served, existing, bool(listed), selectivity)
                for index, served in _shared(unserved, selectivity)]  # fmt: skip

    def _worth_it(self, read: ReadShape, now: ReadCost, after: ReadCost) -> bool:
        ratio = self.threshold("min_ratio")
        if now.docs_examined < self.threshold("min_examined"):
            return False
        if read.geo and now.index is None:
            return True  # the area's share is not estimated; a scan tests every document's geometry
        if now.docs_examined < ratio * max(now.returned, 1.0):
            return False  # the read returns most of what it examines: no index makes it cheaper
        return after.docs_examined * ratio <= now.docs_examined or (now.sort_in_memory and not after.sort_in_memory)

    def _finding(
        self,
        collection: CollectionEvidence,
        index: Index,
        served: list[tuple[ReadShape, ReadCost | None, ReadCost]],
        existing: list[Index],
        indexes_known: bool,
        selectivity: Selectivity,
    ) -> Recommendation:
        keys = index.keys_spec()
        fails = [read.name for read, now, _ in served if now is None]
        reads = [_read_evidence(read, now, after) for read, now, after in served]
        writes = _index_writes(collection, index, selectivity)
        total = len(existing) + 1
        tradeoffs = [writes] if writes else []
        tradeoffs += index.notes
        replaced = [i.name for i in existing if not i.restrictions() and index.fields[: len(i.fields)] == i.fields]
        if replaced:
            tradeoffs.append(
                f"{', '.join(replaced)} becomes a prefix of this index: drop it once this one is built (MP211 "
                "reports it on the next analysis)"
            )
        migration: dict[str, Any] | None = {
            "step": "create_index", "collection": collection.name, "keys": keys, "name": default_name(index.key),
        }  # fmt: skip
        load = sum((read.per_sec or 0) * now.docs_examined for read, now, _ in served if now is not None)
        severity = "error" if fails or load >= self.threshold("error_examined_per_sec") else "warning"
        if indexes_known and total > MAX_INDEXES:
            migration = None
            severity = "error"
            tradeoffs.append(f"{collection.name} would hold {total} indexes: MongoDB allows {MAX_INDEXES}")
        if not indexes_known:
            severity = "info"
        names = ", ".join(read.name for read, _, _ in served)
        sorts = any(read.sort for read, _, _ in served) and not any(after.sort_in_memory for _, _, after in served)
        rationale = "; ".join(_today(read, now, after) for read, now, after in served) + ". "
        rule = "a text index" if fails else ("a geo index" if index.kind != "plain" else "equality, sort, range")
        rationale += f"An index on {describe_key(keys)} ({rule}) "
        rationale += (
            "finds the matches"
            if fails
            else "examines "
            + ", ".join(
                _after(read, after) + (f" for {read.name}" if len(served) > 1 else "") for read, _, after in served
            )
        )
        rationale += " and gives the sort." if sorts else "."
        if not indexes_known:
            rationale += " The data carries no index list (no metadata): check whether such an index exists."
        if any(after.covers_projection for _, _, after in served):
            rationale += " It also covers the projection when the read excludes _id (no document fetched)."
        read_predictions = [
            {
                "read": read.name,
                "collection": collection.name,
                "examined_before": None if now is None else round(now.docs_examined, 1),
                "examined_after": round(after.docs_examined, 1) if after.measured or not read.geo else None,
                "basis": "index model: " + ("; ".join(after.basis) or "no filter"),
            }
            for read, now, after in served
        ]
        confidence = 0.85 if all(after.measured for _, _, after in served) else 0.65
        return self.finding(
            collection.name,
            index.fields,
            severity,
            confidence,
            {
                "index": keys,
                "reads": reads,
                "examined_per_sec": round(load),
                "indexes": len(existing),
                "indexes_known": indexes_known,
            },  # fmt: skip
            rationale,
            tradeoffs=tradeoffs,
            migration=migration,
            title=f"Read without an index: {names}"
            if len(served) == 1
            else f"{len(served)} reads without an index: {names}",
            prediction=prediction([], read_predictions) if migration else None,
        )


def _shared(
    unserved: list[tuple[ReadShape, ReadCost | None, ReadCost]], selectivity: Selectivity
) -> list[tuple[Index, list[tuple[ReadShape, ReadCost | None, ReadCost]]]]:
    """One index per group of reads it serves as well as each read's own: the longest keys first."""
    candidates = sorted(
        {describe_key(after.index.key): after.index for _, _, after in unserved if after.index}.values(),
        key=lambda index: -len(index.key),
    )
    groups: dict[str, tuple[Index, list[tuple[ReadShape, ReadCost | None, ReadCost]]]] = {}
    for read, now, own in unserved:
        for index in candidates:
            shared = cost(read, index, selectivity)
            if shared is None or shared.docs_examined > own.docs_examined * 1.01 + 1:
                continue
            if shared.sort_in_memory and not own.sort_in_memory:
                continue
            groups.setdefault(index.name, (index, []))[1].append((read, now, shared))
            break
    return list(groups.values())


def _after(read: ReadShape, after: ReadCost) -> str:
    if read.geo and not after.measured:
        return "only the documents whose geometry is near the area (their share is not estimated)"
    return _n(after.docs_examined)


def _today(read: ReadShape, now: ReadCost | None, after: ReadCost) -> str:
    """``history examines 10,000 documents to return 1 (no index, sorted in memory)``"""
    if now is None:
        return f"{read.name} fails: a $text search needs a text index"
    if read.geo and now.index is None and not after.measured:
        return f"{read.name} tests the geometry of every document ({_n(now.docs_examined)}, no index)"
    how = "no index" if now.index is None else f"index {now.index.name}"
    if now.sort_in_memory:
        how += ", sorted in memory"
    return f"{read.name} examines {_n(now.docs_examined)} documents to return {_n(after.returned)} ({how})"


def _read_evidence(read: ReadShape, now: ReadCost | None, after: ReadCost) -> dict[str, Any]:
    return {
        "read": read.name,
        "joined_from": None
        if read.joined_from is None
        else {"collection": read.joined_from[0], "read": read.joined_from[1]},
        "shape": read.describe(),
        "per_sec": read.per_sec,
        "before": None if now is None else now.to_dict(),
        "after": after.to_dict(),
        "basis": after.basis,
    }


def _index_writes(collection: CollectionEvidence, index: Index, selectivity: Selectivity) -> str | None:
    """What the index costs the declared writes."""
    inserts = collection.declared_inserts() or 0
    deletes = (collection.access.writes.deletes_per_sec if collection.access else None) or 0
    updates = collection.declared_updates() or 0
    # A geo key indexes a point or shape once, whatever arrays hold its coordinates.
    arrays = [name for name, kind in index.key if isinstance(kind, int) and selectivity.multikey(name)]
    per_document = 1.0
    for name in arrays:
        array = (selectivity.entry(name) or {}).get("array") or (collection.field(name) or {}).get("array") or {}
        per_document = max(per_document, float(array.get("mean") or 1.0))
    if not (inserts or deletes or updates):
        return f"each insert and delete also writes {per_document:,.3g} index entr{'y' if per_document == 1 else 'ies'}"
    entries = (inserts + deletes) * per_document
    text = f"{entries:,.3g} index entries written per second for the declared {inserts + deletes:,g} inserts"
    text += " and deletes/s"
    if updates:
        text += f", and one per declared update (of {updates:,g}/s) that changes {', '.join(index.fields)}"
    return text


def _n(value: float | None) -> str:
    return "?" if value is None else f"{value:,.0f}"
