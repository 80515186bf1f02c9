"""Bounded-memory summaries of streams: value distributions and distinct counts.

Both are exact while the data is small and switch to a bounded approximation past a limit, so memory
depends on the limit and never on the number of documents read.
"""

from __future__ import annotations

import datetime
import math
from array import array
from collections import Counter
from collections.abc import Iterable
from functools import partial
from itertools import compress, repeat
from operator import attrgetter, floordiv, methodcaller, not_, rshift
from typing import Any
from zlib import crc32

from bson import Decimal128, ObjectId

# Percentiles use the nearest-rank definition: the smallest value v such that at least p% of the values
# are <= v. It always returns a value that was observed (exact mode), which keeps small samples honest.
PERCENTILES = (50, 95, 99)


class Distribution:
    """Counts of numeric values (array lengths, document sizes).

    Exact (a counter of values) while at most ``exact_limit`` distinct values have been seen; after that,
    values fall into logarithmic buckets whose relative error is ``relative_error`` (1% by default), so
    percentiles stay within 1% of the truth with at most a few thousand buckets.
    """

    __slots__ = ("counts", "exact", "n", "total", "minimum", "maximum", "exact_limit", "_gamma_log")

    def __init__(self, exact_limit: int = 4096, relative_error: float = 0.01) -> None:
        self.counts: Counter[float] = Counter()
        self.exact = True
        self.n = 0
        self.total = 0.0
        self.minimum: float | None = None
        self.maximum: float | None = None
        self.exact_limit = exact_limit
        gamma = (1 + relative_error) / (1 - relative_error)
        self._gamma_log = math.log(gamma)

    def add_many(self, values: list[int] | list[float]) -> None:
        if not values:
            return
        low, high = min(values), max(values)
        self.minimum = low if self.minimum is None else min(self.minimum, low)
        self.maximum = high if self.maximum is None else max(self.maximum, high)
        self.n += len(values)
        self.total += sum(values)
        if self.exact:
            self.counts.update(values)
            if len(self.counts) > self.exact_limit:
                self._to_buckets()
        else:
            self.counts.update(map(self._bucket, values))

    def add(self, value: float) -> None:
        self.add_many([value])

    def merge(self, other: Distribution) -> None:
        if other.n == 0:
            return
        if other.exact:
            values = other.counts
            self.minimum = other.minimum if self.minimum is None else min(self.minimum, other.minimum)
            self.maximum = other.maximum if self.maximum is None else max(self.maximum, other.maximum)
            self.n += other.n
            self.total += other.total
            if self.exact:
                self.counts.update(values)
                if len(self.counts) > self.exact_limit:
                    self._to_buckets()
            else:
                for value, count in values.items():
                    self.counts[self._bucket(value)] += count
            return
        if self.exact:
            self._to_buckets()
        self.minimum = other.minimum if self.minimum is None else min(self.minimum, other.minimum)
        self.maximum = other.maximum if self.maximum is None else max(self.maximum, other.maximum)
        self.n += other.n
        self.total += other.total
        self.counts.update(other.counts)

    # Buckets are keyed by a signed index; 0 holds values within (-1, 1).
    def _bucket(self, value: float) -> int:
        if -1 < value < 1:
            return 0
        index = int(math.ceil(math.log(abs(value)) / self._gamma_log)) + 1
        return index if value > 0 else -index

    def _representative(self, bucket: int) -> float:
        if bucket == 0:
            return 0.0
        magnitude = abs(bucket) - 1
        # Midpoint (in log space) of the bucket's range.
        value = math.exp((magnitude - 0.5) * self._gamma_log)
        return value if bucket > 0 else -value

    def _to_buckets(self) -> None:
        buckets: Counter[float] = Counter()
        for value, count in self.counts.items():
            buckets[self._bucket(value)] += count
        self.counts = buckets
        self.exact = False

    def _sorted_points(self) -> list[tuple[float, int]]:
        if self.exact:
            return sorted(self.counts.items())
        return sorted((self._representative(b), c) for b, c in self.counts.items())

    def percentile(self, p: float) -> float | None:
        if self.n == 0:
            return None
        rank = max(1, math.ceil(p / 100 * self.n))
        seen = 0
        for value, count in self._sorted_points():
            seen += count
            if seen >= rank:
                return self._clamp(value)
        return self.maximum

    def _clamp(self, value: float) -> float:
        assert self.minimum is not None and self.maximum is not None
        return min(max(value, self.minimum), self.maximum)

    def count_above(self, threshold: float) -> int:
        return sum(c for v, c in self._sorted_points() if v > threshold)

    def histogram(self, bounds: Iterable[float]) -> list[dict[str, float | int | None]]:
        """Counts per bin: each bin holds values ``<= le`` and above the previous bound; a last open bin."""
        points = self._sorted_points()
        bins: list[dict[str, float | int | None]] = []
        index = 0
        for bound in bounds:
            count = 0
            while index < len(points) and points[index][0] <= bound:
                count += points[index][1]
                index += 1
            bins.append({"le": bound, "count": count})
            if self.maximum is not None and bound >= self.maximum:
                break
        rest = sum(c for _, c in points[index:])
        if rest:
            bins.append({"le": None, "count": rest})
        return bins

    def summary(self) -> dict[str, float | int | bool | None]:
        if self.n == 0:
            return {"count": 0, "min": None, "mean": None, "p50": None, "p95": None, "p99": None, "max": None}
        out: dict[str, float | int | bool | None] = {
            "count": self.n,
            "min": _tidy(self.minimum),
            "mean": round(self.total / self.n, 2),
        }
        for p in PERCENTILES:
            out[f"p{p}"] = _tidy(self.percentile(p))
        out["max"] = _tidy(self.maximum)
        out["exact"] = self.exact
        return out


def _tidy(value: float | None) -> float | int | None:
    if value is None:
        return None
    if float(value).is_integer():
        return int(value)
    return round(value, 2)


# A value is kept at sampling level L when the top L bits of its 64-bit spread hash are zero. Python's hash
# is a signed 64-bit integer, and read unsigned, a negative one has its top bit set: so the test is that
# the hash is not negative and below 2**(64 - L), which is the hash shifted right by 64 - L being 0 (an
# arithmetic shift leaves -1 for a negative one).
#
# The hash must not depend on the process: Python salts the hashes of str, bytes, ObjectId and datetime
# per process (PYTHONHASHSEED), which made the estimates of one file differ from run to run. Each value is
# first turned into a number that does not (its CRC-32, or itself for numbers, whose hashes are unsalted
# and equal for 3 and 3.0 as MongoDB's comparison wants), and that number is spread by the hash of a
# 1-tuple, which is unsalted too.


def _shift(level: int) -> int:
    return 64 - level


_encode = methodcaller("encode", "utf-8", "surrogatepass")
_NUMBERS = frozenset((int, float, bool))
# None's own hash is its address before Python 3.12: it stands for this number instead.
_NONE_KEY = 0x6E6F6E65
_EPOCH_NAIVE = datetime.datetime(1970, 1, 1)
_MICROSECOND_STEP = datetime.timedelta(microseconds=1)


# An ObjectId's 12 bytes read straight from its slot (its ``binary`` property costs a Python call a value).
_OBJECTID_BYTES = attrgetter("_ObjectId__id") if hasattr(ObjectId(), "_ObjectId__id") else attrgetter("binary")


def _stable_key(value: object) -> object:
    """A stand-in for ``value`` whose hash is the same in every process (numbers stand for themselves)."""
    kind = type(value)
    if kind is str:
        return crc32(_encode(value))  # type: ignore[arg-type]
    if kind is ObjectId:
        return crc32(value.binary)  # type: ignore[attr-defined]
    if isinstance(value, (int, float)):
        return value
    if value is None:
        return _NONE_KEY
    if isinstance(value, datetime.datetime):
        naive = value.replace(tzinfo=None) - value.utcoffset() if value.tzinfo else value
        return (naive - _EPOCH_NAIVE) // _MICROSECOND_STEP
    if isinstance(value, bytes):
        return crc32(value)
    if isinstance(value, Decimal128):
        return crc32(value.bid)
    return crc32(_encode(f"{type(value).__name__}:{value!r}"))


def _stable_keys(values: list[object]) -> list[object]:
    """:func:`_stable_key` of many, by C loops for the common columns (all strings, all ObjectIds, numbers)."""
    kinds = set(map(type, values))
    if kinds <= _NUMBERS:
        return values
    if kinds == {str}:
        return list(map(crc32, map(_encode, values)))  # type: ignore[arg-type]
    if kinds == {ObjectId}:
        return list(map(crc32, map(_OBJECTID_BYTES, values)))  # type: ignore[arg-type]
    if kinds == {datetime.datetime}:
        try:  # naive, as pymongo decodes dates: microseconds since the epoch, by C loops
            return list(map(floordiv, map(_EPOCH_NAIVE.__rsub__, values), repeat(_MICROSECOND_STEP)))  # type: ignore[arg-type]
        except TypeError:  # some carry a time zone
            pass
    return list(map(_stable_key, values))


def _spread(value: object) -> int:
    # The hash of a 1-tuple multiplies the value's hash through (CPython's tuple hash), so its high bits
    # depend on all of the value's: small ints, whose own hash is the int itself, sample as uniformly as
    # strings. (Its low bits do not: consecutive ints kept on them were over-counted by up to 40%.)
    return hash((_stable_key(value),))


def stable_order(values: Iterable[object]) -> list[object]:
    """``values`` in an order that is the same in every process (a set of strings iterates in an order
    that depends on the process's hash seed)."""
    return sorted(values, key=_spread)


def _sampled(values: list[object], level: int) -> Iterable[object]:
    """The values kept at ``level`` (>= 1), filtered at C speed: ``zip`` makes the 1-tuples, and the shift
    and ``not_`` are builtins whose results, 0 and small ints, are cached objects."""
    keys = _stable_keys(values)
    return compress(values, map(not_, map(rshift, map(hash, zip(keys)), repeat(_shift(level)))))


class HashableDecimal128(Decimal128):
    """A Decimal128 that can be counted: pymongo's is unhashable, so prices would count no distinct values.
    Equal to (and rendered as) the Decimal128 it stands for."""

    __slots__ = ()

    def __hash__(self) -> int:
        return hash(self.bid)


# Parallel parts send their analyses to the parent pickled. Sets of ObjectIds or dates (ids, creation times:
# the largest sets) are pickled one object at a time by Python code; they go as one bytes string instead.
_PACKED_FROM = 64
_MICROSECOND = datetime.timedelta(microseconds=1)
_EPOCH = datetime.datetime(1970, 1, 1)


def _packed(values: set[object]) -> Any:
    if len(values) < _PACKED_FROM:
        return values
    kinds = set(map(type, values))
    if kinds == {ObjectId}:
        return ("objectId", b"".join(map(attrgetter("binary"), values)))  # type: ignore[arg-type]
    if kinds == {datetime.datetime} and not any(map(attrgetter("tzinfo"), values)):
        micros = array("q", map(_MICROSECOND.__rfloordiv__, map(_EPOCH.__rsub__, values)))  # type: ignore[arg-type]
        return ("date", micros.tobytes())
    return values


def _unpacked(packed: Any) -> set[object]:
    if type(packed) is not tuple:
        return packed
    kind, data = packed
    if kind == "objectId":
        return set(map(ObjectId, (data[i : i + 12] for i in range(0, len(data), 12))))
    micros = array("q")
    micros.frombytes(data)
    return set(map(_EPOCH.__add__, map(partial(datetime.timedelta, 0, 0), micros)))


class DistinctCounter:
    """Distinct values of a field: exact up to ``limit`` values, estimated past it.

    Past the limit it keeps only values whose spread hash has its top ``level`` bits at zero (adaptive
    sampling): the kept set is a uniform 1/2**level sample of the distinct values, so the estimate is
    ``len(kept) * 2**level`` (standard error about 1/sqrt(limit/2)), and membership is still exact for any
    value whose hash passes the same filter, which references between collections rely on.
    Counts per value are kept while at most ``top_limit`` distinct values have been seen, for top values;
    meanwhile their keys are the distinct values, and the set is only filled from them (in first-seen
    order) when it is read or the counts are dropped.
    """

    __slots__ = ("_values", "level", "limit", "top_limit", "counts", "unhashable")

    def __init__(self, limit: int = 10_000, top_limit: int = 200) -> None:
        self._values: set[object] = set()
        self.level = 0
        self.limit = limit
        self.top_limit = top_limit
        self.counts: Counter[object] | None = Counter()
        self.unhashable = 0

    def __getstate__(self) -> tuple[Any, ...]:
        return (_packed(self._values), self.level, self.limit, self.top_limit, self.counts, self.unhashable)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        packed, self.level, self.limit, self.top_limit, self.counts, self.unhashable = state
        self._values = _unpacked(packed)

    @property
    def exact(self) -> bool:
        return self.level == 0

    @property
    def _deferred(self) -> bool:
        """True while the counts stand for the set (they hold every distinct value, none is sampled out)."""
        return self.counts is not None and self.top_limit <= self.limit

    @property
    def values(self) -> set[object]:
        if self._deferred:
            assert self.counts is not None
            self._values.update(list(self.counts))
        return self._values

    @values.setter
    def values(self, values: set[object]) -> None:
        self._values = values

    def add_many(self, values: list[object]) -> None:
        if self.counts is not None:
            try:
                self.counts.update(values)
            except TypeError:
                values = self._hashable(values)
                self.counts.update(values)
            if len(self.counts) <= self.top_limit and self._deferred:
                return  # the counts hold every value: the set is filled from them when needed
            if len(self.counts) > self.top_limit:
                seen = list(self.counts)  # every value so far, in first-seen order: what the set may lack
                self.counts = None
                self._values.update(_sampled(seen, self.level) if self.level else seen)
                if len(self._values) > self.limit:
                    self._raise_level()
                return
        if self.level == 0:
            try:
                self._values.update(values)
            except TypeError:
                self._values.update(self._hashable(values))
            if len(self._values) > self.limit:
                self._raise_level()
        else:
            try:
                self._values.update(_sampled(values, self.level))
            except TypeError:
                self._values.update(_sampled(self._hashable(values), self.level))
            if len(self._values) > self.limit:
                self._raise_level()

    def _hashable(self, values: list[object]) -> list[object]:
        kept = []
        for value in values:
            try:
                hash(value)
            except TypeError:
                if type(value) is Decimal128:
                    value = HashableDecimal128.from_bid(value.bid)  # type: ignore[attr-defined]
                else:
                    self.unhashable += 1
                    continue
            kept.append(value)
        return kept

    def _raise_level(self) -> None:
        while len(self.values) > self.limit:
            self.level += 1
            self.values = set(_sampled(list(self.values), self.level))

    def merge(self, other: DistinctCounter) -> None:
        """Fold in a counter of another part of the same stream (parallel reading)."""
        mine, theirs = self.values, other.values  # before the counts change
        if self.counts is not None and other.counts is not None:
            self.counts.update(other.counts)
            if len(self.counts) > self.top_limit:
                self.counts = None
        else:
            self.counts = None
        self.unhashable += other.unhashable
        level = max(self.level, other.level)
        # The values kept at a level all pass its filter: only the side kept at a lower level is sampled again.
        if self.level < level:
            mine = set(_sampled(list(mine), level))
        if other.level < level:
            theirs = set(_sampled(list(theirs), level))
        self.values = mine | theirs
        self.level = level
        if len(self.values) > self.limit:
            self._raise_level()

    def estimate(self) -> int:
        return len(self.values) << self.level

    def passes_filter(self, value: object) -> bool:
        """True when membership of ``value`` can be decided exactly from the kept values."""
        return self.level == 0 or not _spread(value) >> _shift(self.level)

    def __contains__(self, value: object) -> bool:
        return value in self.values

    def top(self, n: int = 10) -> list[tuple[object, int]] | None:
        if self.counts is None:
            return None
        return self.counts.most_common(n)
