"""One order for BSON values of any types, as MongoDB compares them without a collation: by type bracket
first (numbers together, whatever their type), then by value within one. NaN sorts before every other
number; a date without a time zone is UTC (as the driver decodes one); documents compare field by field
(each field's type bracket, then its name, then its value) and arrays element by element; binary by
length, then subtype, then bytes."""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import bson
from bson import Binary, Code, Decimal128, MaxKey, MinKey, ObjectId, Regex, Timestamp
from bson.datetime_ms import DatetimeMS

MIN_KEY, NULL, NUMBER, STRING, DOCUMENT, ARRAY, BINARY, OBJECT_ID, BOOLEAN, DATE = range(10)
TIMESTAMP, REGEX, OTHER, MAX_KEY = 10, 11, 12, 13

# Checked in this order: a bool is an int and a Code is a str to isinstance.
_BRACKETS: tuple[tuple[type | tuple[type, ...], int], ...] = (
    (MinKey, MIN_KEY),
    (type(None), NULL),
    (bool, BOOLEAN),
    ((int, float, Decimal128), NUMBER),
    (Code, OTHER),  # JavaScript sorts after regular expressions
    (str, STRING),
    (Mapping, DOCUMENT),
    ((list, tuple), ARRAY),
    ((bytes, Binary), BINARY),
    (ObjectId, OBJECT_ID),
    ((datetime.datetime, DatetimeMS), DATE),
    (Timestamp, TIMESTAMP),
    ((Regex, re.Pattern), REGEX),
    (MaxKey, MAX_KEY),
)

_EPOCH = datetime.datetime(1970, 1, 1)
_EPOCH_UTC = _EPOCH.replace(tzinfo=datetime.timezone.utc)
_MICROSECOND = datetime.timedelta(microseconds=1)


def type_bracket(value: Any) -> int:
    """Where ``value``'s type sorts among BSON's types (the constants above)."""
    return next((bracket for kind, bracket in _BRACKETS if isinstance(value, kind)), OTHER)


def bson_order(value: Any) -> tuple[Any, ...]:
    """A sort key: ``bson_order(a) < bson_order(b)`` where MongoDB orders ``a`` before ``b``."""
    bracket = type_bracket(value)
    if bracket == NUMBER:
        number = value.to_decimal() if isinstance(value, Decimal128) else value
        # A NaN (a Decimal128 sNaN included, which no comparison may touch) sorts before the other numbers;
        # ints, floats and Decimals compare exactly with each other.
        if number.is_nan() if isinstance(number, Decimal) else number != number:
            return (bracket, 0)
        return (bracket, 1, number)
    if bracket in (STRING, BOOLEAN):
        return (bracket, value)
    if bracket == DATE:
        return (bracket, _microseconds(value))
    if bracket == OBJECT_ID:
        return (bracket, value.binary)
    if bracket == DOCUMENT:
        return (bracket, tuple(_field(name, item) for name, item in value.items()))
    if bracket == ARRAY:
        return (bracket, tuple(bson_order(item) for item in value))
    if bracket == BINARY:
        data, subtype = bytes(value), getattr(value, "subtype", 0)
        return (bracket, len(data), subtype, data)
    if bracket == TIMESTAMP:
        return (bracket, value.time, value.inc)
    if bracket == REGEX:
        flags = value.flags if isinstance(value, Regex) else Regex.from_native(value).flags
        return (bracket, value.pattern, str(flags))
    if bracket == OTHER:
        return (bracket, bson.encode({"v": value}))
    return (bracket,)


def _field(name: str, item: Any) -> tuple[Any, ...]:
    key = bson_order(item)
    return (key[0], name, key)


def _microseconds(value: datetime.datetime | DatetimeMS) -> int:
    if isinstance(value, DatetimeMS):
        return int(value) * 1000
    since = value - (_EPOCH if value.tzinfo is None else _EPOCH_UTC)
    return since // _MICROSECOND
