"""Sentinel values: one number standing for "missing" in a field that otherwise holds measurements.

Weather stations write 9999 for an elevation they do not know and 999.9 for a temperature they did not
read; averaged or bucketed with the real values, they make every figure wrong. A value is a sentinel
when it is one of the all-nines forms (:data:`CANDIDATES`) and lies outside the range of the field's other
values with a gap (at least twice as far from zero as the farthest of them), or when it is the only value
the field ever holds (a placeholder constant). Counting them costs one C-level filter per numeric buffer:
the counts of the candidates and the range of the other values are kept per field, merged like the rest.
"""

from __future__ import annotations

from collections import Counter
from itertools import filterfalse
from typing import Any

CANDIDATES = frozenset(
    (99, 999, 9999, 99999, 999999, -99, -999, -9999, -99999, -999999, 99.9, 999.9, 9999.9, 99999.9, -99.9, -999.9,
     -9999.9)
)  # fmt: skip
# The field must otherwise vary: at least this many other distinct values.
MIN_OTHER_VALUES = 3
# Fewer numeric values than this say too little to call one of them a placeholder.
MIN_VALUES = 20


class NumberRange:
    """The numeric values of one field: the counts of sentinel candidates and the range of the others."""

    __slots__ = ("candidates", "low", "high", "count")

    def __init__(self) -> None:
        self.candidates: Counter[float] = Counter()
        self.low: float | None = None
        self.high: float | None = None
        self.count = 0

    def add_many(self, numbers: list[Any]) -> None:
        if not numbers:
            return
        self.count += len(numbers)
        hits = list(filter(CANDIDATES.__contains__, numbers))
        if hits:
            self.candidates.update(hits)
            numbers = list(filterfalse(CANDIDATES.__contains__, numbers))
            if not numbers:
                return
        low, high = min(numbers), max(numbers)
        if low != low or high != high:  # NaN in the column: compare without it
            numbers = [value for value in numbers if value == value]
            if not numbers:
                return
            low, high = min(numbers), max(numbers)
        self.low = low if self.low is None else min(self.low, low)
        self.high = high if self.high is None else max(self.high, high)

    def merge(self, other: NumberRange) -> None:
        self.count += other.count
        self.candidates.update(other.candidates)
        for value in (other.low, other.high):
            if value is not None:
                self.low = value if self.low is None else min(self.low, value)
                self.high = value if self.high is None else max(self.high, value)

    def summary(self, distinct: int) -> dict[str, Any] | None:
        """``{min, max, sentinels}`` for the report (None without numbers); ``distinct``, the field's
        distinct values (all types), tells a field that otherwise varies."""
        seen = [v for v in (self.low, self.high, *self.candidates) if v is not None]
        if not seen:  # no numbers, or only NaN
            return None
        return {
            "min": _plain(min(seen)),
            "max": _plain(max(seen)),
            "sentinels": self.sentinels(distinct),
        }

    def sentinels(self, distinct: int) -> list[dict[str, Any]]:
        if self.count < MIN_VALUES or not self.candidates:
            return []
        found = []
        others = distinct - len(self.candidates)
        for value, count in sorted(self.candidates.items()):
            if self.low is None and len(self.candidates) == 1:
                found.append(_entry(value, count, self.count, constant=True))
            elif others >= MIN_OTHER_VALUES and _outside(value, self.low, self.high):
                found.append(_entry(value, count, self.count, constant=False))
        return found


def _outside(value: float, low: float | None, high: float | None) -> bool:
    if low is None or high is None:
        return False
    if value > 0:
        return value > high and (high <= 0 or value >= 2 * high)
    return value < low and (low >= 0 or value <= 2 * low)


def _entry(value: float, count: int, values: int, constant: bool) -> dict[str, Any]:
    return {"value": _plain(value), "count": count, "share": round(count / values, 4), "constant": constant}


def _plain(value: float) -> float | int:
    return int(value) if float(value).is_integer() and abs(value) < 2**53 else value
