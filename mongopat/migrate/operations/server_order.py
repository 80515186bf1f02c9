"""A list's first elements in a sort's order, computed by an aggregation expression exactly as the Python
transforms compute them (``subset._sorted``), for MongoDB 5.0, which has no ``$sortArray`` (5.2).

Python sorts the elements by a key per sort field, ``(value is None, value)`` (a missing field, a null
and an element that is not a document all read as None), in the first field's direction for the whole
sort, stably: elements with equal keys keep their stored order, in either direction. ``$reduce`` builds
the same list: each element goes into a sorted list cut to ``keep``, after every kept element it does not
go before; an element that goes after the last of a full list is dropped at once. That costs at most
``2 * keep`` comparisons per element, none for most elements of a list kept in the sort's order already.

The two orders differ where the kinds of values differ: MongoDB orders numbers before strings, Python
refuses to compare them (and keeps the stored order), Python compares booleans with numbers, and NaN
is unordered in Python. :func:`ordered_differently` is true for a list whose values, for one sort field
and None aside, are of more than one kind (number, string, date, ObjectId, boolean) or of another type
(Decimal128, documents, arrays, NaN...): the in-server path leaves such lists to the client side.

Operators: ``$reduce``, ``$filter``, ``$map``, ``$reverseArray``, ``$concatArrays``, ``$slice``,
``$arrayElemAt``, ``$size``, ``$setDifference``, ``$in``, ``$isArray``, ``$switch``, ``$cond``, ``$let``,
``$ifNull``, ``$toString`` and ``$type``, all in MongoDB 4.2.
"""

from __future__ import annotations

from typing import Any

Expression = Any

# What a sort value's BSON type is, as far as the two orders agree within one kind.
_KINDS = {"double": "number", "int": "number", "long": "number", "string": "string", "date": "date",
          "objectId": "objectId", "bool": "bool", "null": "none", "missing": "none"}  # fmt: skip


def _value(element: str, name: str) -> Expression:
    """The element's sort value, or null: a non-document element has none (``$$e.f`` of an array would
    read every element's ``f``)."""
    return {"$cond": [{"$eq": [{"$type": element}, "object"]}, f"{element}.{name}", None]}


def _keyed(elements: Expression, fields: list[str]) -> Expression:
    """Each element beside its sort values: ``{k: [value per field], e: element}`` (missing reads null)."""
    values = [{"$ifNull": [_value("$$e", name), None]} for name in fields]
    return {"$map": {"input": elements, "as": "e", "in": {"k": values, "e": "$$e"}}}


def _key_before(a: str, b: str, count: int) -> Expression:
    """Whether key ``a`` sorts strictly before key ``b`` in Python's ascending order of the tuples
    ``(value is None, value)``: the first field where they differ decides, None after any value."""

    def at(key: str, i: int) -> Expression:
        return {"$arrayElemAt": [f"{key}.k", i]}

    def less(i: int) -> Expression:
        x, y = at(a, i), at(b, i)
        return {"$cond": [{"$eq": [x, None]}, False, {"$or": [{"$eq": [y, None]}, {"$lt": [x, y]}]}]}

    alternatives = [{"$and": [*({"$eq": [at(a, j), at(b, j)]} for j in range(i)), less(i)]} for i in range(count)]
    return alternatives[0] if count == 1 else {"$or": alternatives}


def first_in_order(elements: Expression, sort: dict[str, int], keep: int) -> Expression:
    """The first ``keep`` elements of the list ``elements`` in ``sort``'s order, as ``subset`` keeps them
    (``keep`` >= 1; a nested sort path reads None where an element's prefix is no document, as Python's
    ``get_path``, and an array where it is one, which :func:`ordered_differently` declines)."""
    fields = list(sort)
    descending = next(iter(sort.values())) == -1

    def before(a: str, b: str) -> Expression:  # a goes before b in the sorted list
        return _key_before(b, a, len(fields)) if descending else _key_before(a, b, len(fields))

    # Lists are mostly appended to in time order: a descending sort reads them from the end, so that most
    # elements go after a full list's last and cost one comparison. Read from the end, an element goes
    # before the kept elements equal to it (it was stored before them).
    def goes_after(x: str) -> Expression:  # where "$$this" is put: after the kept x this is true for
        return before(x, "$$this") if descending else {"$not": [before("$$this", x)]}

    last = {"$arrayElemAt": ["$$value", -1]}
    insert = {
        "$slice": [
            {
                "$concatArrays": [
                    {"$filter": {"input": "$$value", "as": "x", "cond": goes_after("$$x")}},
                    ["$$this"],
                    {"$filter": {"input": "$$value", "as": "x", "cond": {"$not": [goes_after("$$x")]}}},
                ]
            },
            keep,
        ]
    }
    step = {
        "$cond": [
            {"$and": [{"$gte": [{"$size": "$$value"}, keep]},
                      {"$let": {"vars": {"l": last}, "in": goes_after("$$l")}}]},
            "$$value",
            insert,
        ]
    }  # fmt: skip
    keyed = _keyed({"$reverseArray": elements} if descending else elements, fields)
    kept = {"$reduce": {"input": keyed, "initialValue": [], "in": step}}
    return {"$map": {"input": kept, "as": "r", "in": "$$r.e"}}


def _kind(value: Expression) -> Expression:
    """The value's kind for :data:`_KINDS`, ``"other"`` for any other type and for NaN."""
    branches = [{"case": {"$eq": ["$$t", bson_type]}, "then": kind} for bson_type, kind in _KINDS.items()]
    kind = {"$switch": {"branches": branches, "default": "other"}}
    return {"$let": {"vars": {"v": value, "t": {"$type": value}},
                     "in": {"$cond": [nan_double("$$v", "$$t"), "other", kind]}}}  # fmt: skip


def nan_double(value: Expression, bson_type: Expression) -> Expression:
    """True where ``value``, whose ``$type`` is ``bson_type``, is a double NaN (which the server takes as
    equal to itself and orders first, and Python as equal to nothing): ``$toString`` spells it ``NaN``,
    as MongoDB 5.0 has no test of its own for it."""
    return {"$and": [{"$eq": [bson_type, "double"]}, {"$eq": [{"$toString": value}, "NaN"]}]}


def declined_key(value: Expression, types: list[str]) -> Expression:
    """True where ``value`` is of none of the BSON ``types`` a table's keys take, or is a double NaN
    (which ``$indexOfArray`` finds, and Python's dict never)."""
    kind = {"$type": value}
    return {"$or": [{"$not": [{"$in": [kind, types]}]}, nan_double(value, kind)]}


def ordered_differently(elements: Expression, sort: dict[str, int]) -> Expression:
    """True for a list the server would order otherwise than Python (see the module's docstring); false
    for anything that is not an array (the step does not take it)."""
    checks = []
    for name in sort:
        kinds = {"$setDifference": [{"$map": {"input": elements, "as": "e", "in": _kind(_value("$$e", name))}},
                                    ["none"]]}  # fmt: skip
        checks.append({"$let": {"vars": {"ks": kinds}, "in": {"$or": [{"$gt": [{"$size": "$$ks"}, 1]},
                                                                      {"$in": ["other", "$$ks"]}]}}})  # fmt: skip
    return {"$cond": [{"$isArray": elements}, {"$or": checks}, False]}
