"""BSON sizes of documents read from Extended JSON, computed from the columns the analysis walks.

A document's BSON size is 4 (length) + its elements + 1 (terminator); an element is a type byte, the key
as a C string and the value. Summed column by column, sizes cost a few C loops per field, where
``bson.encode`` of every document costs about a sixth of the analysis. Every function returns the sizes
of its values as a list, as one int when all the values have the same size, or None when it cannot tell
for sure (a type it does not size, a key or string ``bson.encode`` would refuse, an integer past 64 bits):
the caller then encodes the documents, so a size is never an estimate and an error is ``bson.encode``'s.
"""

from __future__ import annotations

import datetime
from itertools import accumulate, repeat
from operator import add, sub
from typing import Any

import bson
from bson import Decimal128, Int64, MaxKey, MinKey, ObjectId, Timestamp
from bson.datetime_ms import DatetimeMS

from mongopat.bsontypes import INT32_MAX, INT32_MIN

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

Sizes = list[int] | int | None

# Values whose size does not depend on the value.
FIXED: dict[type, int] = {
    float: 8,
    bool: 1,
    type(None): 0,
    ObjectId: 12,
    datetime.datetime: 8,
    DatetimeMS: 8,
    Timestamp: 8,
    Decimal128: 16,
    MinKey: 0,
    MaxKey: 0,
}
_SIZED = frozenset({*FIXED, str, int, Int64})
_OPTIONAL_STRING = {str, type(None)}
_FIXED_OR_INT32 = {**FIXED, int: 4}
_FIXED_OR_INT = frozenset(_FIXED_OR_INT32)


def _int32s(values: list[Any]) -> bool:
    """Whether the Python ints among ``values`` all fit in 32 bits (4 bytes each in BSON)."""
    ints = [value for value in values if type(value) is int]
    return min(ints) >= INT32_MIN and max(ints) <= INT32_MAX


def scalar_sizes(values: list[Any], kinds: set[type]) -> Sizes:
    """Sizes of values that are neither documents nor arrays (``kinds``: their types)."""
    if len(kinds) == 1:
        kind = next(iter(kinds))
        fixed = FIXED.get(kind)
        if fixed is not None:
            return fixed
        if kind is str:
            return _string_sizes(values)
        if kind is int:
            return _int_sizes(values)
        if kind is Int64:  # always 8 bytes, if it fits
            return 8 if min(values) >= INT64_MIN and max(values) <= INT64_MAX else None
        return None
    if kinds == _OPTIONAL_STRING and all(map(str.isascii, filter(None, values))):  # common enough
        return [0 if value is None else len(value) + 5 for value in values]
    if kinds <= _FIXED_OR_INT and (int not in kinds or _int32s(values)):  # numbers of mixed types, mostly
        return list(map(_FIXED_OR_INT32.__getitem__, map(type, values)))
    if kinds <= _SIZED:
        sizes = [_scalar_size(value) for value in values]
        return None if None in sizes else sizes  # type: ignore[return-value]
    return None


def _string_sizes(values: list[str]) -> list[int] | None:
    # int32 length, UTF-8 bytes, terminator. ``isascii`` is a flag read, so ASCII columns skip encoding.
    if all(map(str.isascii, values)):
        return list(map(add, map(len, values), repeat(5)))
    try:
        return [len(value.encode()) + 5 for value in values]
    except UnicodeEncodeError:  # lone surrogates: bson.encode refuses them, and says so
        return None


def _int_sizes(values: list[int]) -> Sizes:
    low, high = min(values), max(values)
    if low >= INT32_MIN and high <= INT32_MAX:
        return 4
    if low >= INT64_MIN and high <= INT64_MAX:
        return [4 if INT32_MIN <= value <= INT32_MAX else 8 for value in values]
    return None


def _scalar_size(value: Any) -> int | None:
    fixed = FIXED.get(type(value))
    if fixed is not None:
        return fixed
    if type(value) is str:
        sizes = _string_sizes([value])
        return None if sizes is None else sizes[0]
    if type(value) is int and INT32_MIN <= value <= INT32_MAX:
        return 4
    return 8 if INT64_MIN <= value <= INT64_MAX else None


def encoded_size(document: dict[str, Any]) -> int | None:
    """One document's size by ``bson.encode`` (documents walked one by one), None when it cannot be
    encoded (the caller encodes the batch again and reports the error)."""
    try:
        return len(bson.encode(document))
    except Exception:  # any refusal: the batch is encoded again, which raises it properly
        return None


def array_overhead(length: int) -> int:
    """The size of an array of ``length`` elements without their values: int32 length, terminator, and per
    element a type byte and its key ("0", "1", ...) as a C string."""
    digits, low, high = 0, 0, 10  # keys low..high-1 have the same number of characters
    width = 1
    while low < length:
        digits += width * (min(length, high) - low)
        low, high, width = high, high * 10, width + 1
    return 5 + 2 * length + digits


# The overhead of arrays up to this long, looked up rather than computed.
_OVERHEAD = [array_overhead(length) for length in range(4097)]


def array_sizes(lengths: list[int], element_sizes: Sizes) -> Sizes:
    """Sizes of arrays of ``lengths`` elements whose values, all arrays' in order, have ``element_sizes``."""
    if element_sizes is None:
        return None
    short = max(lengths, default=0) < len(_OVERHEAD)
    overheads = map(_OVERHEAD.__getitem__ if short else array_overhead, lengths)
    if type(element_sizes) is int:
        return [overhead + element_sizes * n for overhead, n in zip(overheads, lengths, strict=True)]
    ends = list(accumulate(lengths))
    prefix = [0, *accumulate(element_sizes)]  # type: ignore[arg-type]
    totals = map(sub, map(prefix.__getitem__, ends), map(prefix.__getitem__, [0, *ends[:-1]]))
    return list(map(add, totals, overheads))


def layout_size(layout: tuple[str, ...]) -> int | None:
    """The part of a document's size its keys make: length, terminator, and per field a type byte and the
    key as a C string. None for a key ``bson.encode`` refuses."""
    try:
        keys = sum(map(len, map(str.encode, layout)))
    except (UnicodeEncodeError, TypeError):
        return None
    if any("\x00" in key for key in layout):
        return None
    return 5 + 2 * len(layout) + keys


def document_sizes(layout: tuple[str, ...], columns: list[Sizes]) -> Sizes:
    """Sizes of documents laid out as ``layout``, from the sizes of their fields' values (``columns``,
    in the layout's order)."""
    total = layout_size(layout)
    vectors = []
    for sizes in columns:
        if sizes is None or total is None:
            return None
        if type(sizes) is int:
            total += sizes
        else:
            vectors.append(sizes)
    if not vectors:
        return total
    if len(vectors) == 1:
        return list(map(add, vectors[0], repeat(total)))  # type: ignore[arg-type]
    return list(map(add, map(sum, zip(*vectors, strict=True)), repeat(total)))
