"""Insert-rate profiles from ObjectId timestamps and date fields.

Counts are kept per hour, and per minute and per second while their number of buckets stays under a
bound (``bucket_limit``, 20,000), so memory is bounded whatever the time span: per-second peaks are
reported for documents spread over at most 20,000 distinct seconds, per-minute peaks likewise.
When the documents are a sample, counts are scaled by ``estimated total / sampled`` and only averages
and hourly figures are reported: per-second peaks cannot be read off a sample.
"""

from __future__ import annotations

import datetime
from collections import Counter

from bson import ObjectId

_EPOCH = datetime.datetime(1970, 1, 1)
_UTC_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)

TIMELINE_POINTS = 48


def date_to_epoch(value: datetime.datetime) -> float:
    if value.tzinfo is None:
        return (value - _EPOCH).total_seconds()
    return (value - _UTC_EPOCH).total_seconds()


def objectid_epoch(oid: ObjectId) -> int:
    return int.from_bytes(oid.binary[:4], "big")


def significant(value: float, digits: int = 4) -> float:
    """``value`` to ``digits`` significant figures (small rates must not round to zero)."""
    if value == 0:
        return 0.0
    return float(f"{value:.{digits}g}")


def iso(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class TimeProfile:
    """When the documents of a collection were created, according to one field."""

    __slots__ = (
        "field",
        "kind",
        "n",
        "first",
        "last",
        "per_second",
        "per_minute",
        "per_hour",
        "bucket_limit",
    )

    def __init__(self, field: str, kind: str, bucket_limit: int = 20_000) -> None:
        self.field = field
        self.kind = kind
        self.n = 0
        self.first: float | None = None
        self.last: float | None = None
        self.per_second: Counter[int] | None = Counter()
        self.per_minute: Counter[int] | None = Counter()
        self.per_hour: Counter[int] = Counter()
        self.bucket_limit = bucket_limit

    def add_many(self, epochs: list[float]) -> None:
        if not epochs:
            return
        low, high = min(epochs), max(epochs)
        self.first = low if self.first is None else min(self.first, low)
        self.last = high if self.last is None else max(self.last, high)
        self.n += len(epochs)
        seconds = [int(e // 1) for e in epochs]
        self.per_second = self._counted(self.per_second, seconds)
        if self.per_minute is not None:
            self.per_minute = self._counted(self.per_minute, [s // 60 for s in seconds])
        self.per_hour.update(s // 3600 for s in seconds)

    def merge(self, other: TimeProfile) -> None:
        if other.first is None or other.last is None:
            return
        self.first = other.first if self.first is None else min(self.first, other.first)
        self.last = other.last if self.last is None else max(self.last, other.last)
        self.n += other.n
        self.per_second = self._merged(self.per_second, other.per_second)
        self.per_minute = self._merged(self.per_minute, other.per_minute)
        self.per_hour.update(other.per_hour)

    def _counted(self, counter: Counter[int] | None, keys: list[int]) -> Counter[int] | None:
        if counter is None:
            return None
        counter.update(keys)
        return counter if len(counter) <= self.bucket_limit else None

    def _merged(self, mine: Counter[int] | None, theirs: Counter[int] | None) -> Counter[int] | None:
        """Both parts' buckets, or None when either part (or the sum) outgrew the bound."""
        if mine is None or theirs is None:
            return None
        mine.update(theirs)
        return mine if len(mine) <= self.bucket_limit else None

    def to_dict(self, scale: float = 1.0) -> dict:
        assert self.first is not None and self.last is not None
        span = self.last - self.first
        estimated = self.n * scale
        sampled = scale != 1.0
        out: dict = {
            "field": self.field,
            "kind": self.kind,
            "documents": self.n,
            "estimated_documents": round(estimated),
            "first": iso(self.first),
            "last": iso(self.last),
            "span_seconds": round(span, 3),
            "avg_per_sec": significant(estimated / span) if span > 0 else None,
            "avg_per_hour": significant(estimated / span * 3600) if span > 0 else None,
            "peak_per_second": None,
            "peak_per_minute": None,
            "peak_per_hour": round(max(self.per_hour.values()) * scale) if self.per_hour else None,
            "scaled": sampled,
            "timeline": self._timeline(scale),
        }
        if not sampled:
            if self.per_second:
                out["peak_per_second"] = max(self.per_second.values())
            if self.per_minute:
                out["peak_per_minute"] = max(self.per_minute.values())
        return out

    def _timeline(self, scale: float) -> list[dict]:
        """At most TIMELINE_POINTS evenly spaced points covering the span, from the hourly counts."""
        if not self.per_hour:
            return []
        first_hour, last_hour = min(self.per_hour), max(self.per_hour)
        hours = last_hour - first_hour + 1
        width = max(1, -(-hours // TIMELINE_POINTS))
        points: Counter[int] = Counter()
        for hour, count in self.per_hour.items():
            points[(hour - first_hour) // width] += count
        return [
            {
                "start": iso((first_hour + index * width) * 3600),
                "hours": width,
                "count": round(points[index] * scale),
            }
            for index in range(-(-hours // width))
        ]
