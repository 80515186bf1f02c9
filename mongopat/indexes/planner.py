"""The index a read needs, and what a read examines with an index or without one.

**Advice** follows MongoDB's equality, sort, range guideline: the equality fields first (the most selective
first, then ``$in`` fields: the planner explodes an ``$in`` of at most 200 values into point scans merged in
sort order), then the sort keys in their order and directions, then the range fields (the narrowest first),
then fields an index bounds loosely (``$ne``, ``$nin``, ``$exists``, regular expressions). A text search gets
a text index (equality fields before it), a geo filter a ``2dsphere`` key. A compound index may hold one
array field only (MongoDB refuses to index two arrays of one document): later array fields are left out and
filtered after the fetch.

**Cost** of a read with an index, walking its key as the planner would: the leading fields the read
compares for equality bound the scan to a point each; the first range (or the sort key when it is next)
ends the bounded prefix. Every filtered field anywhere in the key is checked on the index key before the
document is fetched (not for multikey fields). The sort is served when its keys follow the equality
prefix in order, all in the index's direction or all reversed; a read with a limit and a served sort stops
after ``limit`` matches, otherwise every match is fetched and sorted in memory. A read is covered (no
document fetched) when its filter, sort and projection are all in a non-multikey key and ``_id`` is in the
key or excluded: the access file does not say whether ``_id`` is excluded, so coverage is reported, and
the documents examined assume a fetch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mongopat.indexes.catalog import Index, default_name
from mongopat.indexes.selectivity import Selectivity
from mongopat.indexes.shape import FILTERS, RANGES, ReadShape


@dataclass
class ReadCost:
    """What one read examines with one index (``index`` None: a collection scan)."""

    index: Index | None
    keys_examined: float
    docs_examined: float
    returned: float
    sort_in_memory: bool
    covers_projection: bool
    bounded: list[str] = field(default_factory=list)  # key fields that bound the scan
    basis: list[str] = field(default_factory=list)
    # Every condition's share was measured (none counted as the whole collection for want of evidence).
    measured: bool = True

    @property
    def index_name(self) -> str:
        return self.index.name if self.index else "COLLSCAN"

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": None if self.index is None else self.index.name,
            "key": None if self.index is None else [[n, d] for n, d in self.index.key],
            "keys_examined": round(self.keys_examined, 1),
            "docs_examined": round(self.docs_examined, 1),
            "returned": round(self.returned, 1),
            "sort_in_memory": self.sort_in_memory,
            "covers_projection": self.covers_projection,
        }


def advise(read: ReadShape, selectivity: Selectivity) -> tuple[list[tuple[str, Any]], list[str]]:
    """The index key the read needs, and notes on what it leaves out."""
    notes: list[str] = []
    key: list[tuple[str, Any]] = []

    def by_share(names: list[str], op_of: dict[str, str]) -> list[str]:
        return sorted(names, key=lambda name: selectivity.share(name, op_of[name]).known)

    equal = by_share(read.equalities, read.operators) + by_share(read.ins, read.operators)
    key.extend((name, 1) for name in equal)
    if read.text:
        return key + [(_text_field(read), "text")], ["a text index: one per collection, its fields weighted"]
    if read.geo:
        key.append((read.geo, "2dsphere"))
    for name, direction in read.sort:
        if name not in dict(key):
            key.append((name, direction))
    if read.ins and read.sort:
        notes.append(f"{', '.join(read.ins)} ($in) before the sort: served while the list holds at most 200 values")
    for name in by_share(read.ranges, read.operators) + read.filters:
        if name not in dict(key):
            key.append((name, 1))
    arrays = [name for name, _ in key if selectivity.multikey(name)]
    for name in arrays[1:]:
        key = [(n, d) for n, d in key if n != name]
        notes.append(f"{name} left out: it holds arrays, as {arrays[0]} does (one array field per index)")
    return key, notes


def _text_field(read: ReadShape) -> str:
    text = read.text or "$text"
    return "$**" if text == "$text" else text


def advised_index(read: ReadShape, selectivity: Selectivity) -> Index:
    key, notes = advise(read, selectivity)
    return Index(name=default_name(key), key=key, advised=True, notes=notes)


def usable(index: Index, read: ReadShape) -> str | None:
    """Why the planner cannot use ``index`` for ``read`` at all (None: it can)."""
    if index.hidden:
        return "hidden"
    kind = index.kind
    if kind == "text":
        return None if read.text else "a text index serves text searches only"
    if read.text:
        return "a text search needs a text index"
    if kind in ("2dsphere", "2d") and not read.geo and index.fields and index.key[0][1] == kind:
        return "a geo index led by its geo key serves geo filters"
    if kind in ("hashed", "wildcard", "special", "geoHaystack"):
        if kind == "hashed" and index.fields and read.operators.get(index.fields[0]) == "eq":
            return None
        return f"a {kind} index (not modelled beyond equality on a hashed key)"
    if index.partial and not set(_paths(index.partial)) <= set(read.operators):
        return "partial: the read does not filter on its filter's fields"
    if index.sparse and not any(read.operators.get(name) not in (None, "exists") for name in index.fields):
        return "sparse: the read could match documents it does not hold"
    return None


def _paths(expression: dict[str, Any]) -> list[str]:
    found = []
    for key, value in expression.items():
        if key in ("$and", "$or"):
            for item in value:
                found.extend(_paths(item))
        elif not key.startswith("$"):
            found.append(key)
    return found


def cost(read: ReadShape, index: Index | None, selectivity: Selectivity) -> ReadCost | None:
    """What ``read`` examines with ``index`` (None: a collection scan); None when the index cannot serve
    it (see :func:`usable`) or the planner would not use it (no leading field of the read)."""
    count = float(selectivity.count or 0)
    shares = {name: selectivity.share(name, op) for name, op in read.operators.items()}
    matched = count
    for share in shares.values():
        matched *= share.known
    returned = min(matched, read.limit) if read.limit else matched
    basis = [share.basis for share in shares.values()]
    measured = all(share.value is not None for share in shares.values())
    if index is None:
        if read.text:
            return None  # $text fails without a text index
        docs = count if read.sort or not read.limit or matched <= 0 else min(count, read.limit * count / matched)
        return ReadCost(None, 0.0, docs, returned, bool(read.sort), False, [], basis, measured)
    if usable(index, read) is not None:
        return None
    if read.text:  # a text index finds the matches of the search; the rest is filtered after the fetch
        return ReadCost(index, matched, matched, returned, bool(read.sort), False, [index.fields[0]], basis, measured)

    keys = count
    fetched = count
    bounded: list[str] = []
    in_prefix = True  # still on fields bounded to a point each
    # A sort key the read fixes by an equality is in order whatever the index.
    sort_left = [(name, d) for name, d in read.sort if read.operators.get(name) not in ("eq", "elemMatch")]
    direction: int | None = None  # +1: the index's order, -1: reversed
    sort_broken = False
    for name, key_direction in index.key:
        op = read.operators.get(name)
        share = shares[name].known if name in shares else 1.0
        filterable = not selectivity.multikey(name) or op in ("eq", "in", "elemMatch")
        if name in shares and filterable:
            fetched *= share
        if in_prefix and op in ("eq", "in", "elemMatch", "geo", "text"):
            keys *= share
            bounded.append(name)
            continue
        if sort_left and not sort_broken and name == sort_left[0][0] and isinstance(key_direction, int):
            sign = 1 if key_direction * sort_left[0][1] > 0 else -1
            if direction is None or direction == sign:
                direction = sign
                sort_left.pop(0)
                if op in RANGES or op in FILTERS:
                    keys *= share if in_prefix else 1.0
                    bounded.append(name)
                in_prefix = False
                continue
            sort_broken = True
        if in_prefix and (op in RANGES or op in FILTERS):
            keys *= share
            bounded.append(name)
            in_prefix = False
            sort_broken = sort_broken or bool(sort_left)
            continue
        in_prefix = False
        sort_broken = sort_broken or bool(sort_left)
    if not bounded and not (read.sort and not sort_left):
        return None  # no leading field of the read: the planner would not choose it over a scan
    sort_served = not sort_left
    for name in _paths(index.partial or {}):  # a partial index holds only the documents its filter keeps
        if name in shares and name not in index.fields:
            keys, fetched = keys * shares[name].known, fetched * shares[name].known
    if read.limit and sort_served and matched > 0:
        stop = min(1.0, read.limit / matched)  # the share of the matches read before the limit is met
        keys, fetched = keys * stop, fetched * stop
    key_fields = set(index.fields)
    multikey = any(selectivity.multikey(name) for name in key_fields)
    wanted = set(read.operators) | {name for name, _ in read.sort} | set(read.projection)
    covers = bool(read.projection) and not multikey and wanted <= key_fields and index.kind == "plain"
    in_memory = not sort_served and bool(read.sort)
    return ReadCost(index, keys, fetched, returned, in_memory, covers, bounded, basis, measured)


def best(read: ReadShape, indexes: list[Index], selectivity: Selectivity) -> ReadCost | None:
    """The cheapest of the indexes that can serve ``read``, or the collection scan: what a planner picks
    when its trial runs agree with the model. None: nothing can run it (a text search without a text
    index fails)."""
    options = [cost(read, None, selectivity)]
    options += [cost(read, index, selectivity) for index in indexes]
    found = [option for option in options if option is not None]
    if not found:
        return None
    return min(found, key=lambda option: (option.docs_examined, option.sort_in_memory, option.keys_examined))
