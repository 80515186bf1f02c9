"""Dotted paths read and written by aggregation expressions exactly as the Python transforms read and write
them (``transform_api.get_path`` and friends): through sub-documents only, never through an array.

A server's field path ``$a.b`` reads every element's ``b`` when ``a`` is an array, and ``{$set: {"a.b": v}}``
writes into every element; the Python transforms see no ``a.b`` there, and ``set_path`` replaces anything
that is not a sub-document on the way with an empty one. So a nested path is read only once every prefix is
known to be a sub-document (``$type`` is ``"object"``), and written by rebuilding each level with
``$setField`` (MongoDB 5.0), which keeps an existing field where it is and appends a new one, as a dict
assignment does. Only plain field paths, ``$type``, ``$cond``, ``$and``, ``$ne`` and ``$setField`` are
used: ``$getField`` is avoided because SecantusDB reads a missing field as the whole input
(``tests/test_conformance.py``).
"""

from __future__ import annotations

from typing import Any

Expression = Any


def plain(*paths: str) -> bool:
    """Whether every path is one the helpers can write: dotted names, none empty or ``$``-led."""
    return all(path and all(part and not part.startswith("$") for part in path.split(".")) for path in paths)


def _is_document(parts: list[str], root: str = "$") -> Expression:
    return {"$eq": [{"$type": root + ".".join(parts)}, "object"]}


def _through_documents(parts: list[str], root: str = "$") -> list[Expression]:
    """Conditions that every proper prefix of ``parts`` is a sub-document."""
    return [_is_document(parts[:depth], root) for depth in range(1, len(parts))]


def holds(path: str) -> Expression:
    """True when the document holds ``path`` (null included), as ``has_path`` is."""
    parts = path.split(".")
    present = {"$ne": [{"$type": "$" + path}, "missing"]}
    return {"$and": [*_through_documents(parts), present]} if len(parts) > 1 else present


def value_at(path: str, root: str = "$") -> Expression:
    """The value at ``path``, or missing where ``get_path`` finds none; ``root`` is the document's (``$``)
    or a variable's (``$$n.``)."""
    parts = path.split(".")
    if len(parts) == 1:
        return root + path
    return {"$cond": [{"$and": _through_documents(parts, root)}, root + path, "$$REMOVE"]}


def set_stages(path: str, value: Expression) -> list[dict[str, Any]]:
    """Stages that set ``path`` to ``value`` as ``set_path`` does."""
    parts = path.split(".")
    if len(parts) == 1:
        return [{"$set": {path: value}}]
    return [{"$set": {parts[0]: _set_in(parts[:1], parts[1:], value)}}]


def _set_in(prefix: list[str], rest: list[str], value: Expression) -> Expression:
    here = "$" + ".".join(prefix)
    level = {"$cond": [_is_document(prefix), here, {"$literal": {}}]}
    inner = value if len(rest) == 1 else _set_in([*prefix, rest[0]], rest[1:], value)
    return {"$setField": {"field": rest[0], "input": level, "value": inner}}


def unset_stages(path: str) -> list[dict[str, Any]]:
    """Stages that remove ``path`` as ``pop_path`` does (nothing where a prefix is not a sub-document)."""
    parts = path.split(".")
    if len(parts) == 1:
        return [{"$unset": path}]
    return [{"$set": {parts[0]: _unset_in(parts[:1], parts[1:])}}]


def _unset_in(prefix: list[str], rest: list[str]) -> Expression:
    here = "$" + ".".join(prefix)
    if len(rest) == 1:
        inner: Expression = "$$REMOVE"
        condition = _is_document(prefix)
    else:
        inner = _unset_in([*prefix, rest[0]], rest[1:])
        below = ".".join([*prefix, rest[0]])
        condition = {"$and": [_is_document(prefix), {"$ne": [{"$type": "$" + below}, "missing"]}]}
    return {"$cond": [condition, {"$setField": {"field": rest[0], "input": here, "value": inner}}, here]}


# Where a value rides between two stages of one pipeline: never stored (the last stage removes it).
CARRIED = "__mongopat_carried"


def move_stages(old: str, new: str) -> list[dict[str, Any]]:
    """Stages that move the value at ``old`` to ``new`` as ``set_path(new, pop_path(old))`` does; given
    only documents that hold ``old``."""
    if "." not in old and "." not in new:
        return [{"$set": {new: "$" + old}}, {"$unset": old}]
    return [
        {"$set": {CARRIED: value_at(old)}},
        *unset_stages(old),
        *set_stages(new, "$" + CARRIED),
        {"$unset": CARRIED},
    ]


# What the helpers below give where a value is not one they can work on.
NOT_OK = {"ok": False, "v": None}


def within(parts: list[str], inner: Expression, depth: int = 0) -> Expression:
    """``{ok, v}``: ``$$wv`` with the sub-document at ``parts`` made what ``inner`` (an expression of
    ``$$wv``, there that sub-document, giving ``{ok, v}``) makes of it, each level above kept where it is
    (``$setField``; each level's own variables, so that none hides another's); not ``ok`` where a level is
    no document."""
    if not parts:
        return inner
    here, below = f"$$w{depth}", f"$$c{depth}"
    made = {"ok": True, "v": {"$setField": {"field": parts[0], "input": here, "value": f"{below}.v"}}}
    child = within(parts[1:], inner, depth + 1)
    kept = {"$let": {"vars": {f"c{depth}": {"$let": {"vars": {"wv": f"{here}.{parts[0]}"}, "in": child}}},
                     "in": {"$cond": [f"{below}.ok", made, NOT_OK]}}}  # fmt: skip
    on_document = {"$cond": [{"$eq": [{"$type": here}, "object"]}, kept, NOT_OK]}
    return {"$let": {"vars": {f"w{depth}": "$$wv"}, "in": on_document}}


def keys_of(pairs: Expression) -> Expression:
    """The ``k`` of each element of ``pairs`` (``$map``: each element's own value, never a path through the
    array)."""
    return {"$map": {"input": pairs, "as": "e", "in": "$$e.k"}}


def place_of(parts: list[str], depth: int = 0) -> Expression:
    """The place of the key ``parts[-1]`` among its neighbours in the sub-document of ``$$wv`` at
    ``parts[:-1]``; -1 where that is no document or lacks it."""
    here = f"$$o{depth}"
    if len(parts) == 1:
        found: Expression = {"$indexOfArray": [keys_of({"$objectToArray": here}), parts[0]]}
    else:
        found = {"$let": {"vars": {"wv": f"{here}.{parts[0]}"}, "in": place_of(parts[1:], depth + 1)}}
    return {"$let": {"vars": {f"o{depth}": "$$wv"}, "in": {"$cond": [{"$eq": [{"$type": here}, "object"]}, found, -1]}}}


def put_at(pairs: Expression, key: Expression, value: Expression, place: Expression = "$$at") -> Expression:
    """The pairs ``pairs`` with ``{k: key, v: value}`` put at ``place`` (at most their number)."""
    before = {"$cond": [{"$eq": [place, 0]}, [], {"$slice": [pairs, place]}]}
    after = {"$slice": [pairs, place, {"$add": [{"$size": pairs}, 1]}]}
    return {"$concatArrays": [before, [{"k": key, "v": value}], after]}


def put_back(key: str) -> Expression:
    """``{ok, v}``: the sub-document ``$$wv`` without ``key``, and, where ``$$at`` is a place (0 or more),
    with ``key`` holding ``$$held.v`` there; not ``ok`` where it is no document or has fewer than ``$$at``
    other keys."""
    rest = {"$filter": {"input": {"$objectToArray": "$$wv"}, "as": "f", "cond": {"$ne": ["$$f.k", key]}}}
    fits = {"$lte": ["$$at", {"$size": "$$r"}]}
    again = {"$cond": [{"$lt": ["$$at", 0]}, "$$r", {"$cond": [fits, put_at("$$r", key, "$$held.v"), None]}]}
    back = {"ok": True, "v": {"$arrayToObject": "$$m"}}
    made = {"$let": {"vars": {"m": again}, "in": {"$cond": [{"$isArray": "$$m"}, back, NOT_OK]}}}
    return {"$cond": [{"$eq": [{"$type": "$$wv"}, "object"]}, {"$let": {"vars": {"r": rest}, "in": made}}, NOT_OK]}
