"""timeseries: a collection's documents moved into a new time-series collection (MongoDB 5.0+), which down
drops after giving the original collection the readings the application wrote to it since.

A time-series collection cannot be renamed, and ``$merge`` cannot write into one (``$out`` can from 7.0.3
only), so the readings are copied from the client in ``_id`` order, batch by batch, to a collection of a
new name (``to``) that the application switches to when ``up`` has finished. The original collection is
left as it is: ``down`` needs it, and it is the application's until the switch. Readings have no unique
``_id`` in a time-series collection, so a batch written before a crash is never written twice: the first
batch of every run, and a last pass over the whole collection (readings an application inserted behind
the scan), insert only the ``_id``s the new collection lacks. Readings the application inserts into the
original collection after ``up`` (before it switched) are the step's pending documents: the next ``up``
copies them.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from mongopat.errors import InputError, OperationFailed
from mongopat.migrate.operations.base import INT, NUM, STR, CollectionOperation, Param, Step, StepError, StepType
from mongopat.migrate.transform_api import hashable_key
from mongopat.timeseries.options import TimeSeriesOptions
from mongopat.timeseries.sync import Change, Differences, Digest, reading_hash
from mongopat.timeseries.unwind import Place, Readings

if TYPE_CHECKING:
    from mongopat.guide.cost import Evidence
    from mongopat.guide.reads import ReadPlan
    from mongopat.guide.writes import WritePlan
    from mongopat.migrate.catalog import Catalog


def readings_of(step: Step) -> Readings:
    """What the step's collection holds as readings (its dated documents, or its buckets' elements)."""
    p = step.params
    return Readings(
        p["time_field"], p.get("unwind"), p.get("meta_field"), p.get("count_field"), p.get("start_field"),
        p.get("end_field"), int(p.get("max_readings") or 1000),
    )  # fmt: skip


def source_readings(step: Step, catalog: Catalog, source: Readings) -> Iterator[dict[str, Any]]:
    """The readings of the step's collection, streamed (``source.locate`` names each one's bucket)."""
    if not source.unwinds:
        return catalog.readings(step.collection, step.params["time_field"])
    return source.stream(catalog.readings(step.collection, None))


def refused_readings(step: Step, catalog: Catalog, source: Readings) -> int:
    if not source.unwinds:
        return catalog.undated(step.collection, step.params["time_field"])
    return sum(source.refused(d) for d in catalog.readings(step.collection, None))


def options_of(step: Step) -> TimeSeriesOptions:
    p = step.params
    try:
        return TimeSeriesOptions(
            time_field=p["time_field"],
            meta_field=p.get("meta_field"),
            granularity=None if p.get("bucket_max_span_seconds") else (p.get("granularity") or "seconds"),
            bucket_max_span_seconds=p.get("bucket_max_span_seconds"),
            expire_after_seconds=p.get("expire_after_seconds"),
        )
    except InputError as exc:
        raise StepError(f"timeseries: {exc}") from None


class Operation(CollectionOperation):
    renames_collection = True  # the readings live under another name after it
    plan_order = 4
    type = StepType(
        "timeseries",
        "collection",
        {
            "to": Param(STR, help="the time-series collection to create (a new name: none can be renamed)"),
            "time_field": Param(STR, help="the date field of each reading (timeField)"),
            "meta_field": Param(STR, required=False, help="the series key (metaField); none: one series"),
            "granularity": Param(STR, required=False, help="seconds, minutes or hours (default seconds)"),
            "bucket_max_span_seconds": Param(INT, required=False, help="a custom bucket span (6.3+)"),
            "expire_after_seconds": Param(INT, required=False, help="readings expire this long after their time"),
            "measurements_per_bucket": Param(NUM, required=False, help="predicted readings a bucket (the guide's)"),
            # Buckets made by hand, unwound: the array of readings, and what down keeps up to date.
            "unwind": Param(STR, required=False, help="the array of readings of buckets made by hand"),
            "count_field": Param(STR, required=False, help="a hand-made bucket's count of readings"),
            "start_field": Param(STR, required=False, help="a hand-made bucket's first time"),
            "end_field": Param(STR, required=False, help="a hand-made bucket's last time"),
            "max_readings": Param(INT, required=False, help="readings a bucket down makes holds at most"),
        },
        "move the readings into a time-series collection",
        creates=("to",),
        reruns_when_behind=True,
    )

    def check(self, params: dict[str, Any]) -> None:
        if params.get("granularity") is not None and params.get("bucket_max_span_seconds") is not None:
            raise StepError("timeseries: give granularity or bucket_max_span_seconds, not both")
        if params.get("meta_field") == params["time_field"]:
            raise StepError("timeseries: meta_field and time_field must differ")
        if params.get("meta_field") == "_id":
            raise StepError("timeseries: _id cannot be the meta_field")
        if params.get("unwind") is None and any(params.get(k) for k in ("count_field", "start_field", "end_field")):
            raise StepError("timeseries: count_field, start_field and end_field describe buckets: give unwind too")
        options_of(Step(self.type, "-", params))

    def written_fields(self, step: Step) -> set[str]:
        return set()

    def apply(self, step: Step, catalog: Catalog) -> None:
        names, to = catalog.names(), step.params["to"]
        if step.collection not in names:
            raise OperationFailed(f"timeseries: no collection {step.collection!r}")
        options = options_of(step)
        if to in names and not catalog.stats.get("created"):
            raise OperationFailed(
                f"timeseries: {to} exists already and this step did not create it; choose another 'to'"
            )
        if to not in names:
            catalog.record(created=to)  # before the command: a crash after it leaves a collection that is ours
            catalog.create_timeseries(to, options)
        copied = Digest.from_list(catalog.stats.get("copy_digest"))
        if copied is not None and Digest.of(catalog.readings(to, None)) != copied:
            _after_the_switch(step, catalog, options)
        else:
            _copy(step, catalog, options)
        refused = catalog.stats.get("refused")
        if refused:  # the step is not done: the next up copies them once they hold a date
            raise OperationFailed(
                f"timeseries: {refused:,} document(s) of {step.collection} hold no date in {options.time_field}, "
                "which a time-series collection refuses: they stay where they are; give them a date (or remove "
                "them), then run migrate up again"
            )

    def revert(self, step: Step, catalog: Catalog) -> None:
        """Give the original collection what the application wrote to the time-series one since the last
        ``up`` made them agree, then drop it; a reading changed in both since is refused, not guessed. The
        application writes the original collection again by then (the guide says so); one still writing
        the time-series collection is chased a few passes, then refused before anything is dropped."""
        to, time = step.params["to"], step.params["time_field"]
        if to not in catalog.names() or catalog.stats.get("created") != to:
            return
        readings = readings_of(step)
        for _pass in range(SYNC_PASSES):
            copied = Digest.from_list(catalog.stats.get("copy_digest"))
            source = Digest.from_list(catalog.stats.get("source_digest"))
            replica = source_readings(step, catalog, readings)
            with Differences(replica, time, readings.locate) as compared:
                found = compared.compare(catalog.readings(to, None))
                if not found.total or compared.truth == copied:
                    break  # nothing to give back: the original holds every reading the application wrote
                # The application wrote the time-series collection: its writes go back.
                if compared.replica == source:
                    changes = [c for c in compared.changes() if not _expired(c, step)]
                else:
                    changes = _unambiguous(step, catalog, compared)
                if readings.unwinds:
                    overtaken = _back_into_buckets(step, catalog, readings, changes)
                else:
                    overtaken = catalog.write_source(step.collection, changes, compared.replica_hash)
                if overtaken:
                    raise OperationFailed(
                        f"timeseries down: {overtaken:,} reading(s) of {step.collection} were written by the "
                        f"application while down gave back those of {to}; {to} is kept: run migrate down again"
                    )
                # Both agree now: what a next pass finds in the copy was written while this one ran.
                catalog.record(copy_digest=compared.truth.to_list(), source_digest=compared.truth.to_list())
        else:
            raise OperationFailed(
                f"timeseries down: the application still writes {to}; switch it back to {step.collection}, "
                "then run migrate down again (what it wrote so far is in both)"
            )
        catalog.drop_timeseries(to)

    def verify(self, step: Step, catalog: Catalog) -> list[str]:
        to, time = step.params["to"], step.params["time_field"]
        if to not in catalog.names():
            return [f"{to}: missing"]
        problems = []
        options = catalog.options(to).get("timeseries")
        if not options or not options_of(step).same_as(options):
            problems.append(f"{to}: not a time-series collection with the step's options (its options: {options})")
        copied = Digest.from_list(catalog.stats.get("copy_digest"))
        readings = readings_of(step)
        with Differences(catalog.readings(to, None)) as compared:
            found = compared.compare(source_readings(step, catalog, readings), readings.locate)
            if compared.replica == copied or copied is None:  # the application has not written it yet
                late = sum(1 for c in compared.changes("missing") if _after_copied(_holder(c), catalog.stats))
                behind = found.total - late
                if behind:
                    problems.append(
                        f"{to}: {found.missing - late:,} reading(s) of {step.collection} missing, {found.differs:,} in "
                        f"another version and {found.extra:,} that {step.collection} no longer holds (written in "
                        f"{step.collection} behind the copy): up runs the step again after a failed verification; "
                        "once applied, migrate down then migrate up copies them again"
                    )
        refused = catalog.stats.get("refused")
        if refused:
            problems.append(
                f"{step.collection}: {refused:,} document(s) without a date in {time} stay there "
                "only: a time-series collection refuses them"
            )
        return problems

    def dry_run(self, step: Step, catalog: Catalog) -> list[str]:
        to, options = step.params["to"], options_of(step)
        told = ", ".join(f"{k} {v}" for k, v in options.create_options().items())
        found = [f"would create the time-series collection {to} ({told})"]
        if to in catalog.names():
            found = [f"would refuse: {to} exists already"]
        found.append(f"would copy the {catalog.count(step.collection):,} documents of {step.collection} into it")
        return found

    def pending(self, step: Step, state: dict[str, Any]) -> dict[str, Any] | None:
        """Readings inserted into the original collection behind the last one copied (an application that
        has not switched yet); None before a run copied any."""
        if not state.get("has_last"):
            return None
        return readings_of(step).pending(state.get("last_id"))

    # -- the guide ---------------------------------------------------------------------------------

    def rewrite_read(self, read: ReadPlan, step: Step, evidence: Evidence) -> None:
        if read.collection != step.collection:
            return
        read.collection, read.counted_as, read.keeps_indexes = step.params["to"], step.collection, False
        per_bucket = step.params.get("measurements_per_bucket")
        meta, time = step.params.get("meta_field"), step.params["time_field"]
        filters = read.query.filter
        if per_bucket and time in filters and (meta is None or meta in filters):
            # The server reads the buckets of the series whose span meets the range, and unpacks them.
            read.scale, read.overlap = 1 / float(per_bucket), 1
            read.notes.append(
                f"reads the buckets of the {meta or 'collection'} whose span meets the {time} range, unpacked "
                "by the server into readings"
            )

    def during_read(self, before: ReadPlan, after: ReadPlan, step: Step) -> ReadPlan | None:
        return before.copy()  # the original collection is untouched until the application switches

    def writes(self, step: Step, evidence: Evidence) -> list[WritePlan]:
        from mongopat.guide.writes import moved_inserts

        new = step.params["to"]
        return moved_inserts(
            step.collection, new, evidence, f"insert a reading into {step.collection}, into {new} after"
        )

    def new_shape(self, step: Step) -> str:
        return f"a reading inserted into {step.params['to']} holds a date in {step.params['time_field']}" + (
            f" and its series in {step.params['meta_field']}" if step.params.get("meta_field") else ""
        )

    def deploy(self, step: Step) -> dict[str, list[str]]:
        old, new = step.collection, step.params["to"]
        return {
            "before": [],
            "during": [f"keep writing `{old}`: `migrate up` copies into `{new}` what it finds there"],
            "after": [
                f"read and insert readings in `{new}` instead of `{old}`, then run `migrate up` once more: it "
                f"copies the readings inserted into `{old}` before the switch",
                f"updates and deletes of readings: before 7.0 only by `{step.params.get('meta_field') or 'metaField'}`",
                f"drop `{old}` once nothing reads it (`migrate down` needs it until then)",
            ],
        }


# Passes comparing the two collections while the application writes, before the rest is the next up's.
SYNC_PASSES = 3


def _copy(step: Step, catalog: Catalog, options: TimeSeriesOptions) -> None:
    """Copy, then compare until the copy agrees with the collection (the application may update, delete
    or insert behind the copy while it runs); record what both held then. Each comparison first takes the
    collection's greatest ``_id``: readings inserted after it are left to the pending documents, so that
    none is copied twice."""
    to, readings = step.params["to"], readings_of(step)
    agreed = catalog.copy_measurements(step.collection, to, options, readings)
    boundary = None
    for _pass in range(SYNC_PASSES):
        if agreed is not None:
            break
        boundary = catalog.copied_through(step.collection)
        with Differences(catalog.readings(to, None)) as compared:
            compared.compare(source_readings(step, catalog, readings), readings.locate)
            changes = [c for c in compared.changes() if not (c.kind == "missing" and _later(_holder(c), boundary))]
            if changes:
                catalog.write_readings(to, changes)
            if not changes or _pass == SYNC_PASSES - 1:
                agreed = compared.truth  # what the copy holds now, but the pending readings
                for change in compared.changes("missing"):
                    if _later(_holder(change), boundary) and change.document is not None:
                        agreed.remove(reading_hash(change.document))
    assert agreed is not None
    catalog.record(
        source_digest=agreed.to_list(), copy_digest=agreed.to_list(), synced_to=boundary,
        refused=refused_readings(step, catalog, readings),
    )  # fmt: skip


def _after_the_switch(step: Step, catalog: Catalog, options: TimeSeriesOptions) -> None:
    """The application has written the time-series collection: it is the application's now. Only the
    readings inserted into the old collection behind the last one copied go over (the copy's passes, from
    its checkpoint); anything else that differs is counted and left to the user."""
    to = step.params["to"]
    if not catalog.copies_incrementally:
        # A backend that writes the copy whole would overwrite the application's readings.
        raise OperationFailed(
            f"timeseries: {to} was written since the last up: its readings are the application's now, and this "
            "backend writes a time-series collection only whole"
        )
    readings = readings_of(step)
    catalog.copy_measurements(step.collection, to, options, readings)
    for key in ("copy_digest", "source_digest"):
        recorded = Digest.from_list(catalog.stats.get(key))
        if recorded is not None:
            catalog.stats[key] = recorded.plus(catalog.inserted).to_list()
    catalog.record(switched=True, refused=refused_readings(step, catalog, readings))


def _back_into_buckets(step: Step, catalog: Catalog, readings: Readings, changes: list[Change]) -> int:
    """Readings changed or removed in the time-series collection change or leave their elements; readings
    no bucket held go into new buckets of their series. Each bucket is written only while it is still the
    version read (its hash when compared)."""
    by_bucket: dict[Any, list[Change]] = {}
    hashes: dict[Any, int] = {}
    places: dict[Any, Any] = {}
    new = []
    for change in changes:
        if change.kind == "missing" or change.locator is None:
            if change.document is not None:
                new.append(change.document)
            continue
        place = Place.from_bytes(change.locator)
        key = hashable_key(place.bucket)
        by_bucket.setdefault(key, []).append(change)
        hashes[key], places[key] = place.bucket_hash, place.bucket
    bucket_changes: list[Change] = []
    for bucket in catalog.documents(step.collection, list(places.values())):
        key = hashable_key(bucket.get("_id"))
        if reading_hash(bucket) != hashes.get(key):
            continue  # written since it was compared: write_source counts it as overtaken
        rebuilt = readings.rebuilt(bucket, by_bucket[key])
        kind = "extra" if rebuilt is None else "differs"
        bucket_changes.append(Change(kind, bucket.get("_id"), rebuilt))  # type: ignore[arg-type]
    missing = len(places) - len(bucket_changes)
    bucket_changes.extend(Change("missing", b["_id"], b) for b in readings.new_buckets(new))
    return missing + catalog.write_source(step.collection, bucket_changes, lambda i: hashes.get(hashable_key(i)))


def _expired(change: Change, step: Step) -> bool:
    """A reading only the original holds whose time the time-series collection's expiry is past: the
    server removed it, the application did not."""
    expiry = step.params.get("expire_after_seconds")
    if change.kind != "extra" or expiry is None or change.time is None:
        return False
    now = datetime.datetime.now(datetime.timezone.utc)
    return change.time < now - datetime.timedelta(seconds=int(expiry))


def _after_copied(value: Any, stats: dict[str, Any]) -> bool:
    """Whether ``_id`` ``value`` sorts after every one the last comparison saw (inserted since: pending)."""
    return _later(value, stats.get("synced_to"))


def _holder(change: Change) -> Any:
    """The ``_id`` of the document holding a changed reading: its own, or its hand-made bucket's."""
    return Place.from_bytes(change.locator).bucket if change.locator else change.id


def _later(value: Any, last: Any) -> bool:
    try:
        return last is not None and type(value) is type(last) and value > last
    except TypeError:
        return False


def _unambiguous(step: Step, catalog: Catalog, compared: Differences) -> list[Change]:
    """Both collections were written since the last up: readings only the time-series collection holds go
    back; one in another version in each, or only in the original (deleted from the copy, or never in it),
    cannot be told apart unless it was inserted after the copy or expired: refused, nothing written."""
    changes, doubtful = [], 0
    for change in compared.changes():
        if change.kind == "missing":
            changes.append(change)
        elif change.kind == "extra" and (_expired(change, step) or _after_copied(_holder(change), catalog.stats)):
            continue
        else:
            doubtful += 1
    if doubtful:
        raise OperationFailed(
            f"timeseries down: {doubtful:,} reading(s) differ between {step.collection} and {step.params['to']}, and "
            "both collections were written since the last up, so mongopat cannot tell which write is the "
            "application's last; nothing was written",
            hint=f"make them agree (or copy what {step.collection} lacks by hand), then run migrate down again",
        )
    return changes
