"""``down`` of the bucket step computed by the server: buckets back into readings, no reading travelling.

Buckets are taken a range of ``start`` times at a time (about ``batch_size`` readings' worth), each range
through these phases (pipelines in ``operations/bucket_stages.py``), the phase recorded in the changelog
(``unbucket_range``) so that a ``down`` stopped anywhere goes on from it:

1. **stash** (recorded first): one update pipeline keeps each bucket's version in itself;
2. **stage**: an aggregation unpacks the stashed versions into documents (the original kept by ``up``
   where the reading is as ``up`` left it, else the reading with its series) into mongopat's stage
   collection; recorded ``staged``;
3. **publish**: the buckets holding a reading whose backup only the client side can read are unstashed
   (the client side's pass unpacks them), the others' readings written into the collection (``$merge``,
   replacing a document of the same ``_id``); recorded ``published``;
4. **delete**: each bucket still exactly its stash is deleted. A bucket the application changed since is
   left (unstashed) for the next pass, which unpacks it again over the documents written: while a bucket
   exists, it is what its readings are. The documents of readings it held at its stash and holds no more
   (the application deleted them, before their document was there) are deleted.

What the passes leave (buckets still changing, or declined) goes to the client side's ``down``, which
fails the run, as before, if buckets keep changing.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from pymongo import ASCENDING

from mongopat.migrate.bookkeeping import BACKUP
from mongopat.migrate.contracts import StepRun
from mongopat.migrate.operations import bucket_stages
from mongopat.migrate.runner import CATCH_UP_PASSES, StepOutcome, count
from mongopat.migrate.server.bucket_in_server import PUBLISHED, STAGED, STASH, BucketRanges

if TYPE_CHECKING:
    from mongopat.migrate.server.bucket_steps import BucketSteps


class UnbucketInServer(BucketRanges):
    """The in-server ``down`` of one bucket step."""

    RANGE_FIELD = "unbucket_range"
    KEY_SUFFIX = "/down"

    def __init__(self, steps: BucketSteps, run: StepRun, outcome: StepOutcome) -> None:
        super().__init__(steps, run, outcome)
        size = max(1, int(run.step.params["max_bucket_size"]))
        self.buckets_a_range = max(1, steps.options.batch_size // size)

    def down(self) -> None:
        """Passes over the buckets while they unpack any (a stopped ``down``'s open range first)."""
        stats = self.outcome.stats
        self.steps.create_own_index(self.run, {"start": 1}, stats, "work_indexes", sparse=True)
        self.steps.create_own_index(self.run, {bucket_stages.STASHED: 1}, stats, "work_indexes", sparse=True)
        if (open_range := self.run.state.get(self.RANGE_FIELD)) is not None:
            self._finish(open_range["low"], open_range["high"], open_range["phase"])
            self._done()
        for _pass in range(CATCH_UP_PASSES + 1):
            before = stats.get("unpacked", 0)
            self._one_pass()
            if stats.get("unpacked", 0) == before:
                break
        self.db[self.stage].drop()

    def _one_pass(self) -> None:
        low: Any = None
        budget = self.collection.count_documents(bucket_stages.buckets_in(None, None)) // self.buckets_a_range + 1
        for _range in range(budget):
            where = bucket_stages.buckets_in(low, None)
            found = list(
                self.collection.find(
                    where, {"start": 1, "_id": 0}, sort=[("start", ASCENDING)], skip=self.buckets_a_range - 1, limit=1
                )
            )
            if not found and self.collection.find_one(where, {"_id": 1}) is None:
                return
            # Past every bucket of that start: a window's buckets are taken together.
            high = found[0]["start"] + datetime.timedelta(milliseconds=1) if found else None
            self._record(low, high, STASH)
            self._finish(low, high, STASH)
            self._done()
            if high is None:
                return
            low = high

    def _finish(self, low: Any, high: Any, phase: str) -> None:
        step, stats = self.run.step, self.outcome.stats
        if phase == STASH:
            self.collection.update_many(bucket_stages.buckets_in(low, high), bucket_stages.stash(self.key))
            self.collection.aggregate(
                bucket_stages.unpacked_readings(
                    step, self.key, self.run.migration_id, self.run.index, BACKUP, self.stage
                ),
                allowDiskUse=True,
            )
            self._record(low, high, STAGED)
            phase = STAGED
        if phase == STAGED:
            declined = self.db[self.stage].distinct("bucket", {"declined": True})
            if declined:
                # Readings moved by the client side: their backups are bytes; that side unpacks them.
                self.collection.update_many(
                    {"_id": {"$in": declined}, bucket_stages.STASHED: self.key}, bucket_stages.unstash()
                )
            self.db[self.stage].aggregate(bucket_stages.publish_readings(step.collection))
            self._record(low, high, PUBLISHED)
        deleted = self.collection.delete_many(
            {bucket_stages.STASHED: self.key, **bucket_stages.unchanged_since_stash()}
        ).deleted_count
        count(stats, "unpacked", deleted)
        gone = [i for row in self.collection.aggregate(bucket_stages.pulled_since_stash(self.key)) for i in row["ids"]]
        if gone:
            # Deleted by the application (pulled from the bucket) before their document was written.
            self.collection.delete_many({"_id": {"$in": gone}, "readings": {"$exists": False}})
        raced = self.collection.update_many({bucket_stages.STASHED: self.key}, bucket_stages.unstash()).modified_count
        if raced:
            count(stats, "buckets_changed_meanwhile", raced)

    def _done(self) -> None:
        """A range is done: the changelog forgets it (with the figures so far), and the lease is renewed."""
        self.steps.changelog.step(
            self.run.migration_id, self.run.index, stats=self.outcome.stats, **{self.RANGE_FIELD: None}
        )
        self.steps.lock.renew()
