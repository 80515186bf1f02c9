"""The bucket step computed by the server: no reading travels between the server and mongopat.

Readings are taken a range of whole windows at a time, in time order: a range ends at the end of the window
of its ``batch_size``-th pending reading (the last range is open), so each window's readings present when
the range is taken go into buckets together, ``max_bucket_size`` a bucket in ``_id`` order. Each range
goes through these phases (``operations/bucket_stages.py`` builds every pipeline), its phase recorded in
the changelog (``bucket_range``) so that a run stopped anywhere goes on from the phase it was in:

1. **stash** (recorded first): one update pipeline keeps each pending reading's version in itself. The
   update of a document is atomic on MongoDB as on the test server, so the version kept is exactly one the
   application wrote; every later phase reads that version;
2. **stage**: an aggregation groups the stashed versions into buckets numbered after their window's newest
   and ``$out``\\ s them into mongopat's stage collection (run again until recorded, it writes the same
   buckets); recorded ``staged``;
3. **publish**: the backups (``$merge`` into ``mongopat_backup``), then the stage's buckets inserted into
   the collection by an insert-only ``$merge``. A reading the application deleted before its bucket was
   there (its pull found nothing to pull) is pulled out of the bucket now; recorded ``published``;
4. **delete**: each stashed reading still exactly its stash is deleted (one ``delete`` with ``$expr``,
   atomic per document). A reading the application changed since is left, pulled out of its bucket and
   unstashed: it is pending again, for the next pass. Then the range's checkpoint.

Between a reading's stash and its delete, the application sees it with the field ``__mongopat_original``;
from its bucket's publication on, in both shapes, as the transition's reads and writes expect (its change
or delete applies to both). Readings the pass leaves pending (changed meanwhile, inserted behind it, a
reading over 7 MiB, one holding ``__mongopat_original`` itself) are the client side's catch-up's, which
fills the room of their window's newest bucket.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pymongo import ASCENDING

from mongopat.migrate.bookkeeping import BACKUP, stage_name
from mongopat.migrate.contracts import BucketRange, StepRun
from mongopat.migrate.operations import bucket, bucket_stages
from mongopat.migrate.runner import StepOutcome, count
from mongopat.migrate.server import sharding
from mongopat.migrate.server.in_server_steps import stash_key

if TYPE_CHECKING:
    from mongopat.migrate.server.bucket_steps import BucketSteps

# Phases of a range, in order; the changelog holds the last one begun.
STASH, STAGED, PUBLISHED = "stash", "staged", "published"


def client_side_because(steps: BucketSteps, run: StepRun) -> str | None:
    """Why the bucket step runs on the client side (None: inside the server)."""
    p = run.step.params
    if steps.options.client_side:
        return "--client-side"
    if not type(getattr(steps.db, "client", None)).__module__.startswith("pymongo"):
        return "the embedded engine runs no $merge"
    if run.state.get("has_last") or run.state.get("count_before") is not None:
        # Begun by a mongopat that moved readings on the client side: its pushes are replayed there.
        return "resumed from a run that began on the client side"
    named = {p["series_key"], p["time_field"]}
    if named & bucket_stages.BUCKET_FIELDS or any(name.startswith("__mongopat") for name in named):
        return "its series or time field is a field buckets hold"
    version = list((steps.db.client.server_info().get("versionArray") or [0, 0])[:2])
    if version < [5, 0]:
        return "$setWindowFields and $setField need MongoDB 5.0"
    if sharding.sharding(steps.db, run.step.collection).sharded:
        return "the collection is sharded: the buckets' insert-only $merge would need its shard key in each bucket"
    locale = (steps.collection_options(run.step.collection).get("collation") or {}).get("locale", "simple")
    if locale != "simple":
        return f"its default collation ({locale}) would group series the client side tells apart"
    return None


class BucketRanges:
    """What both directions of the bucket step inside the server share: the step's run, its stage
    collection, the key its stashes carry, and the changelog field its open range is recorded in."""

    RANGE_FIELD: ClassVar[Literal["bucket_range", "unbucket_range"]]  # the StepState field of the open range
    KEY_SUFFIX: ClassVar[str] = ""  # tells a down's stashes from up's

    def __init__(self, steps: BucketSteps, run: StepRun, outcome: StepOutcome) -> None:
        self.steps, self.run, self.outcome = steps, run, outcome
        self.db = steps.db
        self.collection = self.db[run.step.collection]
        self.stage = stage_name(run.migration_id, run.index)
        self.key = stash_key(run) + self.KEY_SUFFIX

    def _record(self, low: Any, high: Any, phase: str) -> None:
        opened: BucketRange = {"low": low, "high": high, "phase": phase}
        self.steps.changelog.step(self.run.migration_id, self.run.index, **{self.RANGE_FIELD: opened})


class BucketsInServer(BucketRanges):
    """The in-server path of one bucket step's run: ``up``'s pass, and the range a stopped run left open."""

    RANGE_FIELD = "bucket_range"

    def __init__(self, steps: BucketSteps, run: StepRun, outcome: StepOutcome) -> None:
        super().__init__(steps, run, outcome)
        self.time = run.step.params["time_field"]

    # -- passes ----------------------------------------------------------------------------------

    def up(self) -> None:
        """One pass over the readings in time order (from where a stopped run was). What it leaves pending
        (readings inserted behind it or changed while it ran) is the client side's catch-up's, which puts
        them into the room of their window's newest bucket: a pass here would open a new bucket in each
        window for them."""
        if self.run.state.get("first_pass_done"):
            self.settle()
            return
        self._work_indexes()
        total = self.collection.estimated_document_count()
        low, first_pass = self.run.state.get("last_id"), True
        if (open_range := self.run.state.get(self.RANGE_FIELD)) is not None:
            low = open_range["high"]
            first_pass = low is not None  # the open range was the last of the pass
            self.settle()
        if first_pass:
            self.one_pass(low, (total or 0) // self.steps.options.batch_size + 2, total)
        self.db[self.stage].drop()
        self.steps.drop_work_indexes(self.run, self.outcome.stats)
        self.steps.changelog.step(self.run.migration_id, self.run.index, first_pass_done=True)

    def settle(self) -> None:
        """Finish the range a stopped run left open (before ``down``: a reading published but not yet
        deleted is in both shapes, and its bucket's copy may be older than its document)."""
        if (open_range := self.run.state.get(self.RANGE_FIELD)) is not None:
            high = open_range["high"]
            self._checkpoint(self._finish(open_range["low"], high, open_range["phase"]), high, None)
            self.run.state[self.RANGE_FIELD] = None
            self.db[self.stage].drop()  # (a down's own stage, of a down stopped before, is left alone)

    def one_pass(self, low: Any, budget: int, total: int | None) -> int:
        """Ranges from ``low`` on, at most ``budget`` of them; returns the readings moved."""
        moved = self.outcome.stats.get("moved", 0)
        for _range in range(budget):
            found, high = self._range_end(low)
            if not found:
                break
            self._record(low, high, STASH)
            self._checkpoint(self._finish(low, high, STASH), high, total)
            if high is None:
                break
            low = high
        return self.outcome.stats.get("moved", 0) - moved

    def _checkpoint(self, taken: tuple[int, int], high: Any, total: int | None) -> None:
        stashed, moved = taken
        self.outcome.read += stashed
        self.outcome.written += moved
        self.steps.runner.checkpoint(self.run, self.outcome, stashed, moved, high, total, **{self.RANGE_FIELD: None})

    def _range_end(self, low: Any) -> tuple[bool, Any]:
        """Whether a pending reading has a time from ``low`` on, and the end of the range starting there: the
        end of the window of its ``batch_size``-th reading in time order, or None (the rest) when fewer."""
        where = bucket_stages.pending_in(self.run.step, low, None)
        sort = [(self.time, ASCENDING)]
        skip = self.steps.options.batch_size - 1
        for found in self.collection.find(where, {self.time: 1, "_id": 0}, sort=sort, skip=skip, limit=1):
            start = bucket.window_start(found[self.time], self.run.step)
            return True, start + datetime.timedelta(seconds=self.run.step.params["window_seconds"])
        return self.collection.find_one(where, {"_id": 1}) is not None, None

    # -- one range -------------------------------------------------------------------------------

    def _finish(self, low: Any, high: Any, phase: str) -> tuple[int, int]:
        """Take a range from ``phase`` on (a stopped run's range from the phase it was in); returns the
        readings it stashed and those it moved."""
        step, stats = self.run.step, self.outcome.stats
        stashed = 0
        if phase == STASH:
            stashed = self.collection.update_many(
                bucket_stages.pending_in(step, low, high), bucket_stages.stash(self.key)
            ).modified_count
            self.collection.aggregate(
                bucket_stages.staged_buckets(step, self.key, step.collection, self.stage), allowDiskUse=True
            )
            self._record(low, high, STAGED)
            phase = STAGED
        if phase == STAGED:
            self.collection.aggregate(
                bucket_stages.backups(step, self.key, self.run.migration_id, self.run.index, BACKUP)
            )
            self.db[self.stage].aggregate(bucket_stages.publish(step.collection))
            # Deleted by the application before the bucket was there: its pull could not reach the copy.
            count(stats, "deleted_meanwhile", self._pull(present=False))
            self._record(low, high, PUBLISHED)
        # Readings a bucket already there kept out (its _id taken): not deleted, pending again.
        kept_out = [
            ident
            for row in self.db[self.stage].aggregate(bucket_stages.stranded(step.collection))
            for ident in row["ids"]
        ]
        if kept_out:
            self.collection.update_many(
                {"_id": {"$in": kept_out}, bucket_stages.STASHED: self.key}, bucket_stages.unstash()
            )
        deleted = self.collection.delete_many(
            {bucket_stages.STASHED: self.key, **bucket_stages.unchanged_since_stash()}
        ).deleted_count
        count(stats, "moved", deleted)
        # Changed by the application since its stash: its copy is stale; pending again.
        raced = self._pull(present=True)
        if raced:
            count(stats, "conflicts", raced)
        self.collection.update_many({bucket_stages.STASHED: self.key}, bucket_stages.unstash())
        return stashed, deleted

    def _pull(self, present: bool) -> int:
        """Pull out of the stage's buckets the readings whose document is ``present`` (or gone); returns how
        many. Only their ``_id``\\ s travel, and only for readings the application wrote meanwhile."""
        found = list(self.db[self.stage].aggregate(bucket_stages.staged_readings(self.run.step.collection, present)))
        ids = [ident for row in found for ident in row["ids"]]
        if ids:
            self.collection.update_many(
                # $literal: a let variable is an expression, and an _id "$a" would be read as a path.
                {"_id": {"$in": [row["_id"] for row in found]}},
                bucket_stages.pull(),
                let={"ids": {"$literal": ids}},
            )
        return len(ids)

    def _work_indexes(self) -> None:
        """The step's own index (buckets by series and start), and two it works with: readings by time (the
        ranges) and, sparse, the stashed ones (every phase after the stash finds them by it)."""
        stats = self.outcome.stats
        for _collection, keys in bucket.Operation().indexes(self.run.step):
            self.steps.create_own_index(self.run, keys, stats)
        self.steps.create_own_index(self.run, {self.time: 1}, stats, "work_indexes")
        self.steps.create_own_index(self.run, {bucket_stages.STASHED: 1}, stats, "work_indexes", sparse=True)
