"""Bucket documents of a time-series collection (``system.buckets.<name>``), as a dump holds them.

A bucket groups the measurements of one ``metaField`` value over at most the span its options allow,
1,000 measurements or :data:`~mongopat.timeseries.options.MAX_BUCKET_BYTES`. Version 1 buckets hold each
field as a sub-document keyed "0", "1"...; versions 2 and 3 (5.2+, and every new bucket from 8.0) hold
each as a BSONColumn (binary subtype 7).

mongopat packs measurements into version 1 buckets (what a dump folder migration writes: mongorestore
inserts them as they are and the server reads them as any bucket), unpacks version 1 buckets, and reads
of a compressed bucket only what it states outside its columns (``control.count``, ``control.min`` and
``max``, ``meta``): BSONColumn is a server-internal encoding mongopat does not decode, so the measurements
of compressed buckets are counted, not read.
"""

from __future__ import annotations

import datetime
import hashlib
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import bson
from bson import ObjectId

from mongopat.bson_order import bson_order
from mongopat.timeseries.options import MAX_BUCKET_BYTES, MAX_MEASUREMENTS, TimeSeriesOptions

Document = dict[str, Any]
COMPRESSED_SUBTYPE = 7
# Bytes of readings the open buckets of a pack may hold before the least recently written closes.
OPEN_BYTES = 64 * 1024 * 1024


def normalised_meta(value: Any) -> Any:
    """The metaField value as the server groups it: sub-documents with their fields sorted."""
    if isinstance(value, dict):
        return {key: normalised_meta(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [normalised_meta(v) for v in value]
    return value


def _meta_key(value: Any) -> bytes:
    return bson.encode({"m": normalised_meta(value)})


def _bound(current: Any, value: Any, lower: bool) -> Any:
    if isinstance(current, dict) and isinstance(value, dict):  # sub-documents: field by field, as the server
        merged = dict(current)
        for key, item in value.items():
            merged[key] = _bound(merged[key], item, lower) if key in merged else item
        return merged
    a, b = bson_order(current), bson_order(value)
    return (value if b < a else current) if lower else (value if b > a else current)


@dataclass
class _OpenBucket:
    meta: Any
    has_meta: bool
    start: datetime.datetime
    sequence: int
    columns: dict[str, dict[str, Any]] = field(default_factory=dict)
    low: dict[str, Any] = field(default_factory=dict)
    high: dict[str, Any] = field(default_factory=dict)
    count: int = 0
    size: int = 0
    # The sort key of each bound that is no sub-document, kept so that each reading computes only its own.
    low_keys: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    high_keys: dict[str, tuple[Any, ...]] = field(default_factory=dict)

    @staticmethod
    def _widen(bounds: dict[str, Any], keys: dict[str, tuple[Any, ...]], name: str, value: Any, lower: bool) -> None:
        """Take ``value`` into the bound ``name`` (the lowest or the highest in MongoDB's order)."""
        if name not in bounds:
            bounds[name] = value
            return
        current = bounds[name]
        if isinstance(current, dict) and isinstance(value, dict):
            bounds[name] = _bound(current, value, lower)
            keys.pop(name, None)
            return
        known = keys.get(name)
        if known is None:
            known = bson_order(current)
        new = bson_order(value)
        if new < known if lower else new > known:
            bounds[name], keys[name] = value, new
        else:
            keys[name] = known

    def add(self, measurement: Document, options: TimeSeriesOptions) -> None:
        key = str(self.count)
        for name, value in measurement.items():
            if name == options.meta_field:
                continue
            self.columns.setdefault(name, {})[key] = value
            self._widen(self.low, self.low_keys, name, value, True)
            self._widen(self.high, self.high_keys, name, value, False)
        self.count += 1
        self.size += len(bson.encode(measurement))

    def document(self, options: TimeSeriesOptions) -> Document:
        low = dict(self.low)
        low[options.time_field] = self.start
        found: Document = {
            "_id": bucket_id(self.start, self.meta if self.has_meta else None, self.sequence),
            "control": {"version": 1, "min": low, "max": dict(self.high)},
        }
        if self.has_meta:
            found["meta"] = self.meta
        found["data"] = self.columns
        return found


def bucket_id(start: datetime.datetime, meta: Any, sequence: int) -> ObjectId:
    """An ``_id`` whose time is the bucket's start, as the server's are; its other eight bytes come from the
    meta value and the bucket's rank, so packing the same measurements again gives the same ``_id``s."""
    seconds = int(start.replace(tzinfo=datetime.timezone.utc).timestamp()) & 0xFFFFFFFF
    digest = hashlib.blake2b(_meta_key(meta) + sequence.to_bytes(8, "little"), digest_size=8).digest()
    return ObjectId(seconds.to_bytes(4, "big") + digest)


def _round_down(when: datetime.datetime, seconds: int) -> datetime.datetime:
    epoch = datetime.datetime(1970, 1, 1)
    naive = when.replace(tzinfo=None)
    whole = int((naive - epoch).total_seconds() // seconds) * seconds
    return epoch + datetime.timedelta(seconds=whole)


class MeasurementError(ValueError):
    """A measurement a time-series collection refuses (no date in its time field)."""


def pack(
    measurements: Iterable[Document], options: TimeSeriesOptions, open_bytes: int = OPEN_BYTES
) -> Iterator[Document]:
    """Version 1 buckets of ``measurements``, grouped as the server's bucket catalog groups inserts since
    6.3, which reopens buckets: a measurement goes into a bucket of its series whose span holds its time
    and that has room (1,000 measurements, about 125 KiB), else into a new one starting at its time rounded
    down. Buckets close when full, and the least recently written when the open ones pass ``open_bytes``
    (memory stays bounded: out-of-order readings beyond it open buckets of their own, as before 6.3);
    the rest close at the end. Packing the same measurements in the same order gives the same buckets."""
    open_buckets: OrderedDict[tuple[bytes, datetime.datetime], _OpenBucket] = OrderedDict()
    starts: dict[bytes, list[datetime.datetime]] = {}  # each series' open buckets, by start
    sequences: dict[bytes, int] = {}
    held = 0
    span = datetime.timedelta(seconds=options.span_seconds)

    def close(found: tuple[bytes, datetime.datetime]) -> Document:
        bucket = open_buckets.pop(found)
        starts[found[0]].remove(found[1])
        return bucket.document(options)

    for measurement in measurements:
        when = measurement.get(options.time_field)
        if not isinstance(when, datetime.datetime):
            raise MeasurementError(
                f"a document whose {options.time_field} is {type(when).__name__}, not a date: a time-series "
                "collection refuses it"
            )
        when = when.replace(tzinfo=None)
        has_meta = bool(options.meta_field) and options.meta_field in measurement
        meta = normalised_meta(measurement.get(options.meta_field)) if has_meta else None
        key = (b"1" + _meta_key(meta)) if has_meta else b"0"
        series = starts.setdefault(key, [])
        start = next((s for s in series if s <= when < s + span), None)
        if start is None:
            sequences[key] = sequences.get(key, -1) + 1
            start = _round_down(when, options.rounding_seconds)
            series.append(start)
            open_buckets[(key, start)] = _OpenBucket(meta, has_meta, start, sequences[key])
        found = (key, start)
        bucket = open_buckets[found]
        open_buckets.move_to_end(found)
        before = bucket.size
        bucket.add(measurement, options)
        held += bucket.size - before
        if bucket.count >= MAX_MEASUREMENTS or bucket.size >= MAX_BUCKET_BYTES:
            held -= bucket.size
            yield close(found)
        while held > open_bytes and open_buckets:
            oldest = next(iter(open_buckets))
            held -= open_buckets[oldest].size
            yield close(oldest)
    for bucket in open_buckets.values():
        yield bucket.document(options)


@dataclass
class Unpacked:
    measurements: list[Document]
    compressed: int  # measurements held in compressed columns, not read


def is_compressed(bucket: Document) -> bool:
    return any(
        isinstance(v, bson.Binary) and v.subtype == COMPRESSED_SUBTYPE for v in (bucket.get("data") or {}).values()
    )


def held(bucket: Document) -> int:
    """How many measurements a bucket holds, without its options: ``control.count`` (compressed buckets),
    else its longest column."""
    count = (bucket.get("control") or {}).get("count")
    if isinstance(count, int):
        return count
    return max((len(column) for column in (bucket.get("data") or {}).values() if isinstance(column, dict)), default=0)


def unpack(bucket: Document, options: TimeSeriesOptions) -> Unpacked:
    """The measurements of one bucket: all of a version 1 bucket; of a compressed bucket, none, with their
    number (``control.count``, else the time column's length unknown: 0)."""
    data = bucket.get("data") or {}
    if is_compressed(bucket):
        count = (bucket.get("control") or {}).get("count")
        return Unpacked([], int(count) if isinstance(count, int) else 0)
    times = data.get(options.time_field) or {}
    found = []
    for key in times:
        measurement: Document = {}
        for name, column in data.items():
            if key in column:
                measurement[name] = column[key]
            if name == options.time_field and options.meta_field and "meta" in bucket:
                measurement[options.meta_field] = bucket["meta"]
        found.append(measurement)
    return Unpacked(found, 0)


BUCKETS_PREFIX = "system.buckets."
# Series (meta values) counted exactly up to this many; past it the count says "at least".
MAX_SERIES_COUNTED = 100_000


@dataclass
class BucketFigures:
    """What a pass over a time-series collection's buckets counts, without decoding a column."""

    buckets: int = 0
    compressed_buckets: int = 0
    measurements: int = 0
    compressed_measurements: int = 0
    bytes: int = 0
    series: int = 0
    per_bucket: list[int] = field(default_factory=list)
    first: datetime.datetime | None = None
    last: datetime.datetime | None = None

    def to_dict(self, options: TimeSeriesOptions | None) -> dict[str, Any]:
        sizes = sorted(self.per_bucket)
        return {
            "options": options.create_options() if options else None,
            "expire_after_seconds": options.expire_after_seconds if options else None,
            "buckets": self.buckets,
            "compressed_buckets": self.compressed_buckets,
            "measurements": self.measurements,
            "measurements_not_read": self.compressed_measurements if options else self.measurements,
            "bucket_bytes": self.bytes,
            "series": self.series,
            "measurements_per_bucket_p50": sizes[len(sizes) // 2] if sizes else None,
            "measurements_per_bucket_max": sizes[-1] if sizes else None,
            "first": self.first.isoformat() if self.first else None,
            "last": self.last.isoformat() if self.last else None,
        }

    def notes(self, name: str, options: TimeSeriesOptions | None) -> list[str]:
        found = [
            f"time-series collection: {self.measurements:,} measurements in {self.buckets:,} buckets of "
            f"{BUCKETS_PREFIX}{name} ({self.bytes:,} B)"
        ]
        if options is None:
            found.append(
                f"no {name}.metadata.json gives its timeseries options (timeField, metaField): its buckets cannot "
                "be read as measurements, so none was analysed"
            )
        elif self.compressed_measurements:
            found.append(
                f"{self.compressed_measurements:,} measurements of {self.compressed_buckets:,} compressed buckets "
                "(BSONColumn, version 2 and 3: every bucket a 5.2+ server closed, every bucket from 8.0) are counted "
                "but not analysed: mongopat does not decode the server's column encoding; analyse the collection "
                "on the server (--uri) to read them all"
            )
        return found


def bucket_figures(path: Any, buckets: Iterable[tuple[int, bytes]], options: TimeSeriesOptions | None) -> BucketFigures:
    figures = BucketFigures()
    series: set[bytes] = set()
    for _offset, raw in buckets:
        bucket = bson.decode(raw)
        figures.buckets += 1
        figures.bytes += len(raw)
        control = bucket.get("control") or {}
        count = held(bucket)
        if is_compressed(bucket):
            figures.compressed_buckets += 1
            figures.compressed_measurements += count
        figures.measurements += count
        figures.per_bucket.append(count)
        if len(series) < MAX_SERIES_COUNTED:
            series.add(_meta_key(bucket.get("meta")))
        for bound, low in ((control.get("min") or {}, True), (control.get("max") or {}, False)):
            when = bound.get(options.time_field) if options else None
            if isinstance(when, datetime.datetime):
                if low and (figures.first is None or when < figures.first):
                    figures.first = when
                if not low and (figures.last is None or when > figures.last):
                    figures.last = when
    figures.series = len(series)
    return figures
