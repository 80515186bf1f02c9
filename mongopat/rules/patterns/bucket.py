"""MP101 bucket: many small documents arriving quickly, keyed by a series and a time."""

from __future__ import annotations

import math
import re

from mongopat.rules import register
from mongopat.rules.base import CollectionEvidence, Recommendation, Rule

NICE_WINDOWS = (60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 7 * 86400)
SERIES_NAME = re.compile(r"(sensor|device|meter|station|source|series|symbol|host|account|user|machine)", re.I)
SERIES_TYPES = ("string", "objectId", "int", "long")


def window_for(per_series_rate: float, target: float) -> int:
    """The nice window (a minute to a week) whose bucket size is closest to ``target`` documents, in ratio."""
    ideal = target / per_series_rate if per_series_rate > 0 else NICE_WINDOWS[-1]
    return min(NICE_WINDOWS, key=lambda window: abs(math.log(window / ideal)))


@register
class BucketRule(Rule):
    """Many small documents written at a high rate, each a measurement of one series at one time
    (sensor readings, ticks, events), cost an index entry and a document header apiece. Grouping one
    series' documents of a time window into one bucket document divides the document and index count by
    the bucket size, and range reads by series and time touch a few buckets instead of thousands of
    documents. Documents of a few KiB gain as much as tiny ones: what must stay bounded is the bucket's
    size in bytes. Thresholds: ``max_bucket_bytes`` (a bucket's size, far below the 16 MiB limit: buckets
    are rewritten on every push), ``min_documents_per_bucket`` (refused when documents are so large that
    fewer would fit in ``max_bucket_bytes``), ``max_document_bytes`` (median size past which bucketing is
    refused outright), ``min_inserts_per_sec`` (measured from ``_id``/date fields, bulk loads excepted, or
    declared), ``target_bucket_documents`` (the window is chosen to fill buckets to about this many
    documents, fewer when their bytes would pass ``max_bucket_bytes``). Collections already bucketed are
    left to MP100 and MP207."""

    code = "MP101"
    name = "bucket"
    title = "Group time-series documents into buckets"
    defaults = {
        "max_bucket_bytes": 1024 * 1024,
        "min_documents_per_bucket": 10,
        "max_document_bytes": 16 * 1024,
        "min_inserts_per_sec": 1.0,
        "target_bucket_documents": 200,
        "min_documents": 1000,
    }

    def check(self, collection: CollectionEvidence) -> list[Recommendation]:
        measured, clock = collection.measured_insert_rate()
        declared = collection.declared_inserts()
        rate = declared if declared is not None else measured
        median = collection.size.get("p50")
        if rate is None or rate < self.threshold("min_inserts_per_sec") or median is None:
            return []
        if median > self.threshold("max_document_bytes") or max(collection.count, 0) < self.threshold("min_documents"):
            return []
        if collection.in_place("bucket"):
            return []  # bucketed already: MP100 names it, MP207 checks its size
        if any(_embeds_documents(f) for f in collection.top_level()):
            return []  # documents that embed lists of entities (order lines) are records, not readings
        # The bucket's readings are bounded by bytes: its largest documents (p95) times the readings it holds.
        large = collection.size.get("p95") or median
        capacity = int(self.threshold("max_bucket_bytes") // max(large, 1))
        if capacity < self.threshold("min_documents_per_bucket"):
            return []  # documents too large: a bucket would hold only a few
        time_field, series, queried = self._keys(collection)
        if time_field is None or series is None:
            return []
        series_count = max(1, collection.cardinality(series) or 1)
        per_series = rate / series_count
        target = min(self.threshold("target_bucket_documents"), capacity)
        window = window_for(per_series, target)
        per_bucket = max(1.0, per_series * window)
        max_bucket_size = int(min(1000, capacity))
        numeric = ("double", "int", "long", "decimal")
        measurements = [
            f["path"]
            for f in collection.top_level()
            if f["path"] not in ("_id", time_field, series) and collection.dominant_type(f["path"]) in numeric
        ]
        updates = collection.declared_updates()
        timeseries_fits = not updates
        granularity = "seconds" if per_series >= 1 / 60 else "minutes" if per_series >= 1 / 3600 else "hours"
        confidence = 0.55 + (0.2 if queried else 0) + (0.1 if measured and measured >= rate * 0.5 else 0)
        confidence += 0.1 if SERIES_NAME.search(series) else 0
        severity = "warning" if rate >= 10 or collection.count >= 1_000_000 else "info"
        evidence = {
            "documents": collection.count,
            "median_document_bytes": median,
            "inserts_per_sec": round(rate, 3),
            "inserts_per_sec_source": "declared" if declared is not None else f"measured from {clock}",
            "time_field": time_field,
            "series_key": series,
            "series": series_count,
            "inserts_per_sec_per_series": round(per_series, 4),
            "window_seconds": window,
            "documents_per_bucket": round(per_bucket, 1),
            "bucket_bytes_estimate": round(min(per_bucket, max_bucket_size) * median),
            "max_bucket_documents": max_bucket_size,
            "estimated_documents_after": max(1, round(collection.count / per_bucket)),
            "range_query_declared": queried,
        }
        rationale = (
            f"{collection.name} receives about {rate:,.2f} inserts/s of {median} B documents across {series_count:,} "
            f"series ({series}), timestamped by {time_field}. Bucketing one series per {_human(window)} would hold "
            f"about {per_bucket:,.0f} readings per document and cut {collection.count:,} documents to about "
            f"{evidence['estimated_documents_after']:,}, with the index shrinking in proportion."
        )
        if timeseries_fits:
            rationale += (
                f" No updates are declared, so a MongoDB time-series collection (timeField '{time_field}', "
                f"metaField '{series}', granularity '{granularity}') does this bucketing for you and may fit better."
            )
        return [
            self.finding(
                collection.name,
                [series, time_field, *measurements],
                severity,
                confidence,
                evidence,
                rationale,
                tradeoffs=[
                    "Writes become updates that push into the current bucket (upsert by series and window).",
                    "Per-reading queries and deletes must reach inside the bucket array.",
                    "Aggregates (count, min, max) kept on the bucket must be maintained on every push.",
                ],
                migration={
                    "step": "bucket",
                    "collection": collection.name,
                    "series_key": series,
                    "time_field": time_field,
                    "window_seconds": window,
                    "measurements": measurements,
                    "max_bucket_size": max_bucket_size,
                    "alternative": {
                        "timeseries": {"timeField": time_field, "metaField": series, "granularity": granularity}
                    }
                    if timeseries_fits
                    else None,
                },
            )
        ]

    def _keys(self, collection: CollectionEvidence) -> tuple[str | None, str | None, bool]:
        dates = collection.date_fields()
        queried_time = queried_series = None
        if collection.access:
            for query in collection.access.queries:
                ranges = [f for f in query.filters_with(("range", "gt", "gte", "lt", "lte")) if f in dates or not dates]
                equals = query.filters_with(("eq", "in"))
                if ranges and equals:
                    queried_time, queried_series = ranges[0], equals[0]
                    break
        if queried_time and queried_series:
            return queried_time, queried_series, True
        time_field = dates[0] if dates else None
        candidates = []
        for field in collection.top_level():
            path = field["path"]
            if path in ("_id", time_field) or collection.dominant_type(path) not in SERIES_TYPES:
                continue
            distinct = collection.cardinality(path)
            if distinct is None or distinct < 2 or field["presence"] < 0.99:
                continue
            if distinct * 10 > max(collection.documents_read, 1):
                continue  # fewer than ten documents a series: not a series key
            candidates.append((bool(SERIES_NAME.search(path)), -distinct, path))
        series = max(candidates)[2] if candidates else None
        return time_field, series, False


def _embeds_documents(field: dict) -> bool:
    array = field.get("array")
    if not array or (array.get("p50") or 0) <= 1 or not array.get("element_types"):
        return False
    return array["element_types"][0]["type"] == "object"


def _human(seconds: int) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}" if count == 1 else f"{count} {unit}s"
    return f"{seconds} seconds"
