"""Migrations on a live server: the backend every kind of step runs on.

The runner holds what the steps share: the database, the changelog and lock in it (``bookkeeping.py``),
the scan in ``_id`` order across BSON type brackets, the catch-up passes, and after each batch the
checkpoint, pacing, replication lag and the lease. Each kind of step runs in a module of its own:
document steps in ``document_steps.py`` (those MongoDB computes itself in ``in_server_steps.py``), the
bucket step in ``bucket_steps.py``, collection steps in ``collection_steps.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import bson
from pymongo import ASCENDING
from pymongo.errors import PyMongoError

from mongopat.migrate.bookkeeping import BACKUP, Changelog, Lock, original_name, stage_name
from mongopat.migrate.contracts import AppliedResult, ChangelogEntry, StepRun, StepState
from mongopat.migrate.runner import (
    CATCH_UP_PASSES,
    RunnerBase,
    RunOptions,
    StepOutcome,
)
from mongopat.migrate.script import Migration
from mongopat.migrate.server.bucket_steps import BucketSteps
from mongopat.migrate.server.catalog import ServerCatalog
from mongopat.migrate.server.collection_steps import CollectionSteps
from mongopat.migrate.server.document_steps import DocumentSteps
from mongopat.migrate.server.document_versions import decoded_id, raw_bytes
from mongopat.migrate.server.steps import PYTHON_BRACKET, TYPE_BRACKETS, ServerSteps
from mongopat.migrate.steps import Step
from mongopat.migrate.throttling import LagGuard, Throttle, backoff, is_transient
from mongopat.migrate.transform_api import Document
from mongopat.predictions import Figures, figures

# Documents whose sizes give a collection's median and 95th percentile after a migration.
MEASURE_SAMPLE = 1000


class Runner(RunnerBase):
    """Migrations against one database (pymongo or mongomock)."""

    changelog: Changelog
    kinds: Mapping[str, ServerSteps]

    def __init__(self, db: Any, migrations: list[Migration], options: RunOptions | None = None) -> None:
        self.db = db
        self.migrations = migrations
        self.options = options or RunOptions()
        self.changelog = Changelog(db)
        self.lock = Lock(db, self.options.lease_seconds)
        self.throttle = Throttle(self.options.max_docs_per_sec)
        client = getattr(db, "client", None)
        self.lag = LagGuard(client.admin if client is not None else None, self.options.max_lag)
        self.retried = 0
        self.kinds: dict[str, ServerSteps] = {
            "document": DocumentSteps(self),
            "regroup": BucketSteps(self),
            "collection": CollectionSteps(self),
        }

    def kind(self, step: Step) -> ServerSteps:
        return self.kinds[step.type.kind]

    def _catch_up_applied(self, to: str | None, just_applied: set[str]) -> list[AppliedResult]:
        """Migrate documents written in the old shape since their migration was applied (an application
        that has not switched yet), in migration order; one result per migration that had some."""
        results: list[AppliedResult] = []
        entries = self.changelog.all()
        for migration in self.migrations:
            entry = entries.get(migration.id) or {}
            if migration.id in just_applied or entry.get("state") != "applied":
                if migration.id == to:
                    break
                continue
            migrated = 0
            for index, step in enumerate(migration.steps):
                kind = self.kind(step)
                run = StepRun(migration.id, index, step)
                where = kind.pending_filter(run)
                if where is None or not self.db[step.collection].count_documents(where, limit=1):
                    continue
                state = (entry.get("steps") or [{}] * (index + 1))[index]
                outcome = StepOutcome(stats=dict(state.get("stats") or {}))
                migrated += kind.catch_up(run.with_state(state), outcome)
                self.changelog.step(migration.id, index, stats=outcome.stats)
            if migrated:
                results.append(
                    {
                        "id": migration.id,
                        "state": "caught-up",
                        "read": migrated,
                        "written": migrated,
                        "duration_s": None,
                        "notes": [f"{migrated} document(s) written in the old shape since it was applied, migrated"],
                    }
                )
            if migration.id == to:
                break
        return results

    def pending_documents(self) -> dict[str, int]:
        """Per applied migration, documents still in the old shape (an application writing the old shape)."""
        entries = self.changelog.all()
        found = {}
        for migration in self.migrations:
            if (entries.get(migration.id) or {}).get("state") != "applied":
                continue
            total = sum(
                self.db[step.collection].count_documents(where)
                for index, step in enumerate(migration.steps)
                if (where := self.kind(step).pending_filter(StepRun(migration.id, index, step))) is not None
            )
            if total:
                found[migration.id] = total
        return found

    def forget(self, migration_id: str) -> int:
        removed = self.db[BACKUP].delete_many({"_id.m": migration_id}).deleted_count
        steps = len((self.changelog.get(migration_id) or {}).get("steps") or [])
        for index in range(steps):
            self.db[original_name(migration_id, index)].drop()
            self.db[stage_name(migration_id, index)].drop()
        self.changelog.remove(migration_id)
        return removed

    step_failures = (*RunnerBase.step_failures, PyMongoError)

    def _run_notes(self, entry: ChangelogEntry) -> list[str]:
        notes = [self.lag.note] if self.lag.note else []
        notes.extend(_online_notes(entry.get("steps") or []))
        if self.retried:
            notes.append(f"{self.retried} transient fault(s) retried from the last checkpoint")
        if self.lag.paused:
            notes.append(f"paused {self.lag.paused:.0f} s for replication lag")
        return notes

    def _run_step_retrying(self, run: StepRun) -> StepOutcome | None:
        """Run a step; on a transient fault (election, network, killed cursor, write conflict) wait and
        resume from the last checkpoint, a bounded number of times. Permanent errors go up at once."""
        attempt = 0
        while True:
            try:
                # Read under the retry too: after a fault the server may still be away when the checkpoint is read.
                return self._run_step(run.with_state(self.step_state(run.migration_id, run.index)))
            except PyMongoError as error:
                if not is_transient(error) or attempt >= self.options.retries:
                    raise
                attempt += 1
                self.retried += 1
                time.sleep(backoff(attempt, self.options.retry_base))

    # -- scanning --------------------------------------------------------------------------------

    def raw_collection(self, name: str, raw: bool = True) -> Any:
        collection = self.db[name]
        if raw:
            try:
                from bson.codec_options import CodecOptions
                from bson.raw_bson import RawBSONDocument

                return collection.with_options(codec_options=CodecOptions(document_class=RawBSONDocument))
            except NotImplementedError:  # mongomock: plain dicts
                return collection
        return collection

    def scan(
        self,
        name: str,
        last_id: Any,
        has_last: bool,
        where: dict[str, Any] | None = None,
        budget: int | None = None,
    ) -> Iterator[list[Any]]:
        """Batches of documents (matching ``where``) in ``_id`` order after ``last_id``, hopping across _id
        type brackets; at most ``budget`` batches (an application inserting faster than a pass reads must not
        keep the pass going forever: what it adds meanwhile is the next pass's)."""
        collection = self.raw_collection(name)
        size = self.options.batch_size
        while budget is None or budget > 0:
            if budget is not None:
                budget -= 1
            query = _both({"_id": {"$gt": last_id}} if has_last else {}, where)
            batch = list(collection.find(query, sort=[("_id", ASCENDING)], limit=size))
            if not batch and has_last:
                batch = self._next_bracket(collection, last_id, size, where)
            if not batch:
                return
            yield batch
            last_id, has_last = decoded_id(batch[-1]), True

    def _next_bracket(self, collection: Any, last_id: Any, size: int, where: dict[str, Any] | None = None) -> list[Any]:
        bracket = PYTHON_BRACKET.get(type(last_id).__name__)
        if bracket is None:
            return []
        for later in TYPE_BRACKETS[TYPE_BRACKETS.index(bracket) + 1 :]:
            try:
                query = _both({"_id": {"$type": later}}, where)
                batch = list(collection.find(query, sort=[("_id", ASCENDING)], limit=size))
            except NotImplementedError:  # mongomock lacks some $type names (timestamp); MongoDB has them all
                continue
            if batch:
                return batch
        return []

    def passes(
        self,
        run: StepRun,
        outcome: StepOutcome,
        where: dict[str, Any],
        done_stat: str,
        apply: Callable[[list[Any]], tuple[Any, int]],
        new_pass: Callable[[], None] | None = None,
    ) -> int:
        """Passes over the documents matching ``where`` (the step's pending filter), each batch given to
        ``apply`` (returns the last ``_id`` and the writes sent): at most ``CATCH_UP_PASSES``, and a pass that
        migrates nothing (``done_stat`` does not grow) ends them. What is left is counted in ``pending_left``;
        returns the documents migrated."""
        migrated = 0
        # A pass reads at most what the scan read: behind an application that inserts faster than mongopat
        # migrates, the passes end all the same, and the next up goes on.
        ceiling = self.db[run.step.collection].estimated_document_count() // self.options.batch_size + 2
        for _pass in range(CATCH_UP_PASSES):
            if new_pass is not None:
                new_pass()
            before = outcome.stats.get(done_stat, 0)
            budget = min(self._budget(run.step.collection, where), ceiling)
            for batch in self.scan(run.step.collection, None, False, where, budget):
                last, written = apply(batch)
                outcome.read += len(batch)
                outcome.written += written
                self.checkpoint(run, outcome, len(batch), written, last, None)
            done = outcome.stats.get(done_stat, 0) - before
            migrated += done
            if not done:
                break
        outcome.stats["caught_up"] = outcome.stats.get("caught_up", 0) + migrated
        outcome.stats["pending_left"] = self.db[run.step.collection].count_documents(where)
        return migrated

    def checkpoint(
        self,
        run: StepRun,
        outcome: StepOutcome,
        read: int,
        written: int,
        last: Any,
        total: int | None,
        **fields: Any,
    ) -> None:
        """A batch of a step run by one worker is done: its checkpoint (one changelog update, with the
        step's own ``fields``), the lease, then pacing and progress."""
        self.changelog.checkpoint(
            run.migration_id,
            run.index,
            read,
            written,
            last_id=last,
            has_last=True,
            read=outcome.read,
            written=outcome.written,
            stats=outcome.stats,
            **fields,
        )
        self.after_batch(run, outcome.read, total)

    def after_batch(self, run: StepRun, done: int, total: int | None = None) -> None:
        """Pacing, progress and the tests' faults, then the lease: renewed after any pause, so that a run
        paused past its lease learns it lost the lock before it writes again."""
        self.throttle.after(done)
        self.lag.wait()
        if self.options.progress is not None:
            self.options.progress(run.migration_id, run.index, done, total)
        if self.options.on_batch is not None:
            self.options.on_batch(run.migration_id, run.index, done)
        self.lock.renew()

    def _budget(self, name: str, where: dict[str, Any]) -> int:
        """Batches a pass over the documents matching ``where`` may take: as many as match now, and one."""
        return self.db[name].count_documents(where) // self.options.batch_size + 1

    def catalog(self, run: StepRun) -> ServerCatalog:
        return ServerCatalog(
            self.db, self.changelog, run.migration_id, run.index, run.state, self.scan,
            lambda done: self.after_batch(run, done), self.options.batch_size,
        )  # fmt: skip

    # -- down ------------------------------------------------------------------------------------

    def _before_revert(self, migration: Migration) -> None:
        if migration.python is not None:
            migration.python.down(self.db)

    # -- samples and dry run --------------------------------------------------------------------

    def transformed_sample(self, step: Step, size: int) -> list[Document]:
        """A random sample of a document step's collection as the step would leave it (nothing is written)."""
        return self.kind(step).transformed_sample(step, size)

    def _first_documents(self, collection: str, size: int) -> list[Document]:
        found = self.raw_collection(collection).find({}, limit=size, sort=[("_id", 1)])
        return [bson.decode(raw_bytes(d)) for d in found]

    def _count(self, collection: str) -> int:
        return self.db[collection].count_documents({})

    def exists(self, collection: str) -> bool:
        return collection in self.db.list_collection_names()

    def measure(self, collection: str) -> Figures:
        """Counted and summed inside the server (``$bsonSize``, MongoDB 4.4+); document sizes from a
        ``$sample`` of :data:`MEASURE_SAMPLE`. A server without ``$bsonSize`` has its documents read."""
        size = {"s": {"$bsonSize": "$$ROOT"}}
        try:
            totals = list(
                self.db[collection].aggregate(
                    [{"$project": {"_id": 0, **size}}, {"$group": {"_id": None, "n": {"$sum": 1}, "b": {"$sum": "$s"}}}]
                )
            )
            sizes = sorted(
                int(d["s"])
                for d in self.db[collection].aggregate(
                    [{"$sample": {"size": MEASURE_SAMPLE}}, {"$project": {"_id": 0, **size}}]
                )
            )
            documents, data = (int(totals[0]["n"]), int(totals[0]["b"])) if totals else (0, 0)
        except PyMongoError:
            sizes = sorted(len(raw_bytes(d)) for d in self.raw_collection(collection).find({}))
            documents, data = len(sizes), sum(sizes)
        return figures(sizes, documents, data)


def _both(query: dict[str, Any], where: dict[str, Any] | None) -> dict[str, Any]:
    if not where:
        return query
    return {"$and": [query, where]} if query else where


def _online_notes(steps: list[StepState]) -> list[str]:
    """What the application's writes during the run cost, per step that met any (from the changelog)."""
    wording = {
        "conflicts": "write(s) lost a race with the application and were redone",
        "deleted_meanwhile": "document(s) deleted by the application before they were written",
        "caught_up": "document(s) written in the old shape during the run, migrated by the catch-up passes",
        "ended_at_chunks": "range(s) ended where the collection's chunks pass to another shard",
        "threads_at_once": "thread(s) took stretches of _id at once (a shard's each, where the chunks lie on several)",
        "pending_left": "document(s) still in the old shape (the next up migrates them)",
    }
    notes = []
    for position, step in enumerate(steps):
        if step.get("in_server"):
            # A sharded side collection: what its $merge matched on (server/sharding.py).
            merged = "; ".join(
                f"{into} sharded, merged on {', '.join(on)}" for into, on in (step.get("merge_on") or {}).items()
            )
            notes.append(
                f"step {position + 1} ({step.get('step')}): computed inside the server"
                + (f" ({merged})" if merged else "")
            )
        elif (why := step.get("client_side")) and "needs Python" not in why:
            notes.append(f"step {position + 1} ({step.get('step')}): on the client side ({why})")
        stats = step.get("stats") or {}
        for key, text in wording.items():
            if stats.get(key):
                notes.append(f"step {position + 1} ({step.get('step')}): {stats[key]} {text}")
    return notes
