"""MP101 bucket: many small documents arriving quickly, keyed by a series and a time."""

from __future__ import annotations

import math
from typing import Any

from mongopat.analysis.series import SERIES_NAME, WINDOWS
from mongopat.predictions import Figures, Prediction, prediction
from mongopat.rules import register
from mongopat.rules.base import CollectionEvidence, Recommendation, Rule
from mongopat.timeseries.limits import Verdict, shown

SERIES_TYPES = ("string", "objectId", "int", "long")


@register
class BucketRule(Rule):
    """Many small documents written at a high rate, each a measurement of one series at one time
    (sensor readings, ticks, events), cost an index entry and a document header apiece. Grouping one
    series' documents of a time window into one bucket document divides the document and index count by
    the bucket size, and range reads by series and time touch a few buckets instead of thousands of
    documents. What a bucket would hold is counted from the data (``series_cadence``: readings per series
    per window), never inferred from a rate alone: 10,000 observations of 8,417 stations hold about one
    reading per station in any window, and bucketing them would only add a header to each.

    Thresholds: ``min_inserts_per_sec`` (measured from ``_id``/date fields, bulk loads excepted, or
    declared), ``min_documents``, ``max_document_bytes`` (median size past which bucketing is refused),
    ``max_bucket_bytes`` (a bucket's size, far below the 16 MiB limit: buckets are rewritten on every push),
    ``min_documents_per_bucket`` (the readings a bucket must hold, counted in today's data, for a migration
    to be offered; where only the declared workload reaches it, the finding says from when it would pay,
    without a migration), ``target_bucket_documents`` (the window is the one whose counted buckets come
    nearest this size). Measurements are the numeric fields that vary, nested ones included; constants
    and placeholder values (``numbers.sentinels`` of the analysis) are never measured. Collections already
    bucketed are left to MP100 and MP207."""

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
        time_field, series, queried = series_keys(collection)
        if time_field is None or series is None:
            return []
        series_count = max(1, collection.cardinality(series) or 1)
        cadence = collection.series_cadence(series, time_field) or spread_evenly(collection, series, time_field)
        if cadence is None:
            return []  # neither counted nor a span to spread the documents over: nothing to size a bucket by
        counted = Counted(collection, cadence)
        max_bucket_size = int(min(1000, capacity))
        window = counted.window(self.threshold("target_bucket_documents"), max_bucket_size)
        per_bucket = counted.readings(window)
        minimum = self.threshold("min_documents_per_bucket")
        declared_per_bucket = declared / series_count * window if declared else None
        evidence = {
            "documents": collection.count,
            "median_document_bytes": median,
            "inserts_per_sec": round(rate, 3),
            "inserts_per_sec_source": "declared" if declared is not None else f"measured from {clock}",
            "time_field": time_field,
            "series_key": series,
            "series": series_count,
            "inserts_per_sec_per_series": round(rate / series_count, 4),
            "window_seconds": window,
            "readings_per_bucket": per_bucket,
            "readings_per_bucket_basis": counted.basis,
            "readings_per_series_per_hour": counted.readings(3600),
            "readings_per_bucket_declared": round(declared_per_bucket, 1) if declared_per_bucket else None,
            "max_bucket_documents": max_bucket_size,
            "range_query_declared": queried,
        }
        verdict = self._time_series_verdict(collection)
        if verdict is not None and verdict.fits:
            return []  # a time-series collection fits: MP113 recommends it, not buckets made by hand
        if per_bucket is None or per_bucket < minimum:
            return self._not_yet(collection, evidence, counted, declared, series_count, minimum)
        measurements = collection.measurements({"_id", time_field, series})
        sentinels = {
            path: [s["value"] for s in collection.sentinels(path) if not s["constant"]] for path in measurements
        }
        sentinels = {path: values for path, values in sentinels.items() if values}
        forecast = counted.prediction(window, max_bucket_size, series, measurements)
        after = forecast["collections"][0]["after"]
        evidence.update(
            {
                "documents_per_bucket": per_bucket,
                "bucket_bytes_estimate": after.get("median_document_bytes"),
                "estimated_documents_after": after.get("documents"),
                "measurements": measurements,
                "sentinels": sentinels,
            }
        )
        if declared_per_bucket and not 0.5 <= declared_per_bucket / per_bucket <= 2:
            forecast["notes"].append(
                f"the declared {declared:,g} inserts/s across {series_count:,} series would put about "
                f"{declared_per_bucket:,.0f} readings in a {_human(window)} bucket; today's data holds "
                f"{per_bucket:,g}: the documents and bytes predicted are today's data, the reads' figures the "
                "declared workload's"
            )
        before = forecast["collections"][0]["before"]
        if (after.get("data_bytes") or 0) >= (before.get("data_bytes") or 0):
            return self._not_yet(collection, evidence, counted, declared, series_count, minimum, larger=True)
        confidence = 0.55 + (0.2 if queried else 0) + (0.1 if measured and measured >= rate * 0.5 else 0)
        confidence += 0.1 if SERIES_NAME.search(series) else 0
        severity = "warning" if rate >= 10 or collection.count >= 1_000_000 else "info"
        rationale = (
            f"{collection.name} receives about {rate:,.2f} inserts/s ({evidence['inserts_per_sec_source']}) of "
            f"{median} B documents across {series_count:,} series ({series}), timestamped by {time_field}. "
            f"Counted in the data, one series holds {per_bucket:,g} readings per {_human(window)} ({counted.basis}):"
            f" bucketing by that window would cut {collection.count:,} documents to about {after['documents']:,} "
            f"and {before['data_bytes']:,} data bytes to about {after['data_bytes']:,}, with the index shrinking "
            "in proportion."
        )
        if sentinels:
            rationale += (
                " Placeholder values ("
                + ", ".join(f"{v} in {p}" for p, vs in sentinels.items() for v in vs)
                + ") stay in the readings but are kept out of each bucket's min and max."
            )
        if verdict is not None:
            evidence["time_series_collection_refused"] = [b.describe() for b in verdict.blockers]
            rationale += (
                " A MongoDB time-series collection, the documented home of time series since 5.0, does not fit: "
                + "; ".join(b.describe() for b in verdict.blockers)
                + f" (judged for MongoDB {shown(verdict.version)})."
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
                    **({"sentinels": sentinels} if sentinels else {}),
                    "max_bucket_size": max_bucket_size,
                },
                prediction=forecast,
            )
        ]

    def _time_series_verdict(self, collection: CollectionEvidence) -> Verdict | None:
        """Whether a time-series collection fits the collection's readings and workload (MP113's judgement, its
        thresholds included); None when its buckets would hold too few readings to say."""
        from mongopat.rules.patterns.time_series import TimeSeriesRule, choose

        settings = TimeSeriesRule(self.context).settings
        access = self.context.access
        choice = choose(collection, access.mongodb_version if access else None, settings["max_update_share"])
        if choice is None:
            return None
        # Buckets that today's data fills, or the declared inserts would (MP113 then says from when).
        filled = max(choice.chosen_per_bucket, choice.chosen_declared_per_bucket or 0)
        return choice.verdict if filled >= settings["min_measurements_per_bucket"] else None

    def _not_yet(
        self,
        collection: CollectionEvidence,
        evidence: dict[str, Any],
        counted: Counted,
        declared: float | None,
        series_count: int,
        minimum: float,
        larger: bool = False,
    ) -> list[Recommendation]:
        """Today's data would not fill buckets: no migration. Where the declared workload would, say from
        when bucketing pays; else nothing."""
        if not declared:
            return []
        hourly = declared / series_count * 3600
        week = counted.readings(WINDOWS[-1])
        if hourly * WINDOWS[-1] / 3600 < minimum:
            return []  # even the declared workload would not fill a week's bucket
        today = (
            f"today's data holds {counted.readings(3600) or 0:,g} readings per {evidence['series_key']} per hour "
            f"and {week or 0:,g} per week ({counted.basis})"
        )
        reason = "bucketing them would make the collection larger" if larger else "buckets would hold too few"
        rationale = (
            f"The declared {declared:,g} inserts/s across {series_count:,} series ({evidence['series_key']}) would "
            f"be about {hourly:,.0f} readings per series per hour, but {today}: {reason}, so no migration is "
            f"offered. Bucketing pays from about {minimum:,.0f} readings per series per bucket window; plan it "
            f"once the data holds that many (about {minimum:,.0f} per {evidence['series_key']} per hour for "
            "hourly buckets), and run recommend again."
        )
        from mongopat.rules.patterns.time_series import TimeSeriesRule, choose

        access = self.context.access
        share = TimeSeriesRule(self.context).settings["max_update_share"]
        choice = choose(collection, access.mongodb_version if access else None, share)
        if choice is not None and choice.verdict.fits:
            rationale += (
                " By then the form is a time-series collection (timeField "
                f"{choice.options.time_field}, metaField {choice.options.meta_field or 'none'}): nothing declared "
                "stands in its way, and the server buckets the readings itself."
            )
        return [
            self.finding(
                collection.name,
                [evidence["series_key"], evidence["time_field"]],
                "info",
                0.5,
                {
                    **{k: v for k, v in evidence.items() if k not in _WINDOW_FIGURES},
                    "readings_per_series_per_hour_declared": round(hourly, 1),
                    "readings_per_series_per_week": week,
                },
                rationale,
                title="Bucketing would pay only at the declared rate, not on today's data",
            )
        ]


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


# Figures of the window a migration would use: a finding without a migration has none.
_WINDOW_FIGURES = (
    "window_seconds", "readings_per_bucket", "readings_per_bucket_declared", "max_bucket_documents",
)  # fmt: skip


def spread_evenly(collection: CollectionEvidence, series: str, time_field: str) -> dict[str, Any] | None:
    """Readings per series and window where the analysis did not count them (the series key's values
    hardly recurred in the first documents): each series' documents spread evenly over the time field's
    span, never more than the documents a series has in all the data. An upper bound for series that
    report in bursts, exact for a steady cadence."""
    profile = collection.profile(time_field)
    documents = collection.documents_read or collection.count
    series_count = max(1, collection.cardinality(series) or 1)
    if not profile or not documents:
        return None
    span = max(float(profile.get("span_seconds") or 0), 1.0)
    per_series = documents / series_count
    windows = []
    for seconds in WINDOWS:
        readings = max(1.0, min(per_series, per_series * seconds / span))
        windows.append({"seconds": seconds, "readings_per_group": round(readings, 3), "p50": readings, "p95": readings})
    return {
        "documents": documents,
        "windows": windows,
        "basis": f"{per_series:,.2f} documents per {series} in all the data, spread evenly over the "
        f"{span / 86400:,.1f} days of {time_field} (its values hardly recur in the first documents read, so "
        "readings per window were not counted)",
    }


class Counted:
    """Readings per series per window as the analysis counted them (``series_cadence``), scaled to the
    collection when the analysis read a sample."""

    def __init__(self, collection: CollectionEvidence, cadence: dict[str, Any]) -> None:
        self.collection = collection
        self.documents = cadence["documents"]
        self.windows = {w["seconds"]: w for w in cadence["windows"]}
        read = collection.documents_read or self.documents
        self.scale = max(1.0, collection.count / read) if read else 1.0
        self.sampled = self.scale > 1.0
        self.basis = cadence.get("basis") or (
            f"counted over all {self.documents:,} documents"
            if not self.sampled
            else f"counted in a sample of {read:,} of {collection.count:,} documents and scaled"
        )

    def readings(self, window: int) -> float | None:
        """Readings per (series, window) group; None when a sample cannot tell (groups seen about once)."""
        found = self.windows.get(window)
        if not found or not found.get("readings_per_group"):
            return None
        per_group = float(found["readings_per_group"])
        if not self.sampled:
            return round(per_group, 2)
        # In a sample, a group seen once may hold one reading or 1/f of them: only groups seen
        # repeatedly scale with the sampling fraction.
        return round(per_group * self.scale, 2) if per_group >= 2 else None

    def window(self, target: float, max_bucket_size: int) -> int:
        """The window whose buckets come nearest ``target`` readings, among those whose 95th-percentile
        bucket fits ``max_bucket_size`` (else the smallest window)."""
        options = []
        for seconds in WINDOWS:
            readings = self.readings(seconds)
            if readings is None:
                continue
            p95 = (self.windows[seconds].get("p95") or readings) * (self.scale if self.sampled else 1)
            options.append((p95 > max_bucket_size, abs(math.log(max(readings, 1e-9) / target)), seconds))
        return min(options)[2] if options else WINDOWS[0]

    def prediction(self, window: int, max_bucket_size: int, series: str, measurements: list[str]) -> Prediction:
        """Documents and bytes before and after bucketing by ``window``, from the counted groups."""
        size = self.collection.size
        count = self.collection.count
        mean = float(size.get("mean") or size.get("p50") or 0)
        found = self.windows[window]
        per_group = self.readings(window) or 1.0
        groups = count / per_group
        p50 = (found.get("p50") or per_group) * (self.scale if self.sampled else 1)
        p95 = (found.get("p95") or per_group) * (self.scale if self.sampled else 1)
        overflow = max(1.0, per_group / max_bucket_size)
        buckets = max(1, round(groups * overflow))
        length = ((self.collection.field(series) or {}).get("strings") or {}).get("mean_length")
        series_bytes = _field_bytes(series, self.collection.dominant_type(series), length)
        # A reading keeps its fields but the series (moved to the bucket) and gains an array index key.
        # The array key of a reading: its index as a string, a type byte and a terminator.
        reading = max(8.0, mean - series_bytes + 2 + len(str(max(1, min(round(per_group), max_bucket_size) - 1))))
        header = _bucket_header_bytes(series, series_bytes, measurements)
        data_after = round(count * reading + buckets * header)
        before: Figures = {
            "documents": count,
            "data_bytes": round(count * mean),
            "median_document_bytes": size.get("p50"),
            "p95_document_bytes": size.get("p95"),
        }
        after: Figures = {
            "documents": buckets,
            "data_bytes": data_after,
            "median_document_bytes": round(header + min(p50, max_bucket_size) * reading),
            "p95_document_bytes": round(header + min(p95, max_bucket_size) * reading),
        }
        basis = (
            f"readings per {series} per {_human(window)} {self.basis} ({per_group:,g} on average, p50 {p50:,g}, "
            f"p95 {p95:,g}); a reading keeps its {mean:,.0f} B less its {series} ({series_bytes} B) plus an array "
            f"key; a bucket adds a header of about {header} B (_id, {series}, start, end, count, min, max)"
        )
        return prediction([{"collection": self.collection.name, "before": before, "after": after, "basis": basis}])


def _field_bytes(name: str, kind: str | None, length: float | None) -> int:
    """A top-level field's BSON bytes: type byte, name, value (a string's by its mean length measured)."""
    string = 4 + round(length if length is not None else 12) + 1
    value = {"int": 4, "long": 8, "double": 8, "objectId": 12, "date": 8}.get(kind or "", string)
    return 1 + len(name) + 1 + value


def _bucket_header_bytes(series: str, series_bytes: int, measurements: list[str]) -> int:
    """The fields a bucket holds beside its readings, as the bucket step writes them."""
    value = series_bytes - len(series) - 2
    identity = 4 + (3 + value) + (3 + 8) + (3 + 4) + 1  # _id: {s, w, n}
    fields = 5 + (1 + 4 + identity) + series_bytes + 2 * (1 + 6 + 8) + (1 + 6 + 4) + (1 + 9 + 4 + 1)
    bounds = sum(2 * (1 + len(name.rsplit(".", 1)[-1]) + 1 + 8 + 5 * name.count(".")) for name in measurements)
    return fields + 2 * (1 + 4 + 5) + bounds


def series_keys(collection: CollectionEvidence) -> tuple[str | None, str | None, bool]:
    """The time field and series key of readings: those a declared read filters by range and equality, else
    the first date field and the top-level field most like a series key; and whether a read declared them."""
    dates = collection.date_fields()
    queried_time = queried_series = None
    if collection.access:
        for query in collection.access.queries:
            ranges = [f for f in query.filters_with(("range", "gt", "gte", "lt", "lte")) if f in dates or not dates]
            # A field no document holds (a typo the access check warns of) keys no series.
            equals = [f for f in query.filters_with(("eq", "in")) if collection.field(f) is not None]
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
        top = (collection.field(path) or {}).get("cardinality", {}).get("top") or []
        values = (collection.field(path) or {}).get("cardinality", {}).get("values") or 0
        if top and values and top[0]["count"] >= 0.9 * values and not SERIES_NAME.search(path):
            continue  # one value holds nearly every document: a category (a report type), not a series
        candidates.append((bool(SERIES_NAME.search(path)), -distinct, path))
    series = max(candidates)[2] if candidates else None
    return time_field, series, False
