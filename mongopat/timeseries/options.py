"""A time-series collection's options, and the ones a measured cadence calls for.

Each granularity fixes how long a bucket may span and how its start is rounded (MongoDB's documentation:
seconds, 1 hour rounded to the minute; minutes, 24 hours rounded to the hour; hours, 30 days rounded to the
day). MongoDB 6.3 added ``bucketMaxSpanSeconds`` with ``bucketRoundingSeconds`` (equal to each other) for
spans between them. A bucket also closes at 1,000 measurements or about 125 KiB, whichever comes first
(the defaults of ``timeseriesBucketMaxCount`` and ``timeseriesBucketMaxSize``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mongopat.errors import InputError


@dataclass(frozen=True)
class Granularity:
    name: str
    span_seconds: int  # a bucket's longest span
    rounding_seconds: int  # a bucket's start is the first measurement's time rounded down to this


GRANULARITIES = {
    g.name: g
    for g in (
        Granularity("seconds", 3600, 60),
        Granularity("minutes", 86400, 3600),
        Granularity("hours", 30 * 86400, 86400),
    )
}
MAX_MEASUREMENTS = 1000
MAX_BUCKET_BYTES = 125 * 1024
# The largest custom span MongoDB takes (bucketMaxSpanSeconds), one year.
MAX_CUSTOM_SPAN = 31_536_000


@dataclass(frozen=True)
class TimeSeriesOptions:
    """What ``create`` takes under ``timeseries`` (and ``expireAfterSeconds`` beside it)."""

    time_field: str
    meta_field: str | None = None
    granularity: str | None = "seconds"
    bucket_max_span_seconds: int | None = None
    expire_after_seconds: int | None = None

    def __post_init__(self) -> None:
        if self.bucket_max_span_seconds is None and self.granularity not in GRANULARITIES:
            raise InputError(f"granularity {self.granularity!r} is not one of {', '.join(GRANULARITIES)}")
        if self.bucket_max_span_seconds is not None and not 1 <= self.bucket_max_span_seconds <= MAX_CUSTOM_SPAN:
            raise InputError(f"bucket_max_span_seconds must be between 1 and {MAX_CUSTOM_SPAN:,}")

    @property
    def span_seconds(self) -> int:
        if self.bucket_max_span_seconds is not None:
            return self.bucket_max_span_seconds
        return GRANULARITIES[self.granularity or "seconds"].span_seconds

    @property
    def rounding_seconds(self) -> int:
        if self.bucket_max_span_seconds is not None:
            return self.bucket_max_span_seconds
        return GRANULARITIES[self.granularity or "seconds"].rounding_seconds

    def needs_version(self) -> str:
        return "6.3" if self.bucket_max_span_seconds is not None else "5.0"

    def create_options(self) -> dict[str, Any]:
        """The ``timeseries`` option of ``create`` (and of a dump's metadata)."""
        found: dict[str, Any] = {"timeField": self.time_field}
        if self.meta_field:
            found["metaField"] = self.meta_field
        if self.bucket_max_span_seconds is not None:
            found["bucketMaxSpanSeconds"] = self.bucket_max_span_seconds
            found["bucketRoundingSeconds"] = self.bucket_max_span_seconds
        else:
            found["granularity"] = self.granularity
        return found

    def same_as(self, existing: dict[str, Any]) -> bool:
        """Whether a collection's ``timeseries`` options are these (a server adds what it defaults)."""
        mine = self.create_options()
        return all(existing.get(key) == value for key, value in mine.items() if key != "granularity") and (
            "granularity" not in mine or existing.get("granularity", mine["granularity"]) == mine["granularity"]
        )

    @classmethod
    def from_collection(cls, options: dict[str, Any]) -> TimeSeriesOptions | None:
        """The options of a collection as ``listCollections`` or a dump's metadata give them; None for a
        collection that is not a time series."""
        found = options.get("timeseries")
        if not isinstance(found, dict) or not isinstance(found.get("timeField"), str):
            return None
        span = found.get("bucketMaxSpanSeconds")
        granularity = found.get("granularity")
        custom = span is not None and (
            granularity is None or span != GRANULARITIES.get(granularity, Granularity("", 0, 0)).span_seconds
        )
        expire = options.get("expireAfterSeconds")
        return cls(
            time_field=found["timeField"],
            meta_field=found.get("metaField") if isinstance(found.get("metaField"), str) else None,
            granularity=None if custom else (granularity if granularity in GRANULARITIES else "seconds"),
            bucket_max_span_seconds=int(span) if custom else None,
            expire_after_seconds=int(expire) if isinstance(expire, (int, float)) else None,
        )


def granularity_for(interval_seconds: float) -> str:
    """The granularity MongoDB's documentation matches to the time between two readings of one series:
    seconds below a minute, minutes below an hour, hours beyond."""
    if interval_seconds < 60:
        return "seconds"
    if interval_seconds < 3600:
        return "minutes"
    return "hours"


def custom_span_for(interval_seconds: float) -> int | None:
    """A ``bucketMaxSpanSeconds`` (6.3+) that fills a bucket with about :data:`MAX_MEASUREMENTS` readings
    of one series arriving every ``interval_seconds``, in whole hours (whole minutes below an hour); None
    when a granularity's span is already within a factor of two of it."""
    wanted = interval_seconds * MAX_MEASUREMENTS
    unit = 3600 if wanted >= 3600 else 60
    span = int(max(unit, min(MAX_CUSTOM_SPAN, round(wanted / unit) * unit)))
    granular = GRANULARITIES[granularity_for(interval_seconds)].span_seconds
    return None if 0.5 <= span / granular <= 2 else span
