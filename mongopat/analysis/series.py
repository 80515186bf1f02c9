"""Readings per series per time window, counted from the documents: what a bucket would hold today.

A bucket recommendation is only as good as the readings it would put in each bucket. The rate alone does
not tell them: 10,000 observations of 8,417 weather stations over a week are 1.2 per station, whatever
the insert rate. So, for a few candidate pairs of a *series key* (a top-level string, integer or ObjectId
that most documents hold) and a *time field* (a top-level date), the analysis counts the documents of
each (series, window) group, for each window of :data:`WINDOWS`.

Memory is bounded as for distinct values: a group is kept while at most ``limit`` groups are; past that,
only groups whose stable hash passes a sampling filter are kept (each with its exact count), so the
number of groups is estimated and the distribution of group sizes is that of a uniform sample of groups.
"""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Iterator
from itertools import compress, repeat
from operator import add, floordiv, mul, not_, rshift
from typing import Any

from bson import ObjectId

from mongopat.analysis.sketches import PERCENTILES, _shift, _stable_keys
from mongopat.analysis.timeline import dates_to_epochs

# Windows a bucket may span (a minute to a week), the ones the bucket rule chooses among.
WINDOWS = (60, 300, 3600, 6 * 3600, 86400, 7 * 86400)
MAX_TIME_FIELDS = 2
MAX_SERIES_FIELDS = 3
# A candidate field must be held by this share of the first documents read.
MIN_PRESENCE = 0.9
SERIES_TYPES = (str, int, ObjectId)
_DATES = {datetime.datetime}
# Spreads a series' key apart from its window number in one integer key.
_SERIES_SPREAD = 1_000_003


def _kept(keys: list[int], level: int) -> Iterator[int]:
    """The keys a sample at ``level`` keeps (the top ``level`` bits of their spread hash zero), by C loops."""
    return compress(keys, map(not_, map(rshift, map(hash, zip(keys)), repeat(_shift(level)))))


def _only(counts: Counter[int], level: int) -> Counter[int]:
    """The counts of the keys a sample at ``level`` keeps."""
    kept = list(_kept(list(counts), level))
    return Counter(dict(zip(kept, map(counts.__getitem__, kept), strict=True)))


class GroupSizes:
    """Documents per group (integer keys), exact up to ``limit`` groups, a hash-sampled subset past it."""

    __slots__ = ("counts", "level", "limit")

    def __init__(self, limit: int = 4096) -> None:
        self.counts: Counter[int] = Counter()
        self.level = 0
        self.limit = limit

    def add_many(self, keys: list[int]) -> None:
        if self.level:
            keys = list(_kept(keys, self.level))
        self.counts.update(keys)
        self._bound()

    def merge(self, other: GroupSizes) -> None:
        level = max(self.level, other.level)
        self.counts.update(other.counts if level == other.level else _only(other.counts, level))
        if level > self.level:
            self.level = level
            self.counts = _only(self.counts, level)
        self._bound()

    def _bound(self) -> None:
        while len(self.counts) > self.limit:
            self.level += 1
            self.counts = _only(self.counts, self.level)

    def summary(self, documents: int) -> dict[str, Any]:
        """Groups and their sizes, ``documents`` being those counted (a sampled estimate never passes it)."""
        scale = 1 << self.level
        sizes = sorted(self.counts.values())
        groups = min(len(sizes) * scale, documents)
        out: dict[str, Any] = {
            "groups": groups,
            "exact": self.level == 0,
            "readings_per_group": round(documents / groups, 3) if groups else None,
        }
        for p in PERCENTILES:
            out[f"p{p}"] = sizes[min(len(sizes) - 1, max(0, -(-p * len(sizes) // 100) - 1))] if sizes else None
        out["max"] = sizes[-1] if sizes else None
        return out


class SeriesCadence:
    """Group sizes of candidate (series key, time field) pairs, for each window of :data:`WINDOWS`."""

    __slots__ = ("time_fields", "series_fields", "groups", "documents", "chosen")

    def __init__(self) -> None:
        self.time_fields: list[str] = []
        self.series_fields: list[str] = []
        # (series, time, window) -> group sizes
        self.groups: dict[tuple[str, str, int], GroupSizes] = {}
        self.documents: Counter[tuple[str, str]] = Counter()
        self.chosen = False

    def _choose(self, docs: list[dict[str, Any]]) -> None:
        self.chosen = True
        dates: Counter[str] = Counter()
        scalars: Counter[str] = Counter()
        values: dict[str, set[Any]] = {}
        for doc in docs:
            for key, value in doc.items():
                if type(value) is datetime.datetime:
                    dates[key] += 1
                elif type(value) in SERIES_TYPES and key != "_id":
                    scalars[key] += 1
                    values.setdefault(key, set()).add(value)
        enough = MIN_PRESENCE * len(docs)
        self.time_fields = [key for key, n in dates.most_common(MAX_TIME_FIELDS) if n >= enough]
        # A constant is no series key (every document of one series): fields of several values only.
        varied = [key for key, n in scalars.most_common() if n >= enough and len(values[key]) > 1]
        self.series_fields = varied[:MAX_SERIES_FIELDS]
        for series in self.series_fields:
            for time in self.time_fields:
                for window in WINDOWS:
                    self.groups[(series, time, window)] = GroupSizes()

    def add(self, docs: list[dict[str, Any]]) -> None:
        if not self.chosen:
            self._choose(docs)
        if not self.groups:
            return
        # Column by column, by C loops (map, compress): this runs on every batch of the analysis.
        for time in self.time_fields:
            stamps = list(map(dict.get, docs, repeat(time)))
            holders = docs
            if set(map(type, stamps)) != _DATES:
                held = [type(value) is datetime.datetime for value in stamps]
                holders, stamps = list(compress(docs, held)), list(compress(stamps, held))
                if not holders:
                    continue
            seconds = list(map(int, dates_to_epochs(stamps)))
            windows = {window: list(map(floordiv, seconds, repeat(window))) for window in WINDOWS}
            for series in self.series_fields:
                values = list(map(dict.get, holders, repeat(series)))
                numbers = windows
                if None in values:
                    held = [value is not None for value in values]
                    values = list(compress(values, held))
                    numbers = {window: list(compress(column, held)) for window, column in windows.items()}
                if not values:
                    continue
                spread = list(map(mul, map(hash, zip(_stable_keys(values))), repeat(_SERIES_SPREAD)))
                self.documents[(series, time)] += len(values)
                for window, column in numbers.items():
                    self.groups[(series, time, window)].add_many(list(map(add, spread, column)))

    def merge(self, other: SeriesCadence) -> None:
        if not other.groups:
            return
        if not self.groups:
            self.time_fields, self.series_fields = other.time_fields, other.series_fields
            self.groups, self.documents, self.chosen = other.groups, other.documents, True
            return
        for key, sizes in other.groups.items():
            if key in self.groups:
                self.groups[key].merge(sizes)
        for key, n in other.documents.items():
            if (key[0], key[1], WINDOWS[0]) in self.groups:
                self.documents[key] += n

    def to_dict(self) -> list[dict[str, Any]]:
        out = []
        for series in self.series_fields:
            for time in self.time_fields:
                documents = self.documents.get((series, time), 0)
                if not documents:
                    continue
                out.append(
                    {
                        "series_key": series,
                        "time_field": time,
                        "documents": documents,
                        "windows": [
                            {"seconds": window, **self.groups[(series, time, window)].summary(documents)}
                            for window in WINDOWS
                        ],
                    }
                )
        return out
