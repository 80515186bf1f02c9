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

from typing import TYPE_CHECKING, Any

from mongopat.errors import InputError, OperationFailed
from mongopat.migrate.operations.base import INT, NUM, STR, CollectionOperation, Param, Step, StepError, StepType
from mongopat.timeseries.options import TimeSeriesOptions

if TYPE_CHECKING:
    from mongopat.guide.cost import Evidence
    from mongopat.guide.reads import ReadPlan
    from mongopat.guide.writes import WritePlan
    from mongopat.migrate.catalog import Catalog


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
        },
        "move the readings into a time-series collection",
        creates=("to",),
    )

    def check(self, params: dict[str, Any]) -> None:
        if params.get("granularity") is not None and params.get("bucket_max_span_seconds") is not None:
            raise StepError("timeseries: give granularity or bucket_max_span_seconds, not both")
        if params.get("meta_field") == params["time_field"]:
            raise StepError("timeseries: meta_field and time_field must differ")
        if params.get("meta_field") == "_id":
            raise StepError("timeseries: _id cannot be the meta_field")
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
        catalog.copy_measurements(step.collection, to, options)
        refused = catalog.stats.get("refused")
        if refused:  # the step is not done: the next up copies them once they hold a date
            raise OperationFailed(
                f"timeseries: {refused:,} document(s) of {step.collection} hold no date in {options.time_field}, "
                "which a time-series collection refuses: they stay where they are; give them a date (or remove "
                "them), then run migrate up again"
            )

    def revert(self, step: Step, catalog: Catalog) -> None:
        to = step.params["to"]
        if to not in catalog.names() or catalog.stats.get("created") != to:
            return
        # What the application wrote to the new collection since goes back where down leaves the readings.
        catalog.copy_back(to, step.collection)
        catalog.drop_timeseries(to)

    def verify(self, step: Step, catalog: Catalog) -> list[str]:
        to = step.params["to"]
        if to not in catalog.names():
            return [f"{to}: missing"]
        problems = []
        options = catalog.options(to).get("timeseries")
        if not options or not options_of(step).same_as(options):
            problems.append(f"{to}: not a time-series collection with the step's options (its options: {options})")
        missing = catalog.missing_measurements(step.collection, to, step.params["time_field"])
        if missing:
            problems.append(
                f"{to}: {missing:,} reading(s) of {step.collection} missing (written since up? run migrate up)"
            )
        refused = catalog.stats.get("refused")
        if refused:
            problems.append(
                f"{step.collection}: {refused:,} document(s) without a date in {step.params['time_field']} stay there "
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
        return {"_id": {"$gt": state.get("last_id")}, step.params["time_field"]: {"$type": "date"}}

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
