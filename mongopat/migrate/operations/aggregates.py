"""The aggregates a ``pre_aggregation`` step stores, computed alike in Python and by a server.

Each is MongoDB's accumulator over the related documents, as the application's read computes it before
the migration (a ``$lookup`` and ``$sum`` over what it found):

- ``sum``, ``avg``, ``min``, ``max``: of the numbers among the documents' values (int, long, double with
  NaN and the infinities, Decimal128; a boolean, a string or an array is no number), typed as MongoDB types
  them. With a Decimal128 among them every number is made a decimal first, as ``computed`` folds them
  (``mongopat/expressions.py``). No number: ``sum`` is 0, the others null. NaN is the smallest number;
- ``count``: the documents whose fields equal the condition's values as ``$eq`` compares them (a missing
  field equals nothing, not even null; ``true`` is not ``1``; ``1`` is ``1.0``), or every document. A
  dotted field is read through sub-documents only, as ``get_path`` reads a sum's (never through an array).

The related documents are taken in ``_id`` order, since a sum of doubles depends on its order.

Operators: ``$map``, ``$filter``, ``$size``, ``$isNumber`` (4.4), ``$literal``, ``$eq``, ``$and``,
``$toDecimal`` and the accumulators used as expressions: all in MongoDB 5.0.
"""

from __future__ import annotations

import decimal
from collections.abc import Iterable
from typing import Any

from bson import Decimal128, Int64

from mongopat.bson_order import bson_order
from mongopat.expressions import fold, is_nan, render_fold
from mongopat.migrate.operations.server_paths import plain, value_at
from mongopat.migrate.transform_api import Document, get_path, has_path, hashable_key

Compute = dict[str, dict[str, Any]]
_MISSING = object()


def empty_aggregates(compute: Compute) -> Document:
    """The aggregates of no related document."""
    return {name: 0 if next(iter(spec)) in ("sum", "count") else None for name, spec in compute.items()}


def fields_read(spec: dict[str, Any]) -> list[str]:
    """The related documents' fields one output reads."""
    op, argument = next(iter(spec.items()))
    if op == "count":
        return list(argument) if isinstance(argument, dict) else []
    return [argument]


def aggregate_rows(rows: Iterable[Document], foreign: str, compute: Compute) -> dict[Any, Document]:
    """Per value of ``foreign`` (keyed by :func:`hashable_key`), the aggregates of its rows."""
    grouped: dict[Any, list[Document]] = {}
    for row in sorted(rows, key=lambda row: bson_order(row.get("_id"))):
        grouped.setdefault(hashable_key(get_path(row, foreign)), []).append(row)
    return {key: aggregates_of(group, compute) for key, group in grouped.items()}


def aggregates_of(rows: list[Document], compute: Compute) -> Document:
    """The aggregates of ``rows``, in ``compute``'s order."""
    result: Document = {}
    for name, spec in compute.items():
        op, argument = next(iter(spec.items()))
        if op == "count":
            conditions = argument.items() if isinstance(argument, dict) else ()
            result[name] = sum(all(_equal(_value_at(row, k), v) for k, v in conditions) for row in rows)
        else:
            numbers = [n for row in rows if (n := _number(get_path(row, argument))) is not None]
            result[name] = fold(op, numbers)
    return result


def server_aggregates(compute: Compute, rows: str) -> dict[str, Any]:
    """Per output, an aggregation expression giving what :func:`aggregates_of` gives for the array of
    documents ``rows`` (an expression: ``$field`` or ``$$variable``)."""
    outputs: dict[str, Any] = {}
    for name, spec in compute.items():
        op, argument = next(iter(spec.items()))
        if op == "count":
            conditions = argument.items() if isinstance(argument, dict) else ()
            if not conditions:
                outputs[name] = {"$size": rows}
                continue
            equal = [{"$eq": [value_at(key, "$$r."), {"$literal": value}]} for key, value in conditions]
            outputs[name] = {"$size": {"$filter": {"input": rows, "as": "r", "cond": {"$and": equal}}}}
        else:
            value = f"$$r.{argument}"
            numbers = {"$map": {"input": rows, "as": "r", "in": {"$cond": [{"$isNumber": value}, value, None]}}}
            outputs[name] = render_fold(op, numbers)
    return outputs


def server_computes_alike(compute: Compute) -> bool:
    """Whether :func:`server_aggregates` reads what Python reads: every field read is a plain path (none
    ``$``-led or empty)."""
    return all(isinstance(n, str) and plain(n) for spec in compute.values() for n in fields_read(spec))


def _value_at(row: Document, name: str) -> Any:
    """The value at ``name`` as ``get_path`` reads it, or ``_MISSING`` where it finds none."""
    return get_path(row, name) if has_path(row, name) else _MISSING


def _number(value: Any) -> int | float | decimal.Decimal | None:
    """A number ``$sum`` adds, or None."""
    kind = type(value)
    if kind is int or kind is float or kind is Int64:
        return value
    if kind is Decimal128:
        return value.to_decimal()
    return None


def _equal(value: Any, wanted: Any) -> bool:
    """``$eq`` of ``value`` (``_MISSING`` for a missing field) and ``wanted``."""
    if value is _MISSING:
        return False
    if isinstance(value, bool) or isinstance(wanted, bool):
        return type(value) is type(wanted) and value == wanted
    a, b = _number(value), _number(wanted)
    if a is not None or b is not None:
        if a is None or b is None:
            return False
        if is_nan(a) or is_nan(b):
            return is_nan(a) and is_nan(b)  # NaN equals NaN in BSON's comparison
        return a == b
    if isinstance(wanted, dict):  # field by field, in order
        same_names = isinstance(value, dict) and list(value) == list(wanted)
        return same_names and all(map(_equal, value.values(), wanted.values()))
    if isinstance(wanted, list):
        return isinstance(value, list) and len(value) == len(wanted) and all(map(_equal, value, wanted))
    return type(value) is type(wanted) and value == wanted
