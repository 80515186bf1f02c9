"""MP113 time_series_collection: readings a MongoDB time-series collection (5.0+) stores better than
documents of their own or buckets made by hand."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from mongopat.analysis.series import WINDOWS
from mongopat.predictions import Prediction, prediction
from mongopat.rules import register
from mongopat.rules.base import CollectionEvidence, Recommendation, Rule
from mongopat.rules.patterns.bucket import Counted, series_keys, spread_evenly
from mongopat.timeseries.limits import Verdict, Workload, judge, parse_version, shown
from mongopat.timeseries.options import (
    MAX_BUCKET_BYTES,
    MAX_MEASUREMENTS,
    TimeSeriesOptions,
    custom_span_for,
    granularity_for,
)

# A time field every document must hold as a date: a time-series collection refuses a document without one.
MIN_DATE_SHARE = 0.999


@dataclass
class TimeSeriesChoice:
    """The time-series collection a collection's readings would go to, and whether it fits."""

    options: TimeSeriesOptions
    interval_seconds: float  # between two readings of one series, counted in today's data
    interval_basis: str
    series: int
    per_bucket: float  # measurements a bucket would hold, today's data
    custom: TimeSeriesOptions | None  # a custom span (6.3+) that fills buckets better
    custom_per_bucket: float | None
    verdict: Verdict
    queried: bool
    # From the declared inserts, where the access file gives them: the pace the collection will live with.
    declared_interval_seconds: float | None = None
    declared_per_bucket: float | None = None
    custom_declared_per_bucket: float | None = None

    @property
    def chosen(self) -> TimeSeriesOptions:
        """The custom span where the target version has it, else the granularity."""
        return self.custom if self.custom is not None and self.verdict.version >= (6, 3) else self.options

    @property
    def chosen_per_bucket(self) -> float:
        return self.custom_per_bucket if self.chosen is self.custom and self.custom_per_bucket else self.per_bucket

    @property
    def chosen_declared_per_bucket(self) -> float | None:
        if self.chosen is self.custom and self.custom_declared_per_bucket:
            return self.custom_declared_per_bucket
        return self.declared_per_bucket

    @property
    def pace_seconds(self) -> float:
        """The time between two readings of a series the options are chosen for: the declared pace where
        there is one (the collection lives with it from now on), else the counted one."""
        return self.declared_interval_seconds or self.interval_seconds


def choose(collection: CollectionEvidence, mongodb_version: str | None, update_share: float) -> TimeSeriesChoice | None:
    """The time-series collection for ``collection``'s readings (None when it holds no time series: no date
    field, or nothing to size buckets by), with the limits its declared workload meets."""
    time_field, series, queried = series_keys(collection)
    if time_field == "_id":
        # The date is the document's _id: a reading keeps its _id apart from its time (the timeField), so
        # the date would first have to be copied into a field of its own, which no step here does.
        time_field = next((f for f in collection.date_fields() if f != "_id"), None)
    if time_field is None:
        return None
    profile = collection.profile(time_field)
    span = float((profile or {}).get("span_seconds") or 0)
    if span <= 0 or not collection.count:
        return None
    series_count = max(1, collection.cardinality(series) or 1) if series else 1
    per_series = collection.count / series_count
    interval, basis = span / max(per_series, 1), f"{per_series:,.1f} readings per series over {span / 86400:,.1f} days"
    if series:
        cadence = collection.series_cadence(series, time_field) or spread_evenly(collection, series, time_field)
        counted = Counted(collection, cadence) if cadence else None
        for window in WINDOWS if counted else ():
            readings = counted.readings(window) if counted else None
            if readings and readings >= 2:  # the finest window in which a series reads twice: its own pace
                interval = window / readings
                basis = f"{readings:,g} readings per {series} per {_human(window)} ({counted.basis})"
                break
    median = int(collection.size.get("p50") or 1)
    by_size = max(1, MAX_BUCKET_BYTES // max(median, 1))

    def filled(options: TimeSeriesOptions) -> float:
        # A series' buckets: one per span its readings cover (the first aligned to the rounding), more where
        # the count or bytes fill one sooner; averaged over its readings.
        full = min(MAX_MEASUREMENTS, by_size, max(1.0, options.span_seconds / interval))
        buckets = max(math.ceil(per_series / full), math.ceil(span / options.span_seconds + 1e-9))
        return round(per_series / min(buckets, max(per_series, 1.0)), 1)  # a bucket holds one reading at least

    declared = collection.declared_inserts()
    declared_interval = series_count / declared if declared else None
    pace = declared_interval or interval

    def filled_at(options: TimeSeriesOptions, seconds: float) -> float:
        # Readings arriving at a steady pace: a bucket fills its span, or its count or bytes first.
        return round(min(MAX_MEASUREMENTS, by_size, max(1.0, options.span_seconds / seconds)), 1)

    options = TimeSeriesOptions(time_field, series, granularity_for(pace))
    span_seconds = custom_span_for(pace)
    custom = TimeSeriesOptions(time_field, series, None, span_seconds) if span_seconds else None
    version = parse_version(mongodb_version) if mongodb_version else None
    workload = _workload(collection)
    verdict = judge(workload, version, "the access file's mongodb_version", update_share)
    field = collection.field(time_field) or {}
    dates = sum(t["share"] for t in field.get("types", []) if t["type"] == "date") * float(field.get("presence") or 0)
    if dates < MIN_DATE_SHARE:
        from mongopat.timeseries.limits import Blocker

        verdict.blockers.append(
            Blocker(
                f"{1 - dates:.1%} of the documents hold no date in {time_field}, which a time-series collection refuses"
            )
        )
    return TimeSeriesChoice(
        options, interval, basis, series_count, filled(options), custom, filled(custom) if custom else None, verdict,
        queried, declared_interval,
        filled_at(options, declared_interval) if declared_interval else None,
        filled_at(custom, declared_interval) if custom and declared_interval else None,
    )  # fmt: skip


def _workload(collection: CollectionEvidence) -> Workload:
    access = collection.access
    writes = access.writes if access else None
    indexes = collection.data.get("indexes") or []
    return Workload(
        inserts_per_sec=writes.inserts_per_sec if writes else None,
        updates_per_sec=writes.updates_per_sec if writes else None,
        deletes_per_sec=writes.deletes_per_sec if writes else None,
        change_streams=bool(access and access.change_streams),
        largest_document_bytes=collection.size.get("max"),
        unique_indexes=tuple(i["name"] for i in indexes if i.get("unique") and i["name"] != "_id_"),
        text_indexes=tuple(i["name"] for i in indexes if any(d == "text" for _k, d in i.get("key") or [])),
    )


def _forecast(
    target: str,
    collection: CollectionEvidence,
    readings: dict[str, Any],
    readings_basis: str,
    buckets: int,
    upper: int,
    buckets_basis: str,
) -> Prediction:
    """What moving into a time-series collection predicts: the readings as the application reads them back,
    and the buckets behind them (a count, and their bytes as an upper bound)."""
    scaled = {"collection": collection.name, "documents": collection.count}
    return prediction(
        [
            {
                "collection": target,
                "before": {"documents": 0, "data_bytes": 0},
                "after": readings,  # type: ignore[typeddict-item]
                "basis": readings_basis,
                "scaled_by": {**scaled, "linear": True},  # type: ignore[typeddict-item]
            },
            {
                "collection": f"system.buckets.{target}",
                "before": {"documents": 0, "data_bytes": 0},
                "after": {"documents": buckets, "data_bytes": upper},
                "at_most": ["data_bytes"],
                "scaled_by": {**scaled, "linear": False},  # type: ignore[typeddict-item]
                "basis": buckets_basis,
            },
        ]
    )


def _human(seconds: float) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            count = seconds / size
            return f"1 {unit}" if round(count, 2) == 1 else f"{count:,.3g} {unit}s"
    return "1 second" if round(seconds, 2) == 1 else f"{seconds:,.3g} seconds"


@register
class TimeSeriesRule(Rule):
    """Since MongoDB 5.0 a time-series collection is the documented home of time-series data: the server
    groups each series' readings into buckets itself and compresses them by column (5.2+), so an
    application inserts and reads plain readings. It is recommended where the documents are readings (a
    date in every document, a series key or one series), a bucket would hold at least
    ``min_measurements_per_bucket`` of today's readings, and the declared workload meets none of its limits
    on the target MongoDB version (the access file's ``mongodb_version``; without it 5.0): updates or
    deletes of readings before 7.0, updates more than ``max_update_share`` of the inserts on any version,
    change streams, unique or text indexes, measurements over 4 MB. Granularity comes from the time between
    two readings of a series, counted in the data; a custom bucket span (6.3+) where it fills buckets at
    least twice as well. Collections bucketed by hand already, and documents embedding lists of entities,
    are left alone; where the workload meets a limit, MP101 explains which and recommends buckets made by
    hand when they pay."""

    code = "MP113"
    name = "time_series_collection"
    title = "Store the readings in a time-series collection"
    defaults = {"min_documents": 1000, "min_measurements_per_bucket": 10, "max_update_share": 0.1}

    def check(self, collection: CollectionEvidence) -> list[Recommendation]:
        if collection.data.get("timeseries"):
            return []
        made = collection.in_place("bucket")
        if made:
            return self._unwound(collection, made[0]["evidence"])
        if collection.count < self.threshold("min_documents"):
            return []
        if any(_embeds(f) for f in collection.top_level()):
            return []
        access = self.context.access
        choice = choose(collection, access.mongodb_version if access else None, self.threshold("max_update_share"))
        if choice is None or not choice.verdict.fits:
            return []
        per_bucket = choice.chosen_per_bucket
        minimum = self.threshold("min_measurements_per_bucket")
        if per_bucket < minimum:
            declared = choice.chosen_declared_per_bucket
            return [self._not_yet(collection, choice)] if declared and declared >= minimum else []
        options = choice.chosen
        target = f"{collection.name}_ts"
        size = collection.size
        mean = float(size.get("mean") or size.get("p50") or 0)
        buckets = max(choice.series, round(collection.count / per_bucket))
        upper = _v1_bytes(collection, options, per_bucket, buckets, mean)
        before = {
            "documents": collection.count,
            "data_bytes": round(collection.count * mean),
            "median_document_bytes": size.get("p50"),
            "p95_document_bytes": size.get("p95"),
        }
        forecast = _forecast(
            target,
            collection,
            dict(before),
            f"every reading of {collection.name}, read back through the time-series collection",
            buckets,
            upper,
            (
                f"{collection.count:,} readings at about {per_bucket:,g} a bucket ({choice.interval_basis}; a "
                f"bucket spans {_human(options.span_seconds)}, at most {MAX_MEASUREMENTS:,} readings or "
                f"{MAX_BUCKET_BYTES // 1024} KiB; readings in time order within a series: out of order, "
                "more buckets overlap, and before 6.3 each turn back in time opens one); bytes at most "
                f"{upper:,}, what the buckets take uncompressed (version 1, as a dump folder's migration "
                "writes them); a 5.2+ server compresses closed buckets by column and stores less"
            ),
        )
        evidence: dict[str, Any] = {
            "documents": collection.count,
            "time_field": options.time_field,
            "meta_field": options.meta_field,
            "series": choice.series,
            "seconds_between_readings": round(choice.interval_seconds, 1),
            "cadence_basis": choice.interval_basis,
            "seconds_between_readings_declared": _rounded(choice.declared_interval_seconds),
            "measurements_per_bucket_declared": choice.chosen_declared_per_bucket,
            "granularity": choice.options.granularity,
            "measurements_per_bucket": per_bucket,
            "measurements_per_bucket_by_granularity": choice.per_bucket,
            "bucket_max_span_seconds": choice.custom.bucket_max_span_seconds if choice.custom else None,
            "measurements_per_bucket_by_custom_span": choice.custom_per_bucket,
            "buckets_estimate": buckets,
            "uncompressed_bucket_bytes_estimate": upper,
            "mongodb_version": shown(choice.verdict.version),
            "mongodb_version_basis": choice.verdict.version_basis,
            "declared_writes": {
                key: getattr(collection.access.writes, f"{key}_per_sec") for key in ("inserts", "updates", "deletes")
            }
            if collection.access
            else None,
            "range_query_declared": choice.queried,
        }
        series_text = (
            f"{choice.series:,} series ({options.meta_field}, the metaField)" if options.meta_field else "one series"
        )
        how = (
            f"granularity '{options.granularity}'"
            if options.granularity
            else f"bucketMaxSpanSeconds and bucketRoundingSeconds {options.bucket_max_span_seconds:,} (6.3+)"
        )
        rationale = (
            f"{collection.name} holds {collection.count:,} readings of {series_text}, timestamped by "
            f"{options.time_field}: a series reads about once every {_human(choice.interval_seconds)} "
            f"({choice.interval_basis}). A time-series collection ({how}) would put about {per_bucket:,g} readings "
            f"in each bucket, about {buckets:,} buckets, compressed by column from 5.2; the application keeps "
            "inserting and reading plain readings. MongoDB recommends it over buckets made by hand since 5.0."
        )
        if choice.declared_interval_seconds:
            rationale += (
                f" At the declared {collection.declared_inserts():,g} inserts/s a series reads every "
                f"{_human(choice.declared_interval_seconds)}, about {choice.chosen_declared_per_bucket:,g} readings "
                f"a bucket: the {'span' if options.bucket_max_span_seconds else 'granularity'} follows that pace."
            )
        if choice.custom and options is choice.options:
            rationale += (
                f" On 6.3+ a span of {_human(choice.custom.bucket_max_span_seconds or 0)} would hold about "
                f"{choice.custom_per_bucket:,g} a bucket (set mongodb_version in the access file)."
            )
        if not options.meta_field:
            rationale += (
                " No field labels a series (none recurs in ten documents or more without one value holding nearly "
                "all): buckets group readings by time alone, so a read of one source scans the buckets of its range "
                "(an index on a measurement field needs 6.0+)."
            )
        if not collection.access:
            rationale += " No workload is declared: updates, deletes or change streams on it would change this advice."
        tradeoffs = [
            f"The readings move to {target}: a time-series collection cannot be renamed ($merge cannot write into "
            "one; $out can from 7.0.3), so the readings are copied and the application switches collections when "
            "the migration has finished (the guide says how).",
            "Readings have no unique _id any more, and no unique or text index can be built.",
            "Before 7.0, updates and deletes may only match the metaField; no change stream can watch it.",
            *choice.verdict.cautions,
        ]
        migration = {
            "step": "timeseries",
            "collection": collection.name,
            "to": target,
            "time_field": options.time_field,
            "meta_field": options.meta_field,
            "granularity": options.granularity,
            "bucket_max_span_seconds": options.bucket_max_span_seconds,
            "measurements_per_bucket": per_bucket,
        }
        confidence = 0.6 + (0.15 if choice.queried else 0) + (0.1 if collection.access else 0)
        confidence -= 0 if options.meta_field else 0.1
        measured, _clock = collection.measured_insert_rate()
        rate = collection.declared_inserts() or measured or 0
        severity = "warning" if rate >= 10 or collection.count >= 1_000_000 else "info"
        fields = [options.time_field, *([options.meta_field] if options.meta_field else [])]
        return [
            self.finding(
                collection.name,
                fields,
                severity,
                confidence,
                evidence,
                rationale,
                tradeoffs,
                migration,
                prediction=forecast,
            )  # fmt: skip
        ]

    def _not_yet(self, collection: CollectionEvidence, choice: TimeSeriesChoice) -> Recommendation:
        """The declared inserts would fill buckets, today's data would not: moved now, each reading would
        take a bucket of its own (larger than the document it was), so no migration is offered; the
        finding says which collection to create for the new readings and from when moving the old pays."""
        options = choice.chosen
        size = collection.size
        mean = float(size.get("mean") or size.get("p50") or 0)
        per_bucket = max(choice.chosen_per_bucket, 1.0)
        buckets = max(choice.series, round(collection.count / per_bucket))
        upper = _v1_bytes(collection, options, per_bucket, buckets, mean)
        today = round(collection.count * mean)
        how = (
            f"granularity '{options.granularity}'"
            if options.granularity
            else f"bucketMaxSpanSeconds and bucketRoundingSeconds {options.bucket_max_span_seconds:,} (6.3+)"
        )
        meta = f"metaField {options.meta_field}" if options.meta_field else "no metaField"
        rationale = (
            f"At the declared {collection.declared_inserts():,g} inserts/s across {choice.series:,} series a series "
            f"reads every {_human(choice.pace_seconds)}: a time-series collection (timeField {options.time_field}, "
            f"{meta}, {how}) would hold about {choice.chosen_declared_per_bucket:,g} readings a bucket. Today's "
            f"data holds {choice.chosen_per_bucket:,g} a bucket ({choice.interval_basis}): moved now, its "
            f"{collection.count:,} readings would take about {buckets:,} buckets, up to {upper:,} B uncompressed "
            f"against {today:,} B of documents today, so no migration is offered. Create the time-series "
            f"collection for the readings to come (createCollection('{collection.name}_ts', "
            f"{{timeseries: {_shell(options.create_options())}}})), or plan the move once the data holds about "
            f"{self.threshold('min_measurements_per_bucket'):,g} readings of a series a bucket, and run recommend "
            "again."
        )
        evidence: dict[str, Any] = {
            "documents": collection.count,
            "time_field": options.time_field,
            "meta_field": options.meta_field,
            "series": choice.series,
            "granularity": options.granularity,
            "bucket_max_span_seconds": options.bucket_max_span_seconds,
            "seconds_between_readings": round(choice.interval_seconds, 1),
            "cadence_basis": choice.interval_basis,
            "seconds_between_readings_declared": _rounded(choice.declared_interval_seconds),
            "measurements_per_bucket": choice.chosen_per_bucket,
            "measurements_per_bucket_declared": choice.chosen_declared_per_bucket,
            "buckets_estimate_today": buckets,
            "uncompressed_bucket_bytes_estimate_today": upper,
            "data_bytes_today": today,
            "mongodb_version": shown(choice.verdict.version),
        }
        fields = [options.time_field, *([options.meta_field] if options.meta_field else [])]
        return self.finding(
            collection.name, fields, "info", 0.5, evidence, rationale,
            tradeoffs=list(choice.verdict.cautions),
            title="A time-series collection would pay at the declared rate, not on today's data",
        )  # fmt: skip

    def _unwound(self, collection: CollectionEvidence, made: dict[str, Any]) -> list[Recommendation]:
        """Buckets made by hand (the bucket pattern in place) unwound into a time-series collection: the
        server then keeps the buckets, compressed by column, and the application inserts readings instead
        of pushing them into buckets and keeping their counts and times. The declared updates of the
        buckets are taken for those pushes: each becomes an insert of a reading."""
        array, time_path = made.get("array"), made.get("time_field")
        window = made.get("window_fields") or []
        if not array or not time_path or "[]." not in time_path or not window:
            return []  # readings without a time of their own: nothing to be a timeField
        time = time_path.split("[].", 1)[1]
        if "." in time:
            return []
        stats = (collection.field(array) or {}).get("array") or {}
        per_made = float(stats.get("mean") or made.get("readings_p50") or 0)
        span = float((collection.profile(window[0]) or {}).get("span_seconds") or 0)
        if per_made < 1 or span <= 0:
            return []
        excluded = {"_id", array, made.get("count_field"), *window}
        series = _bucket_series(collection, excluded)
        series_count = max(1, collection.cardinality(series) or 1) if series else 1
        readings = round(collection.count * per_made)
        if readings < self.threshold("min_documents"):
            return []
        per_series = readings / series_count
        interval = span / max(per_series - per_made, 1.0)
        access = collection.access
        writes = access.writes if access else None
        pushes = ((writes.inserts_per_sec or 0) + (writes.updates_per_sec or 0)) if writes else 0
        declared_interval = series_count / pushes if pushes else None
        pace = declared_interval or interval
        bucket_bytes = float(made.get("bucket_bytes_p50") or collection.size.get("p50") or 0)
        element = max(16.0, (bucket_bytes - 60) / per_made)
        if collection.field(f"{array}[]._id") is None:
            element += 17  # the _id each reading is given (an ObjectId under its key)
        by_size = max(1, int(MAX_BUCKET_BYTES // element))
        declared_version = self.context.access.mongodb_version if self.context.access else None
        version = parse_version(declared_version) if declared_version else None
        options = TimeSeriesOptions(time, series, granularity_for(pace))
        custom_span = custom_span_for(pace)
        if custom_span and version and version >= (6, 3):
            options = TimeSeriesOptions(time, series, None, custom_span)
        per_bucket = round(min(MAX_MEASUREMENTS, by_size, per_series, max(1.0, options.span_seconds / interval)), 1)
        # The buckets' declared updates are the pushes, each an insert of a reading; a reading is one element.
        workload = replace(
            _workload(collection),
            inserts_per_sec=pushes or None,
            updates_per_sec=None,
            largest_document_bytes=round(element),
        )
        verdict = judge(workload, version, "the access file's mongodb_version", self.threshold("max_update_share"))
        if not verdict.fits or per_bucket < self.threshold("min_measurements_per_bucket"):
            return []
        target = f"{collection.name}_ts"
        # A series' buckets: its readings over a full bucket's, and about half a bucket more at each span
        # boundary its readings cross (a bucket closes where its span ends, full or not).
        spans = max(1.0, (span + per_made * interval) / options.span_seconds)
        buckets = max(series_count, round(series_count * (per_series / per_bucket + spans / 2)))
        upper = round(readings * element + buckets * (300 + 2 * element))
        today = round(collection.count * float(collection.size.get("mean") or bucket_bytes))
        forecast = _forecast(
            target,
            collection,
            {"documents": readings},
            f"every element of {array} in {collection.name}'s {collection.count:,} buckets, a reading",
            buckets,
            upper,
            (
                f"{readings:,} readings at about {per_bucket:,g} a bucket (a series reads every "
                f"{_human(interval)} in the buckets' span; a bucket spans {_human(options.span_seconds)}, "
                f"at most {MAX_MEASUREMENTS:,} readings or {MAX_BUCKET_BYTES // 1024} KiB); bytes at most "
                f"{upper:,} uncompressed, against {today:,} B of hand-made buckets today"
            ),
        )
        how = (
            f"granularity '{options.granularity}'"
            if options.granularity
            else f"bucketMaxSpanSeconds and bucketRoundingSeconds {options.bucket_max_span_seconds:,} (6.3+)"
        )
        rationale = (
            f"{collection.name} keeps {readings:,} readings in {collection.count:,} buckets made by hand ({array}, "
            f"about {per_made:,g} a bucket"
            + (f", one series a bucket by {series}" if series else "")
            + f"). A time-series collection (timeField {time}, metaField {series or 'none'}, {how}) holds the same "
            f"readings in about {buckets:,} buckets that the server keeps and compresses by column (5.2+): the "
            f"application inserts plain readings instead of pushing into {array} and keeping "
            + ", ".join(f for f in (made.get("count_field"), *window) if f)
            + " up to date. MongoDB recommends it over buckets made by hand since 5.0."
        )
        if writes and writes.updates_per_sec:
            rationale += (
                f" The declared {writes.updates_per_sec:,g} updates/s of the buckets are taken for pushes of "
                "readings, each an insert there; readings updated in place would change this advice."
            )
        evidence = {
            "documents": collection.count,
            "readings": readings,
            "readings_per_hand_made_bucket": per_made,
            "array": array,
            "time_field": time,
            "meta_field": series,
            "series": series_count,
            "seconds_between_readings": round(interval, 1),
            "seconds_between_readings_declared": _rounded(declared_interval),
            "granularity": options.granularity,
            "bucket_max_span_seconds": options.bucket_max_span_seconds,
            "measurements_per_bucket": per_bucket,
            "buckets_estimate": buckets,
            "uncompressed_bucket_bytes_estimate": upper,
            "data_bytes_today": today,
            "mongodb_version": shown(verdict.version),
        }
        migration = {
            "step": "timeseries",
            "collection": collection.name,
            "to": target,
            "time_field": time,
            "meta_field": series,
            "granularity": options.granularity,
            "bucket_max_span_seconds": options.bucket_max_span_seconds,
            "measurements_per_bucket": per_bucket,
            "unwind": array,
            "count_field": made.get("count_field"),
            "start_field": window[0],
            "end_field": window[1] if len(window) > 1 else None,
            "max_readings": int(made.get("readings_max") or per_made),
        }
        tradeoffs = [
            f"The readings move to {target} (no time-series collection can be renamed): the application inserts "
            f"readings there instead of pushing into {collection.name}'s buckets, and reads readings (the guide "
            "says how).",
            "Readings have no unique _id there, and no unique or text index can be built.",
            *verdict.cautions,
        ]
        severity = "warning" if pushes >= 10 or readings >= 1_000_000 else "info"
        fields = [time, *([series] if series else []), array]
        return [
            self.finding(
                collection.name,
                fields,
                severity,
                0.7,
                evidence,
                rationale,
                tradeoffs,
                {k: v for k, v in migration.items() if v is not None} | {"granularity": options.granularity},
                title="Unwind the buckets made by hand into a time-series collection",
                prediction=forecast,
            )  # fmt: skip
        ]


def _bucket_series(collection: CollectionEvidence, excluded: set[Any]) -> str | None:
    """The top-level field that names a hand-made bucket's series: of a key's type, in every bucket, with
    at least two buckets a value; one named like a series key first, then the fewest values."""
    from mongopat.analysis.series import SERIES_NAME
    from mongopat.rules.patterns.bucket import SERIES_TYPES

    candidates = []
    for field in collection.top_level():
        path = field["path"]
        if path in excluded or collection.dominant_type(path) not in SERIES_TYPES or field["presence"] < 0.99:
            continue
        distinct = collection.cardinality(path)
        if not distinct or distinct * 2 > max(collection.count, 1):
            continue
        candidates.append((bool(SERIES_NAME.search(path)), -distinct, path))
    return max(candidates)[2] if candidates else None


def _shell(options: dict[str, Any]) -> str:
    """Options as the shell writes them: {timeField: 'ts', granularity: 'seconds'}."""
    return "{" + ", ".join(f"{k}: {v!r}" if isinstance(v, str) else f"{k}: {v}" for k, v in options.items()) + "}"


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _embeds(field: dict[str, Any]) -> bool:
    array = field.get("array")
    if not array or (array.get("p50") or 0) <= 1 or not array.get("element_types"):
        return False
    return array["element_types"][0]["type"] == "object"


def _v1_bytes(
    collection: CollectionEvidence, options: TimeSeriesOptions, per_bucket: float, buckets: int, mean: float
) -> int:
    """Bytes of the buckets uncompressed (version 1): each reading's fields less the metaField, each under
    its index in the bucket instead of its name; per bucket a header, the meta, and control.min and max,
    which hold each field's least and greatest value (whole sub-documents: a bucket of one reading holds it
    three times), bounded by the 95th-percentile reading."""
    fields = [f for f in collection.top_level() if f["path"] != options.meta_field]
    digits = len(str(max(1, int(per_bucket) - 1)))
    meta = collection.field(options.meta_field) if options.meta_field else None
    meta_bytes = 0
    if meta is not None:
        length = (meta.get("strings") or {}).get("mean_length") or 12
        meta_bytes = 2 + len(str(options.meta_field)) + 5 + int(length)
    renamed = sum(f["presence"] * (digits - len(f["path"])) for f in fields)
    reading = max(8.0, mean - 5 - meta_bytes + renamed)
    large = float(collection.size.get("p95") or mean)
    bounds = 2 * (1 + 4 + 5 + max(8.0, large - meta_bytes))  # control.min and control.max
    header = 5 + 17 + (1 + 8 + 5) + (1 + 8 + 4) + bounds + meta_bytes
    header += 1 + 5 + 5 + sum(5 + len(f["path"]) + 2 for f in fields)
    return round(collection.count * reading + buckets * header)
