"""Readings per series per time window, counted from the documents: what a bucket would hold today.

A bucket recommendation is only as good as the readings it would put in each bucket. The rate alone does
not tell them: 10,000 observations of 8,417 weather stations over a week are 1.2 per station, whatever
the insert rate. So, for a few candidate pairs of a *series key* (a top-level string, integer or ObjectId
that most documents hold) and a *time field* (a top-level date), the analysis counts the documents of
each (series, window) group, for each window of :data:`WINDOWS`.

One counter per pair holds the documents per (series, minute); every window's groups are counted from it
at the end. Memory is bounded as for distinct values: keys are kept while at most ``limit`` are; past
that, only the series whose stable hash passes a sampling filter are kept, each with all its minutes, so
the number of groups is estimated and their sizes are those of a uniform sample of series.
"""

from __future__ import annotations

import datetime
from collections import Counter
from itertools import compress, repeat
from operator import add, floordiv, lshift, not_, rshift
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


_MINUTE_BITS = 32
_MINUTE_MASK = (1 << _MINUTE_BITS) - 1
# Minutes since the epoch, offset so that dates back to 1970 minus 4,000 years stay positive.
_MINUTE_OFFSET = 1 << 31


class SeriesMinutes:
    """Documents per (series, minute) as integer keys (the series' spread hash above the minute), exact up to
    ``limit`` keys; past it, only the series whose hash passes a sampling filter are kept, each with all its
    minutes, so every window's groups can be counted from them at the end (:meth:`summary`)."""

    __slots__ = ("counts", "level", "limit")

    def __init__(self, limit: int = 16384) -> None:
        self.counts: Counter[int] = Counter()
        self.level = 0
        self.limit = limit

    def add_many(self, series: list[int], minutes: list[int]) -> None:
        """``series``: the spread hashes of the documents' series; ``minutes``: their minutes, offset."""
        if self.level:
            kept = list(map(not_, map(rshift, series, repeat(_shift(self.level)))))
            series, minutes = list(compress(series, kept)), list(compress(minutes, kept))
        self.counts.update(map(add, map(lshift, series, repeat(_MINUTE_BITS)), minutes))
        self._bound()

    def merge(self, other: SeriesMinutes) -> None:
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

    def summary(self, window: int, documents: int) -> dict[str, Any]:
        """Groups of ``window`` seconds and their sizes; ``documents``, those counted (an estimate of the
        groups never passes it)."""
        width = window // 60
        groups: Counter[tuple[int, int]] = Counter()
        for key, count in self.counts.items():
            groups[(key >> _MINUTE_BITS, ((key & _MINUTE_MASK) - _MINUTE_OFFSET) // width)] += count
        sizes = sorted(groups.values())
        estimated = min(len(sizes) << self.level, documents)
        out: dict[str, Any] = {
            "groups": estimated,
            "exact": self.level == 0,
            "readings_per_group": round(documents / estimated, 3) if estimated else None,
        }
        for p in PERCENTILES:
            out[f"p{p}"] = sizes[min(len(sizes) - 1, max(0, -(-p * len(sizes) // 100) - 1))] if sizes else None
        out["max"] = sizes[-1] if sizes else None
        return out


def _only(counts: Counter[int], level: int) -> Counter[int]:
    """The counts of the keys whose series a sample at ``level`` keeps."""
    shift = _shift(level)
    return Counter({key: n for key, n in counts.items() if not (key >> _MINUTE_BITS) >> shift})


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
        varied = [key for key, n in scalars.most_common() if n >= enough and len(values[key]) > 1]
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
            minutes = list(map(add, map(floordiv, dates_to_epochs(stamps), repeat(60)), repeat(_MINUTE_OFFSET)))
            for series in self.series_fields:
                values = list(map(dict.get, holders, repeat(series)))
                column = minutes
                if None in values:
                    held = [value is not None for value in values]
                    values, column = list(compress(values, held)), list(compress(minutes, held))
                if not values:
                    continue
                self.documents[(series, time)] += len(values)
                self.groups[(series, time)].add_many(list(map(hash, zip(_stable_keys(values)))), list(map(int, column)))

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
                        "windows": [
                            {"seconds": window, **self.groups[(series, time)].summary(window, documents)}
                            for window in WINDOWS
                        ],
                    }
                )
        return out
