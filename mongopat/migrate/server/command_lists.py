"""Values cut into lists that each fit one command (a command is at most 16 MiB)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import bson

Item = TypeVar("Item")


def fitting(items: list[Item], size_of: Callable[[Item], int], limit: int) -> list[list[Item]]:
    """``items`` in order, in lists of at most ``limit`` bytes by ``size_of`` (at least one item each: a
    single larger one is allowed its own list); none for no items."""
    if not items:
        return []
    lists: list[list[Item]] = [[]]
    size = 0
    for item in items:
        grows = size_of(item)
        if lists[-1] and size + grows > limit:
            lists.append([])
            size = 0
        lists[-1].append(item)
        size += grows
    return lists


def id_bytes(ident: Any) -> int:
    """About what an ``_id`` adds to a list of them in a command: its value encoded, with a name."""
    return len(bson.encode({"_id": ident}))


# Of _ids in one reply document of packed rows (a reply document is at most 16 MiB; the other fields of a
# run's first row, a restore's patch, are at most 7 MiB beside them: in_server_steps.STASH_LIMIT).
PACKED_ID_BYTES = 4 * 1024 * 1024


def packed_rows(
    ident: str, starts: Any, first: dict[str, Any] | None = None, limit: int = PACKED_ID_BYTES
) -> list[dict[str, Any]]:
    """Stages packing rows (each an ``_id`` in the field ``ident``, in its order) into runs of consecutive
    rows: one reply document a run, holding the ``_id``s as one array (``i``) and the fields ``first`` of
    the run's first row; a run of one row is that row, its ``_id`` alone (an ``_id`` is never an array). A
    run begins at each row where ``starts`` holds, and after each ``limit`` bytes of ``_id``s. In an array
    an ``_id`` costs its value and a short index; a row of its own costs a document's length, end and field
    name besides: about 17 bytes an ObjectId against 25 (``$setWindowFields``: MongoDB 5.0).
    :func:`unpacked` gives the rows back."""
    cumulative = {"documents": ["unbounded", "current"]}
    run = {"$sum": {"$cond": [starts, 1, 0]}, "window": cumulative}
    size = {"$sum": {"$bsonSize": {"i": f"${ident}"}}, "window": cumulative}
    chunk = {"$floor": {"$divide": ["$__size", limit]}}
    packed: dict[str, Any] = {"_id": {"r": "$__run", "c": chunk}, "i": {"$push": f"${ident}"}}
    if first:
        packed["h"] = {"$first": first}  # a field the row lacks is left out of it
    idents = {"$cond": [{"$eq": [{"$size": "$i"}, 1]}, {"$arrayElemAt": ["$i", 0]}, "$i"]}
    return [
        {"$setWindowFields": {"sortBy": {ident: 1}, "output": {"__run": run, "__size": size}}},
        {"$group": packed},
        {"$sort": {"_id": 1}},
        {"$replaceWith": {"$mergeObjects": [{"i": idents}, *(["$h"] if first else [])]}},
    ]


def unpacked(runs: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rows :func:`packed_rows` packed, in order: the first of a run with the fields it kept, the others
    an ``_id`` (``i``) alone."""
    rows: list[dict[str, Any]] = []
    for run in runs:
        idents = run["i"]
        if type(idents) is not list:
            rows.append(dict(run))
            continue
        rows.append({**run, "i": idents[0]})
        rows.extend({"i": ident} for ident in idents[1:])
    return rows
