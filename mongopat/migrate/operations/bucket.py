"""bucket: readings of one series and one time window grouped into bucket documents, in the collection itself.

A bucket is ``{_id: {s: series, w: window start, n: sequence}, <series_key>, start, end, count, min, max,
readings}``; its ``_id`` is a function of the reading, so pushing a reading again after a crash lands in the
same bucket. Readings and buckets live side by side while the step runs: a reading is still pending until
it has been pushed into its bucket and deleted, and readings the application inserts later are just more
pending documents. ``min`` and ``max`` bound the measurements of the readings pushed; a reading pulled out
again (the application changed or deleted it meanwhile) leaves them as they were, as the application's own
deletes do.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from bson import ObjectId

from mongopat.guide.placeholders import OMIT, is_param, param
from mongopat.guide.reads import ReadPlan, Stage
from mongopat.guide.writes import WritePlan, changed, command, insert_one
from mongopat.migrate.operations.base import ANY, DICT, INT, LIST, STR, Param, Step, StepOperation, StepType
from mongopat.migrate.transform_api import Document, get_path, hashable_key, set_path

if TYPE_CHECKING:
    from mongopat.guide.cost import Evidence


class Operation(StepOperation):
    plan_order = 4
    """The step's type. Which bucket a reading goes to is :class:`BucketFill`, whatever the backend; the
    buckets are kept by the module's functions below (in place on a server), :class:`BucketBuilder`
    (decoded documents) and ``dump_folder/bucket_lines.py`` (a mongoexport file's lines)."""

    type = StepType(
        "bucket",
        "regroup",
        {
            "series_key": Param(STR),
            "time_field": Param(STR),
            "window_seconds": Param(INT),
            "measurements": Param(LIST, False, []),
            # Placeholder values per measurement (9999 for "not measured"): kept in the readings, never in
            # a bucket's min and max.
            "sentinels": Param(DICT, False, {}),
            "max_bucket_size": Param(INT, False, 1000),
            "alternative": Param(ANY, False),
        },
        "group documents by series and time window into bucket documents (bucket pattern)",
    )

    def rewrite_read(self, read: ReadPlan, step: Step, evidence: Evidence) -> None:
        if read.collection != step.collection:
            return
        p = step.params
        series, time = p["series_key"], p["time_field"]
        original = read.match
        buckets: dict[str, Any] = {}
        for name, cond in original.items():
            if name == series:
                buckets[name] = cond
            elif name == time:
                buckets.update(_window_condition(cond))
            elif not name.startswith("$"):
                buckets[f"readings.{name}"] = cond  # a bucket holding such a reading; refined below
        read.match = buckets
        stages: list[dict[str, Any]] = [
            {"$unwind": "$readings"},
            {"$set": {f"readings.{series}": f"${series}"}},
            {"$replaceRoot": {"newRoot": "$readings"}},
        ]
        if original:
            stages.append({"$match": original})
        read.insert_early(Stage("reshape", stages, ["readings"]))
        per_bucket = readings_per_bucket(step, evidence)
        if per_bucket:
            read.scale, read.overlap = 1 / per_bucket, 1
        read.notes.append(
            f"buckets of the {series} and the windows the range overlaps are unwound into readings, then "
            "filtered as before"
        )

    def during_read(self, before: ReadPlan, after: ReadPlan, step: Step) -> ReadPlan:
        """Readings and buckets alike: both matches, buckets unwound, readings passed through."""
        series = step.params["series_key"]
        during = before.copy()
        if before.match:
            during.match = {"$or": [before.match, after.match]}
        stages: list[dict[str, Any]] = [
            {"$set": {"_bucket": {"$isArray": "$readings"}}},
            {"$unwind": {"path": "$readings", "preserveNullAndEmptyArrays": True}},
            {"$set": {f"readings.{series}": f"${series}"}},
            {"$replaceRoot": {"newRoot": {"$cond": ["$_bucket", "$readings", "$$ROOT"]}}},
            {"$project": {"_bucket": 0, "readings": 0}},
        ]
        if before.match:
            stages.append({"$match": before.match})
        during.insert_early(Stage("reshape", stages, ["readings"]))
        return during

    def writes(self, step: Step, evidence: Evidence) -> list[WritePlan]:
        plans = []
        if per_sec := evidence.per_sec(step.collection, "inserts"):
            plans.append(self._insert(step, per_sec))
        if (per_sec := evidence.per_sec(step.collection, "updates")) and step.params.get("measurements"):
            plans.append(self._update(step, per_sec))
        if per_sec := evidence.per_sec(step.collection, "deletes"):
            plans.append(self._delete(step, per_sec))
        return plans

    def _in_bucket(self, step: Step) -> dict[str, Any]:
        """The bucket holding a reading: by series (routed on a collection sharded on it) and the reading."""
        return {step.params["series_key"]: param(step.params["series_key"]), "readings._id": param("_id")}

    def _update(self, step: Step, per_sec: float) -> WritePlan:
        """A measurement of a reading changed: in its bucket, through the positional operator."""
        series, measurements = step.params["series_key"], step.params["measurements"]
        before = [
            command(
                step.collection,
                "updateOne",
                filter={"_id": param("_id")},
                update={"$set": {name: param(name) for name in measurements}},
            )
        ]
        after = [
            command(
                step.collection,
                "updateOne",
                filter=self._in_bucket(step),
                update={"$set": {f"readings.$.{name}": param(name) for name in measurements}},
            )
        ]

        def binder(sample: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
            document = sample.document
            values: dict[str, Any] = {"_id": document["_id"], series: document.get(series)}
            for name in measurements:
                value = document.get(name)
                values[name] = (
                    changed(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else OMIT
                )
            return values, values

        parameters = {"_id": "the reading's _id", series: "its series"}
        parameters.update({name: f"the new {name}" for name in measurements})
        return WritePlan(
            step.collection,
            "update_reading",
            f"change the measurements of a reading of {step.collection}",
            before,
            after,
            parameters,
            per_sec,
            {"before": 1, "after": 1},
            binder,
        )

    def _delete(self, step: Step, per_sec: float) -> WritePlan:
        """A reading deleted: pulled out of its bucket, which counts one reading less."""
        series = step.params["series_key"]
        before = [command(step.collection, "deleteOne", filter={"_id": param("_id")})]
        update = {"$pull": {"readings": {"_id": param("_id")}}, "$inc": {"count": -1}}
        after = [command(step.collection, "updateOne", filter=self._in_bucket(step), update=update)]

        def binder(sample: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
            values = {"_id": sample.document["_id"], series: sample.document.get(series)}
            return values, values

        return WritePlan(
            step.collection,
            "delete_reading",
            f"delete a reading of {step.collection}",
            before,
            after,
            {"_id": "the reading's _id", series: "its series"},
            per_sec,
            {"before": 1, "after": 1},
            binder,
        )

    def _insert(self, step: Step, per_sec: float) -> WritePlan:
        """A reading is pushed into the current bucket of its series, which the upsert creates when there is
        none with room."""
        p = step.params
        series, time, window = p["series_key"], p["time_field"], p["window_seconds"]
        measurements = p.get("measurements") or []
        update: dict[str, Any] = {
            "$push": {"readings": param("reading")},
            "$inc": {"count": 1},
            "$setOnInsert": {"end": param("windowEnd")},
        }
        if measurements:
            update["$min"] = {f"min.{name}": param(name) for name in measurements}
            update["$max"] = {f"max.{name}": param(name) for name in measurements}
        bucket_filter = {series: param(series), "start": param("windowStart"), "count": {"$lt": p["max_bucket_size"]}}
        after = [command(step.collection, "updateOne", filter=bucket_filter, update=update, upsert=True)]

        def binder(sample: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
            document = sample.fresh()
            when = document.get(time)
            if _epoch(when) is None or document.get(series) is None:
                return None
            start = window_start(when, step)
            values: dict[str, Any] = {
                series: document[series],
                "windowStart": start,
                "windowEnd": start + datetime.timedelta(seconds=window),
                "reading": entry(document, step),
            }
            skip = sentinels_of(step)
            for name in measurements:
                value = measured(document, name, skip)
                values[name] = OMIT if value is None else value
            return {"document": document}, values

        parameters = {
            series: "the reading's series",
            "windowStart": f"the reading's {time} truncated to {window} s (from the epoch)",
            "windowEnd": f"windowStart + {window} s",
            "reading": f"the reading without {series}",
        }
        parameters.update({name: f"the reading's {name} (leave the key out when it has none)" for name in measurements})
        return WritePlan(
            step.collection,
            "insert",
            f"insert a reading into {step.collection}",
            [insert_one(step.collection)],
            after,
            parameters,
            per_sec,
            {"before": 1, "after": 1},
            binder,
        )

    def indexes(self, step: Step) -> list[tuple[str, dict[str, int]]]:
        return [(step.collection, {step.params["series_key"]: 1, "start": 1})]

    def new_shape(self, step: Step) -> str:
        p = step.params
        return (
            f"buckets of one {p['series_key']} and {p['window_seconds']} s of {p['time_field']}: start, end, count, "
            f"min, max and at most {p['max_bucket_size']} readings"
        )

    def deploy(self, step: Step) -> dict[str, list[str]]:
        return {
            "before": [
                f"`{step.collection}`: reads handle readings and buckets (match both, unwind buckets with "
                "`preserveNullAndEmptyArrays`)",
                f"`{step.collection}`: changes and deletes of a reading apply by `_id` and in its bucket by "
                "`readings._id` (`$set` on `readings.$`, or `$pull` with `$inc: {count: -1}`)",
            ],
            "during": [f"`{step.collection}`: insert readings either as documents or with the bucket upsert"],
            "after": [f"`{step.collection}`: insert with the bucket upsert and read buckets only"],
        }

    def written_fields(self, step: Step) -> set[str]:
        return {"readings", "count", "start", "end", "min", "max"}

    def preview(self, step: Step, before: Document) -> tuple[list[Document], list[Document], str]:
        readings = []
        for index in range(3):
            reading = dict(before)
            reading["_id"] = ObjectId(f"{index + 1:024x}")
            when = reading.get(step.params["time_field"])
            if isinstance(when, datetime.datetime):
                reading[step.params["time_field"]] = when + datetime.timedelta(seconds=10 * index)
            readings.append(reading)
        return readings, bucket_documents(readings, step), f"{len(readings)} documents become one bucket"

    def plan_refusals(self, step: Step, shard_key: dict[str, Any], schema: dict[str, Any] | None) -> list[str]:
        reasons = []
        key_fields = {name.split(".")[0] for name in shard_key}
        if key_fields and not key_fields <= {step.params.get("series_key"), "_id"}:
            # Buckets carry the series and their own _id, nothing else of a reading at the top level: an
            # upsert into a bucket must name the whole shard key.
            reasons.append(
                f"{step.collection} is sharded on {dict(shard_key)}: buckets hold only the series "
                f"{step.params.get('series_key')!r} and their _id, so they cannot carry that shard key"
            )
        if schema:
            reasons.append(f"{step.name} reshapes every document of a collection with a $jsonSchema validator")
        return reasons


_EPOCH = datetime.datetime(1970, 1, 1)


def _epoch(value: Any) -> float | None:
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return (value - _EPOCH).total_seconds()
    return None


class BucketFill:
    """Which bucket of its window each reading goes to: the one rule every backend follows.

    Readings of one window (a series and a window start: the ``key``) go into the newest bucket of that
    window while it has room, then into the next sequence number (``_id.n``). A window closed (its buckets
    written out and forgotten, so that memory stays bounded) that gets a late reading goes on in the
    sequence after its last one, never into a bucket already written. Backends keep the buckets
    themselves (documents in memory, serialized lines, upserts on a server); this keeps, per window, only
    its newest sequence and how many readings that holds.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.open: dict[Any, list[int]] = {}  # key -> [newest sequence, readings it holds]
        self.closed: dict[Any, int] = {}  # key -> last sequence of a window closed
        self.newest: Any = None  # the latest window start placed

    def seed(self, key: Any, sequence: int, readings: int) -> None:
        """What storage holds already: a bucket ``sequence`` of ``readings`` (only a newer one counts)."""
        known = self.open.get(key)
        if known is None or sequence >= known[0]:
            self.open[key] = [sequence, readings]

    def place(self, key: Any, readings: int = 1) -> list[tuple[int, int]]:
        """Where the next ``readings`` readings of window ``key`` go, in order: ``[(sequence, how many)]``,
        more than one pair when they fill a bucket."""
        known = self.open.get(key)
        if known is None:
            known = self.open[key] = [self.closed.pop(key, -1) + 1, 0]
        if self.newest is None or key[1] > self.newest:
            self.newest = key[1]
        spread = []
        while readings > 0:
            if known[1] >= self.capacity:
                known[0], known[1] = known[0] + 1, 0
            taken = min(readings, self.capacity - known[1])
            known[1] += taken
            readings -= taken
            spread.append((known[0], taken))
        return spread

    def full(self, key: Any, sequence: int) -> None:
        """Storage has no room in bucket ``sequence`` (another writer filled it): the next one is new."""
        known = self.open[key]
        if known[0] <= sequence:
            known[0], known[1] = sequence + 1, 0

    def close(self, older_than: Any) -> list[Any]:
        """Close the windows that start before ``older_than`` (every one with None); returns their keys."""
        keys = [key for key in self.open if older_than is None or key[1] < older_than]
        for key in keys:
            self.closed[key] = self.open.pop(key)[0]
        return keys

    def close_behind(self, width: Any) -> list[Any]:
        """Close the windows that start more than two windows (of ``width``) before the newest placed, so
        that memory holds the open windows only; readings a little out of order still find theirs open."""
        return [] if self.newest is None else self.close(self.newest - 2 * width)

    def forget(self) -> None:
        """Forget everything (a backend that can read it again from storage bounds its memory so)."""
        self.open.clear()
        self.closed.clear()


class BucketBuilder:
    """Bucket documents built in memory from decoded readings, placed by :class:`BucketFill`.

    Readings already in their window's open bucket (same ``_id``) are not added again, so replaying
    readings is harmless. Readings without a time or a series are kept in ``rejected``.
    """

    def __init__(self, step: Step) -> None:
        self.series_key = step.params["series_key"]
        self.time_field = step.params["time_field"]
        self.window = step.params["window_seconds"]
        self.measurements = step.params["measurements"] or []
        self.sentinels = sentinels_of(step)
        self.fill = BucketFill(step.params["max_bucket_size"])
        self.open: dict[tuple[Any, datetime.datetime], Document] = {}
        self.ids: dict[tuple[Any, datetime.datetime], set[Any]] = {}
        self.rejected: list[Document] = []
        # Buckets that filled up and were replaced by their next sequence: the caller must write them.
        self.completed: list[Document] = []

    def add(self, doc: Document) -> Document | None:
        """Add one reading; returns the bucket it went to (None when the reading has no time or series)."""
        when = doc.get(self.time_field)
        series = doc.get(self.series_key)
        if when is None or _epoch(when) is None or series is None:
            self.rejected.append(doc)
            return None
        start = _window_start(when, self.window)
        key = (hashable_key(series), start)
        bucket = self.open.get(key)
        if bucket is not None and doc.get("_id") in self.ids[key]:
            return bucket
        [(sequence, _one)] = self.fill.place(key)
        if bucket is None or bucket["_id"]["n"] != sequence:
            if bucket is not None:
                self.completed.append(bucket)
            bucket = self.open[key] = self._new(series, start, sequence)
            self.ids[key] = set()
        reading = dict(doc)
        del reading[self.series_key]
        bucket["readings"].append(reading)
        bucket["count"] += 1
        self.ids[key].add(doc.get("_id"))
        for name in self.measurements:
            value = measured(doc, name, self.sentinels)
            if value is not None:
                low, high = get_path(bucket["min"], name), get_path(bucket["max"], name)
                set_path(bucket["min"], name, value if low is None else min(low, value))
                set_path(bucket["max"], name, value if high is None else max(high, value))
        return bucket

    def close(self) -> list[Document]:
        """Every open bucket, now closed."""
        return self._closed(self.fill.close(None))

    def close_behind(self) -> list[Document]:
        """The open buckets of windows well behind the newest (:meth:`BucketFill.close_behind`), closed."""
        return self._closed(self.fill.close_behind(datetime.timedelta(seconds=self.window)))

    def _closed(self, keys: list[Any]) -> list[Document]:
        for key in keys:
            self.ids.pop(key, None)
        return [self.open.pop(key) for key in keys]

    def _new(self, series: Any, start: datetime.datetime, sequence: int) -> Document:
        return {
            "_id": {"s": series, "w": start, "n": sequence},
            self.series_key: series,
            "start": start,
            "end": start + datetime.timedelta(seconds=self.window),
            "count": 0,
            "min": {},
            "max": {},
            "readings": [],
        }


def bucket_documents(documents: list[Document], step: Step) -> list[Document]:
    """All buckets for ``documents`` (for tests and previews; the runtime streams)."""
    builder = BucketBuilder(step)
    buckets: dict[Any, Document] = {}
    for doc in documents:
        bucket = builder.add(doc)
        if bucket is not None:
            buckets[repr(bucket["_id"])] = bucket
    return list(buckets.values())


def unbucket(bucket: Document, step: Step) -> list[Document]:
    """The readings of a bucket as documents again (verification: nothing lost, nothing invented)."""
    series_key = step.params["series_key"]
    return [{**reading, series_key: bucket.get(series_key)} for reading in bucket.get("readings", [])]


def pending(step: Step) -> dict[str, Any]:
    """Readings not yet in a bucket: documents with a date and a series (others stay as they are)."""
    return {
        "readings": {"$exists": False},
        step.params["time_field"]: {"$type": "date"},
        step.params["series_key"]: {"$ne": None},
    }


def is_pending(doc: Document, step: Step) -> bool:
    return (
        "readings" not in doc
        and _epoch(doc.get(step.params["time_field"])) is not None
        and doc.get(step.params["series_key"]) is not None
    )


def buckets_filter() -> dict[str, Any]:
    """The bucket documents (what ``down`` unpacks): mongopat's and those the application creates with its
    own upserts, whatever their ``_id``."""
    return {"readings": {"$type": "array"}, "count": {"$exists": True}}


def window_start(when: datetime.datetime, step: Step) -> datetime.datetime:
    return _window_start(when, step.params["window_seconds"])


def _window_start(when: datetime.datetime, width: int) -> datetime.datetime:
    seconds = _epoch(when)
    assert seconds is not None
    return _EPOCH + datetime.timedelta(seconds=seconds - seconds % width)


def window_of(doc: Document, step: Step) -> tuple[Any, datetime.datetime]:
    """(series, window start) of a pending reading."""
    return doc[step.params["series_key"]], window_start(doc[step.params["time_field"]], step)


def bucket_id(series: Any, start: datetime.datetime, sequence: int) -> dict[str, Any]:
    return {"s": series, "w": start, "n": sequence}


def sentinels_of(step: Step) -> dict[str, frozenset[Any]]:
    """The step's placeholder values per measurement, as sets."""
    return {name: frozenset(values) for name, values in (step.params.get("sentinels") or {}).items()}


def measured(doc: Document, name: str, sentinels: dict[str, frozenset[Any]]) -> int | float | None:
    """A reading's measurement ``name`` (a dotted path reaches into sub-documents) when it is a number and
    not one of the measurement's placeholder values; else None (bools, strings, missing values)."""
    value = get_path(doc, name) if "." in name else doc.get(name)
    if type(value) is not int and type(value) is not float:
        return None
    skip = sentinels.get(name)
    return None if skip is not None and value in skip else value


def entry(doc: Document, step: Step) -> Document:
    """A reading as a bucket holds it: everything but the series, which the bucket holds once."""
    return {key: value for key, value in doc.items() if key != step.params["series_key"]}


def push(readings: list[Document], step: Step, sequence: int) -> Any:
    """Push readings of one window into bucket ``sequence`` of that window while it has room for them all,
    creating it if needed; a bucket without room makes the upsert fail with a duplicate key (the caller
    tries the next sequence). The series is in the filter so that a collection sharded on it routes it."""
    from pymongo import UpdateOne  # server runs only: a dump folder's run never loads the driver

    series, start = window_of(readings[0], step)
    update: dict[str, Any] = {
        # An insert takes the series and the _id from the filter's equality conditions.
        "$setOnInsert": {
            "start": start,
            "end": start + datetime.timedelta(seconds=step.params["window_seconds"]),
        },
        "$push": {"readings": {"$each": [entry(doc, step) for doc in readings]}},
        "$inc": {"count": len(readings)},
    }
    lows: dict[str, Any] = {}
    highs: dict[str, Any] = {}
    skip = sentinels_of(step)
    for name in step.params.get("measurements") or []:
        values = [value for doc in readings if (value := measured(doc, name, skip)) is not None]
        if values:
            lows[f"min.{name}"], highs[f"max.{name}"] = min(values), max(values)
    if lows:
        update["$min"], update["$max"] = lows, highs
    return UpdateOne(
        {
            "_id": bucket_id(series, start, sequence),
            step.params["series_key"]: series,
            "count": {"$lte": step.params["max_bucket_size"] - len(readings)},
        },
        update,
        upsert=True,
    )


def pull(bucket: Any, reading_id: Any) -> Any:
    """Take one reading out of a bucket again (its copy is stale, or the application deleted it)."""
    from pymongo import UpdateOne

    return UpdateOne(
        {"_id": bucket, "readings._id": reading_id},
        {"$pull": {"readings": {"_id": reading_id}}, "$inc": {"count": -1}},
    )


def reading(item: Document, bucket: Document, step: Step, original: Document | None) -> Document:
    """A bucket's reading as a document again, its series back where the original had it (or last)."""
    series_key = step.params["series_key"]
    merged = {**item, series_key: bucket.get(series_key)}
    if original is None:
        return merged
    ordered = {key: merged[key] for key in original if key in merged}
    ordered.update((key, value) for key, value in merged.items() if key not in ordered)
    return ordered


def readings_per_bucket(step: Step, evidence: Evidence) -> float | None:
    """Readings a bucket holds on average: the window times one series' rate (the declared inserts where
    the access file declares them, as the cost of today's read takes them), at most the bucket's size."""
    p = step.params
    time = evidence.time(step.collection, p["time_field"])
    series = evidence.distinct(step.collection, p["series_key"])
    rate = evidence.per_sec(step.collection, "inserts") or (time or {}).get("avg_per_sec")
    if not time or not series or not rate:
        return None
    return max(1.0, min(float(p["max_bucket_size"]), rate / series * p["window_seconds"]))


def _window_condition(cond: Any) -> dict[str, Any]:
    """The buckets whose window can hold a reading matching ``cond`` on the time field."""
    if not isinstance(cond, dict) or is_param(cond):
        return {"start": {"$lte": cond}, "end": {"$gt": cond}}
    found: dict[str, Any] = {}
    for op, bound in cond.items():
        if op == "$lt":
            found["start"] = {"$lt": bound}
        elif op == "$lte":
            found["start"] = {"$lte": bound}
    for op, bound in cond.items():
        if op in ("$gte", "$gt"):
            found["end"] = {"$gt": bound}  # after start: the {series, start} index serves the match
    return found
