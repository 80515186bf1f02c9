"""One order for BSON values of any types, as MongoDB compares them: by type bracket first (numbers
together, whatever their type), then by value within one. Documents and arrays are ordered by their
encoded bytes: stable, though not the server's field-by-field comparison."""

from __future__ import annotations

import datetime
from typing import Any

import bson
from bson import MaxKey, MinKey, ObjectId

# The type brackets in BSON's comparison order.
_TYPE_RANK = [
    (MinKey, 0), (type(None), 1), (bool, 8), ((int, float, bson.Int64, bson.Decimal128), 2), (str, 3), (dict, 4),
    (list, 5), ((bytes, bson.Binary), 6), (ObjectId, 7), (datetime.datetime, 9), (bson.Timestamp, 10),
    (bson.Regex, 11), (MaxKey, 13),
]  # fmt: skip
_OTHER = 12


def _rank(value: Any) -> int:
    for kind, rank in _TYPE_RANK:
        if isinstance(value, kind):
            return rank
    return _OTHER


def bson_order(value: Any) -> tuple[int, Any]:
    """A sort key: ``bson_order(a) < bson_order(b)`` where MongoDB orders ``a`` before ``b``."""
    rank = _rank(value)
    if rank == 2:
        return rank, float(value.to_decimal()) if isinstance(value, bson.Decimal128) else value
    if rank in (4, 5, _OTHER):
        return rank, bson.encode({"v": value})
    if rank == 10:
        return rank, (value.time, value.inc)
    if rank == 11:
        return rank, (value.pattern, value.flags)
    if rank in (0, 13):
        return rank, 0
    return rank, value
