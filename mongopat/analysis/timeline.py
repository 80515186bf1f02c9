"""Insert-rate profiles from ObjectId timestamps and date fields.

Counts are kept per hour, and per minute and per second while their number of buckets stays under a
bound (``bucket_limit``, 20,000), so memory is bounded whatever the time span: per-second peaks are
reported for documents spread over at most 20,000 distinct seconds, per-minute peaks likewise.
When the documents are a sample, counts are scaled by ``estimated total / sampled`` and only averages
and hourly figures are reported: per-second peaks cannot be read off a sample.
"""

from __future__ import annotations

import datetime
import math
from collections import Counter
from itertools import repeat
from operator import attrgetter, floordiv, itemgetter
from struct import iter_unpack

from bson import ObjectId

_EPOCH = datetime.datetime(1970, 1, 1)
_UTC_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)

TIMELINE_POINTS = 48
# A load: a run of active seconds (gaps of at most LOAD_GAP_SECONDS) lasting at most LOAD_MAX_SECONDS
# and holding at least LOAD_MIN_DOCUMENTS. A profile is a bulk load when at most MAX_BULK_LOADS loads hold
# BULK_SHARE of it: an import (mongoimport, a restore of client-made _ids, a one-off batch job) rather than
# a rate. Many loads through the span (stations all reporting on the hour) are a cadence, not a bulk load.
LOAD_GAP_SECONDS = 2
LOAD_MAX_SECONDS = 60
LOAD_MIN_DOCUMENTS = 100
MAX_BULK_LOADS = 3
BULK_SHARE = 0.8
# Date fields beyond this many per collection get no insert-rate profile (memory bound).
MAX_DATE_PROFILES = 10


def date_to_epoch(value: datetime.datetime) -> float:
    if value.tzinfo is None:
        return (value - _EPOCH).total_seconds()
    return (value - _UTC_EPOCH).total_seconds()


def dates_to_epochs(values: list[datetime.datetime]) -> list[float]:
    """:func:`date_to_epoch` of many dates, by C loops when they are all naive (as pymongo decodes them)."""
    try:
        return list(map(datetime.timedelta.total_seconds, map(_EPOCH.__rsub__, values)))
    except TypeError:  # some carry a time zone
        return [date_to_epoch(value) for value in values]


def objectid_epoch(oid: ObjectId) -> int:
    return int.from_bytes(oid.binary[:4], "big")


def objectid_epochs(oids: list[ObjectId]) -> list[int]:
    """:func:`objectid_epoch` of many: their first four bytes read by one C loop over their bytes joined."""
    return list(map(itemgetter(0), iter_unpack(">I8x", b"".join(map(attrgetter("binary"), oids)))))


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
        seconds = list(map(math.floor, epochs))
        self.per_second = self._counted(self.per_second, seconds)
        if self.per_minute is not None:
            self.per_minute = self._counted(self.per_minute, list(map(floordiv, seconds, repeat(60))))
        self.per_hour.update(map(floordiv, seconds, repeat(3600)))

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
        # Averages are taken over the whole seconds (hours) the documents fall in, as the peaks are counted:
        # documents stamped at seconds 0, 1 and 2 span 2 seconds but fill three, and an average over the
        # span alone would pass the busiest second.
        # An hourly average needs an hour of data: 10,000 documents imported in 3 seconds are not
        # 12 million an hour.
        seconds = math.floor(self.last) - math.floor(self.first) + 1
        out: dict = {
            "field": self.field,
            "kind": self.kind,
            "documents": self.n,
            "estimated_documents": round(estimated),
            "first": iso(self.first),
            "last": iso(self.last),
            "span_seconds": round(span, 3),
            "avg_per_sec": significant(estimated / seconds) if span > 0 else None,
            "avg_per_hour": significant(estimated / seconds * 3600) if seconds >= 3600 else None,
            "peak_per_second": None,
            "peak_per_minute": None,
            "peak_per_hour": round(max(self.per_hour.values()) * scale) if self.per_hour else None,
            "scaled": sampled,
            "timeline": self._timeline(scale),
            "bulk_load": self._bulk_load(scale),
        }
        if not sampled:
            if self.per_second:
                out["peak_per_second"] = max(self.per_second.values())
            if self.per_minute:
                out["peak_per_minute"] = max(self.per_minute.values())
        return out

    def _bulk_load(self, scale: float) -> dict | None:
        """Loads (short runs of many documents) when they hold most documents, else None.

        Needs the per-second counts; past their bound (more than 20,000 active seconds) the documents are
        spread too thinly over time for loads to hold most of them.
        """
        if not self.per_second or self.first is None or self.last is None:
            return None
        loads: list[tuple[int, int, int]] = []  # (first second, last second, documents)
        start = previous = None
        count = 0
        for second in sorted(self.per_second):
            if previous is not None and second - previous > LOAD_GAP_SECONDS:
                loads.append((start, previous, count))  # type: ignore[arg-type]
                start, count = second, 0
            if start is None:
                start = second
            count += self.per_second[second]
            previous = second
        loads.append((start, previous, count))  # type: ignore[arg-type]
        short = [load for load in loads if load[1] - load[0] + 1 <= LOAD_MAX_SECONDS]
        loads = sorted((load for load in short if load[2] * scale >= LOAD_MIN_DOCUMENTS), key=lambda load: -load[2])
        loads = loads[:MAX_BULK_LOADS]
        in_loads = sum(load[2] for load in loads)
        if not loads or in_loads < BULK_SHARE * self.n:
            return None
        largest = loads[0]
        rest = self.n - in_loads
        span = self.last - self.first
        rest_rate = significant(rest * scale / span) if rest * scale >= LOAD_MIN_DOCUMENTS and span > 0 else None
        return {
            "loads": len(loads),
            "documents": round(in_loads * scale),
            "share": round(in_loads / self.n, 4),
            "largest": {
                "at": iso(largest[0]),
                "seconds": largest[1] - largest[0] + 1,
                "documents": round(largest[2] * scale),
            },
            # What was written outside the loads, as a rate over the whole span (None when too little).
            "rest_per_sec": rest_rate,
        }

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


def steady_rate(profile: dict) -> float | None:
    """The insert rate a profile of the report stands for: its average, or for a bulk load the rate of what
    was written outside the loads (None when nothing else was): a load's pace is not an insert rate."""
    bulk = profile.get("bulk_load")
    if bulk:
        return bulk.get("rest_per_sec")
    return profile.get("avg_per_sec")


class DateProfiles(dict[str, TimeProfile]):
    """The insert-rate profiles of a collection's date fields, by path (at most :data:`MAX_DATE_PROFILES`).

    Its :meth:`add` is what the slots of date fields call at each flush. It holds these profiles and not
    the whole analysis, so an analysis makes no reference cycle: it is freed by reference counting as soon
    as it is dropped, and the cyclic collector never has to walk it (on 100,000 orders it walked tens of
    thousands of objects to free them, at the end of each run).
    """

    def add(self, path: str, dates: list[datetime.datetime]) -> None:
        profile = self.get(path)
        if profile is None:
            if len(self) >= MAX_DATE_PROFILES:
                return
            profile = self[path] = TimeProfile(path, "date")
        profile.add_many(dates_to_epochs(dates))

    def merge(self, other: DateProfiles) -> None:
        for path, profile in other.items():
            if path in self:
                self[path].merge(profile)
            elif len(self) < MAX_DATE_PROFILES:
                self[path] = profile
