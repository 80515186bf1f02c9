"""Readings per series per time window, counted from the documents: what a bucket would hold today.

A bucket recommendation is only as good as the readings it would put in each bucket. The rate alone does
not tell them: 10,000 observations of 8,417 weather stations over a week are 1.2 per station, whatever
the insert rate. So, for a few candidate pairs of a *series key* (a top-level string, integer or ObjectId
that most of the first documents hold, whose values recur among them) and a *time field* (a top-level
date), the analysis counts the documents of each (series, window) group, for each window of
:data:`WINDOWS`.

One counter per pair holds the documents per (series, time unit); every window's groups are counted from
it at the end. Memory is bounded: pairs are kept while at most ``limit`` are; past that, a long span of few
series is counted in coarser units, and many series are sampled (only the series whose stable hash passes
a filter are kept, each with all its units), so the number of groups is estimated and their sizes are
those of a uniform sample of series.
"""

from __future__ import annotations

import datetime
import re
from collections import Counter
from itertools import compress, repeat
from operator import floordiv, not_, rshift
from typing import Any

from bson import ObjectId

from mongopat.analysis.sketches import PERCENTILES, _shift, _stable_keys
from mongopat.analysis.timeline import dates_to_epochs
from mongopat.predictions import percentile

# Windows a bucket may span (a minute to a week), the ones the bucket rule chooses among.
WINDOWS = (60, 300, 3600, 6 * 3600, 86400, 7 * 86400)
# A candidate series key holds at most this many distinct values per document in the first documents.
RECURRENCE = 0.5
MAX_TIME_FIELDS = 1
MAX_SERIES_FIELDS = 2
# A candidate field must be held by this share of the first documents read.
MIN_PRESENCE = 0.9
SERIES_TYPES = (str, int, ObjectId)
_DATES = {datetime.datetime}
# Field names that say a value is a series (the bucket rule prefers them as its series key too).
SERIES_NAME = re.compile(r"(sensor|device|meter|station|source|series|symbol|host|account|user|machine)", re.I)


# The time units the counts may be kept in, in minutes: each window of WINDOWS is a whole number of them.
UNITS = tuple(window // 60 for window in WINDOWS)
# Past the limit, the counts are coarsened in time when they hold more than this many units per series on
# average (few series over a long span), else a sample of series is kept.
UNITS_PER_SERIES = 64


class SeriesMinutes:
    """Documents per (series value, time unit), a unit a minute to begin with, exact up to ``limit`` pairs.
    Past it, a long span of few series is counted in coarser units (windows finer than the unit are then not
    counted), many series are sampled: only those whose stable hash passes a filter are kept, each with all
    its units. Every window's groups are counted from the pairs at the end (:meth:`summaries`). The pairs are
    keyed by the values themselves (a string caches its hash): stable hashes only once sampling starts."""

    __slots__ = ("counts", "level", "limit", "unit")

    def __init__(self, limit: int = 16384) -> None:
        self.counts: Counter[tuple[Any, int]] = Counter()
        self.level = 0
        self.limit = limit
        self.unit = 1  # minutes a time unit holds

    def add_many(self, series: list[Any], minutes: list[int]) -> None:
        if self.level:
            kept = _passing(series, self.level)
            series, minutes = list(compress(series, kept)), list(compress(minutes, kept))
        if self.unit > 1:
            minutes = list(map(floordiv, minutes, repeat(self.unit)))
        self.counts.update(zip(series, minutes, strict=True))
        self._bound()

    def merge(self, other: SeriesMinutes) -> None:
        other.coarsen(self.unit)
        self.coarsen(other.unit)
        level = max(self.level, other.level)
        self.counts.update(other.counts if level == other.level else _only(other.counts, level))
        if level > self.level:
            self.level = level
            self.counts = _only(self.counts, level)
        self._bound()

    def coarsen(self, unit: int) -> None:
        """Count in units of ``unit`` minutes from now on (a multiple of the current unit)."""
        if unit <= self.unit:
            return
        factor = unit // self.unit
        counts: Counter[tuple[Any, int]] = Counter()
        for (value, when), count in self.counts.items():
            counts[(value, when // factor)] += count
        self.counts, self.unit = counts, unit

    def _bound(self) -> None:
        while len(self.counts) > self.limit:
            series = len({value for value, _when in self.counts})
            coarser = [unit for unit in UNITS if unit > self.unit]
            if coarser and len(self.counts) > UNITS_PER_SERIES * series:
                self.coarsen(coarser[0])
                continue
            self.level += 1
            self.counts = _only(self.counts, self.level)

    def summaries(self, documents: int) -> list[dict[str, Any]]:
        """For each window of WINDOWS, its groups and their sizes (figures None for windows finer than the
        unit kept); ``documents``, those counted (an estimate of the groups never passes it)."""
        out = []
        groups: Counter[tuple[Any, int]] = self.counts
        unit = self.unit
        for window in WINDOWS:
            minutes = window // 60
            if minutes < self.unit:
                out.append({"seconds": window, "groups": None, "exact": False, "readings_per_group": None,
                            **dict.fromkeys((f"p{p}" for p in PERCENTILES), None), "max": None})  # fmt: skip
                continue
            if minutes > unit:  # windows nest: each is counted from the one before it
                factor, coarser = minutes // unit, Counter()
                for (value, when), count in groups.items():
                    coarser[(value, when // factor)] += count
                groups, unit = coarser, minutes
            out.append({"seconds": window, **_sizes(sorted(groups.values()), self.level, documents)})
        return out


def _sizes(sizes: list[int], level: int, documents: int) -> dict[str, Any]:
    estimated = min(len(sizes) << level, documents)
    out: dict[str, Any] = {
        "groups": estimated,
        "exact": level == 0,
        "readings_per_group": round(documents / estimated, 3) if estimated else None,
    }
    for p in PERCENTILES:
        out[f"p{p}"] = percentile(sizes, p)
    out["max"] = sizes[-1] if sizes else None
    return out


def _passing(values: list[Any], level: int) -> list[bool]:
    """Which values a sample at ``level`` keeps: the top ``level`` bits of their stable spread hash zero."""
    return list(map(not_, map(rshift, map(hash, zip(_stable_keys(values))), repeat(_shift(level)))))


def _only(counts: Counter[tuple[Any, int]], level: int) -> Counter[tuple[Any, int]]:
    """The counts of the pairs whose series a sample at ``level`` keeps."""
    pairs = list(counts)
    kept = list(compress(pairs, _passing([pair[0] for pair in pairs], level)))
    return Counter(dict(zip(kept, map(counts.__getitem__, kept), strict=True)))


class SeriesCadence:
    """Group sizes of candidate (series key, time field) pairs, for each window of :data:`WINDOWS`."""

    __slots__ = ("time_fields", "series_fields", "groups", "documents", "chosen")

    def __init__(self) -> None:
        self.time_fields: list[str] = []
        self.series_fields: list[str] = []
        # (series, time) -> documents per series and minute
        self.groups: dict[tuple[str, str], SeriesMinutes] = {}
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
        # A series key's values recur: fields whose values are mostly new in the first documents (a
        # customer per order, a station per observation) are left out, and MP101 bounds their readings
        # per series by the documents per series in all the data instead.
        varied = [key for key, n in scalars.most_common() if n >= enough and 1 < len(values[key]) <= RECURRENCE * n]
        # Names that say "series" first (sensorId, station, symbol), then the fields whose values recur most.
        varied.sort(key=lambda key: (not SERIES_NAME.search(key), len(values[key])))
        self.series_fields = varied[:MAX_SERIES_FIELDS]
        for series in self.series_fields:
            for time in self.time_fields:
                self.groups[(series, time)] = SeriesMinutes()

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
            minutes = list(map(int, map(floordiv, dates_to_epochs(stamps), repeat(60))))
            for series in self.series_fields:
                values = list(map(dict.get, holders, repeat(series)))
                column = minutes
                if None in values:
                    held = [value is not None for value in values]
                    values, column = list(compress(values, held)), list(compress(minutes, held))
                if not values:
                    continue
                self.documents[(series, time)] += len(values)
                self.groups[(series, time)].add_many(values, column)

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
            if key in self.groups:
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
                        "windows": self.groups[(series, time)].summaries(documents),
                    }
                )
        return out
