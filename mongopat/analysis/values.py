"""Distributions of a field's values (numbers, dates and string lengths) in bounded memory.

Quantiles and histograms come from :class:`ValueSample`: exact while a field holds at most ``LIMIT``
distinct values, an estimate from a sample of them after (the report says which). Minimum and maximum
stay exact: they are kept apart from the sample. String lengths use the distribution of array lengths
and document sizes (:class:`~mongopat.analysis.sketches.Distribution`)."""

from __future__ import annotations

import datetime
import math
from collections import Counter
from typing import Any, TypedDict

from mongopat.analysis.sketches import Distribution, _sampled

# Distinct values kept before the sample thins: quantiles are exact up to this many distinct values.
LIMIT = 1024
QUANTILES = (5, 25, 50, 75, 95)
HISTOGRAM_BINS = 12


class ValueSample:
    """The values of a field with their counts, thinned by hash once they are many.

    Exact (every distinct value and its count) while at most ``LIMIT`` distinct values are seen. Past it,
    only values whose hash passes a filter that halves them at each level are kept, with their counts
    exact: a uniform sample of the distinct values, the same whatever order the values came in and however
    the stream was split among processes (the filter depends on the value alone, as the distinct counter's
    does), so a report does not change with ``--workers``. The filters run in C (``_sampled``)."""

    __slots__ = ("counts", "level", "seen", "low", "high", "bounds")

    def __init__(self, bounds: bool = True) -> None:
        self.counts: Counter[Any] = Counter()
        self.level = 0
        self.seen = 0
        self.low: Any = None
        self.high: Any = None
        self.bounds = bounds  # keep the exact minimum and maximum (numbers have theirs in NumberRange)

    def add_many(self, values: list[Any]) -> None:
        if not values:
            return
        self.seen += len(values)
        if self.bounds:
            low, high = min(values), max(values)
            self.low = low if self.low is None or low < self.low else self.low
            self.high = high if self.high is None or high > self.high else self.high
        self.counts.update(_sampled(values, self.level) if self.level else values)
        if len(self.counts) > LIMIT:
            self._thin()

    def _thin(self) -> None:
        while len(self.counts) > LIMIT:
            self.level += 1
            self.counts = _at_level(self.counts, self.level)

    def merge(self, other: ValueSample) -> None:
        """Fold in the sample of another part of the same stream."""
        if not other.seen:
            return
        self.seen += other.seen
        for value in (other.low, other.high):
            if value is not None:
                self.low = value if self.low is None or value < self.low else self.low
                self.high = value if self.high is None or value > self.high else self.high
        level = max(self.level, other.level)
        mine = _at_level(self.counts, level) if self.level < level else self.counts
        theirs = _at_level(other.counts, level) if other.level < level else other.counts
        self.counts = mine + theirs
        self.level = level
        self._thin()

    @property
    def exact(self) -> bool:
        return self.level == 0


def _at_level(counts: Counter[Any], level: int) -> Counter[Any]:
    """The values of ``counts`` (with their counts) that pass the filter of ``level``."""
    kept = set(_sampled(list(counts), level))
    return Counter({value: n for value, n in counts.items() if value in kept})


class Bin(TypedDict):
    low: Any
    high: Any
    count: int


class Spread(TypedDict):
    """What the report says of a field's values: quantiles and a histogram, exact or estimated."""

    quantiles: dict[str, Any]
    histogram: list[Bin]
    exact: bool
    range: dict[str, Any]  # the exact least and greatest value (for numbers, other than the sentinels)


def _quantile(ordered: list[tuple[float, int]], total: int, p: int) -> float:
    """Nearest rank over (value, count) pairs: the smallest value with at least p% of the count at or below."""
    rank, seen = max(1, math.ceil(p / 100 * total)), 0
    for value, count in ordered:
        seen += count
        if seen >= rank:
            return value
    return ordered[-1][0]


# Bin widths people read at a glance: 1, 2, 2.5 and 5 times a power of ten; for dates, whole clock periods.
NICE_STEPS = (1, 2, 2.5, 5, 10)
DATE_STEPS = (1, 5, 15, 30, 60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 7 * 86400,
              30 * 86400, 91 * 86400, 365 * 86400, 5 * 365 * 86400, 10 * 365 * 86400)  # fmt: skip


def _nice_bins(low: float, high: float, whole: bool, dates: bool) -> tuple[float, float, int]:
    """The first edge, width and number of at most ``HISTOGRAM_BINS`` bins covering [low, high], edges on
    round numbers (or round times for dates); bins of whole numbers hold whole numbers."""
    span = high - low
    if span <= 0:
        return low, 1.0, 1
    rough = span / HISTOGRAM_BINS
    if dates:
        width = float(next((step for step in DATE_STEPS if step >= rough), DATE_STEPS[-1]))
        while span / width >= HISTOGRAM_BINS:
            width *= 2
    else:
        power = 10 ** math.floor(math.log10(rough))
        width = next(step * power for step in NICE_STEPS if step * power >= rough)
        if whole:
            width = max(1.0, math.ceil(width))
            if width == 1 and span + 1 <= HISTOGRAM_BINS:  # one bin a value
                return low, 1.0, int(span) + 1
    start = math.floor(low / width) * width
    bins = max(1, math.floor((high - start) / width) + 1)
    while bins > HISTOGRAM_BINS:
        width *= 2
        start = math.floor(low / width) * width
        bins = max(1, math.floor((high - start) / width) + 1)
    return start, width, bins


def spread(
    counted: list[tuple[float, int]],
    seen: int,
    low: float,
    high: float,
    exact: bool,
    whole: bool,
    dates: bool = False,
) -> Spread | None:
    """Quantiles and a histogram of at most ``HISTOGRAM_BINS`` round bins over [low, high] of ``counted``
    (values and their counts, a sample standing for ``seen`` values); ``whole``: bins of whole numbers (an
    integer never falls between two bins); ``dates``: values are seconds, bins whole clock periods."""
    if not counted:
        return None
    ordered = sorted(counted)
    total = sum(count for _, count in ordered)
    quantiles = {f"p{p:02d}": _quantile(ordered, total, p) for p in QUANTILES}
    start, width, bins = _nice_bins(low, high, whole, dates)
    counts: list[float] = [0] * bins
    for value, count in ordered:
        counts[min(bins - 1, max(0, int((value - start) // width)))] += count
    scale = seen / total
    if not exact:  # the extremes are exact and were seen, though the sample may have missed them
        counts[0], counts[-1] = max(counts[0], 1 / scale), max(counts[-1], 1 / scale)
    histogram: list[Bin] = []
    for index, count in enumerate(counts):
        edge = start + index * width
        histogram.append({"low": edge, "high": edge + width - (1 if whole else 0), "count": round(count * scale)})
    return {"quantiles": quantiles, "histogram": histogram, "exact": exact, "range": {"min": low, "max": high}}


def number_spread(sample: ValueSample, sentinels: dict[float, int], low: float, high: float) -> Spread | None:
    """The spread of a field's numbers other than its sentinels (9999 standing for "missing"; with their
    exact counts) over the others' exact range [low, high]."""
    # NaN has no place on an axis; True and False count as numbers in a Counter but are not numbers here.
    counted = [
        (value, n) for value, n in sample.counts.items()
        if value == value and value not in sentinels and type(value) is not bool
    ]  # fmt: skip
    if not counted:
        return None
    whole = all(float(v).is_integer() for v in (*(value for value, _ in counted), low, high))
    found = spread(counted, max(sample.seen - sum(sentinels.values()), 1), low, high, sample.exact, whole)
    if found is None:
        return None
    found["quantiles"] = {k: _tidy(v) for k, v in found["quantiles"].items()}
    found["range"] = {k: _tidy(v) for k, v in found["range"].items()}
    for item in found["histogram"]:
        item["low"], item["high"] = _tidy(item["low"]), _tidy(item["high"])
    return found


class DateSpread(TypedDict):
    min: str
    max: str
    quantiles: dict[str, str]
    histogram: list[Bin]
    exact: bool


def _iso(seconds: float) -> str:
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + (f".{moment.microsecond // 1000:03d}Z" if moment.microsecond else "Z")


def _seconds(moment: datetime.datetime) -> float:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return moment.timestamp()


def date_spread(sample: ValueSample) -> DateSpread | None:
    """The spread of a field's dates, in UTC (BSON dates carry no zone)."""
    if not sample.counts:
        return None
    try:
        counted = [(_seconds(value), n) for value, n in sample.counts.items()]
        low, high = _seconds(sample.low), _seconds(sample.high)
    except (OverflowError, OSError, ValueError):  # dates outside what the platform's clock converts
        return None
    found = spread(counted, sample.seen, low, high, sample.exact, whole=False, dates=True)
    if found is None:
        return None
    return {
        "min": _iso(low),
        "max": _iso(high),
        "quantiles": {k: _iso(v) for k, v in found["quantiles"].items()},
        "histogram": [
            {"low": _iso(b["low"]), "high": _iso(b["high"]), "count": b["count"]} for b in found["histogram"]
        ],
        "exact": found["exact"],
    }


def length_quantiles(lengths: Distribution) -> dict[str, Any]:
    """Shortest, median, 95th percentile and longest of a field's strings, in characters."""
    summary = lengths.summary()
    return {"min_length": summary["min"], "p50_length": summary["p50"], "p95_length": summary["p95"]}


def _tidy(value: float) -> float | int:
    if isinstance(value, int):
        return value
    if float(value).is_integer() and abs(value) < 2**53:
        return int(value)
    return float(f"{value:.6g}")
