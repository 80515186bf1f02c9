"""The run: apply migrations in order, in batches, with checkpoints, backups, a lock and a changelog.

Document steps read the collection in ``_id`` order, a batch at a time; before a document is rewritten the
version read is kept in ``mongopat_backup``, and the write takes only while the document is still that
version (the application may be writing: see ``document_versions.py``). The changelog records the last ``_id``
of each batch: a crash anywhere leaves a state that ``up`` resumes to the same end. The bucket step
regroups readings in the collection itself (``server_buckets.py``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import bson
from pymongo import ASCENDING, ReplaceOne
from pymongo.errors import BulkWriteError, OperationFailure, PyMongoError

from mongopat.errors import OperationFailed
from mongopat.migrate.bookkeeping import BACKUP, Changelog, Lock, original_name, stage_name
from mongopat.migrate.catalog.server import ServerCatalog
from mongopat.migrate.context_sources import DatabaseDocuments
from mongopat.migrate.document_versions import (
    backup,
    backup_id,
    decoded,
    decoded_id,
    digest,
    keep_backups,
    left_alone,
    original_bytes,
    raw_bytes,
    unchanged_since,
    versions_of,
)
from mongopat.migrate.operations import COLLECTION_OPERATIONS, OPERATIONS, bucket, transform
from mongopat.migrate.runner import (
    CATCH_UP_PASSES,
    CONFLICT_ROUNDS,
    RunnerBase,
    RunOptions,
    StepOutcome,
    count,
)
from mongopat.migrate.script import Migration
from mongopat.migrate.server_buckets import BucketSteps
from mongopat.migrate.server_side_steps import InServerSteps
from mongopat.migrate.steps import Step
from mongopat.migrate.throttling import LagGuard, Throttle, backoff, is_transient
from mongopat.migrate.transform_api import Context, Document, hashable_key

# BSON sort order of _id type brackets: $gt only matches within a bracket, so the scan hops between them.
TYPE_BRACKETS = [
    "minKey",
    "null",
    "number",
    "string",
    "object",
    "array",
    "binData",
    "objectId",
    "bool",
    "date",
    "timestamp",
    "regex",
    "maxKey",
]
PYTHON_BRACKET = {
    "NoneType": "null",
    "int": "number",
    "Int64": "number",
    "float": "number",
    "Decimal128": "number",
    "str": "string",
    "dict": "object",
    "SON": "object",
    "list": "array",
    "bytes": "binData",
    "Binary": "binData",
    "ObjectId": "objectId",
    "bool": "bool",
    "datetime": "date",
    "Timestamp": "timestamp",
    "Regex": "regex",
    "MinKey": "minKey",
    "MaxKey": "maxKey",
}


class Runner(InServerSteps, BucketSteps, RunnerBase):
    """Migrations against one database (pymongo or mongomock)."""

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

    def _catch_up_applied(self, to: str | None, just_applied: set[str]) -> list[dict[str, Any]]:
        """Migrate documents written in the old shape since their migration was applied (an application
        that has not switched yet), in migration order; one result per migration that had some."""
        results = []
        entries = self.changelog.all()
        for migration in self.migrations:
            entry = entries.get(migration.id) or {}
            if migration.id in just_applied or entry.get("state") != "applied":
                if migration.id == to:
                    break
                continue
            migrated = 0
            for index, step in enumerate(migration.steps):
                where = self._pending_filter(migration.id, index, step)
                if where is None or not self.db[step.collection].count_documents(where, limit=1):
                    continue
                state = (entry.get("steps") or [{}] * (index + 1))[index]
                outcome = StepOutcome(stats=dict(state.get("stats") or {}))
                if step.type.kind == "regroup":
                    migrated += self._bucket_catch_up(migration.id, index, step, outcome, {})
                elif state.get("in_server"):
                    migrated += self.in_server_catch_up(migration.id, index, step, outcome)
                else:
                    migrated += self.catch_up(migration.id, index, step, {}, outcome)
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
                if (where := self._pending_filter(migration.id, index, step)) is not None
            )
            if total:
                found[migration.id] = total
        return found

    def count_old_shape(self, migration_id: str, index: int, step: Step) -> int | None:
        where = self._pending_filter(migration_id, index, step)
        return None if where is None else self.db[step.collection].count_documents(where)

    def forget(self, migration_id: str) -> int:
        removed = self.db[BACKUP].delete_many({"_id.m": migration_id}).deleted_count
        steps = len((self.changelog.get(migration_id) or {}).get("steps") or [])
        for index in range(steps):
            self.db[original_name(migration_id, index)].drop()
            self.db[stage_name(migration_id, index)].drop()
        self.changelog.remove(migration_id)
        return removed

    def _pending_filter(self, migration_id: str, index: int, step: Step) -> dict[str, Any] | None:
        """The documents a step leaves in the old shape, or None for steps without one (index and
        collection steps, and buckets rebuilt beside the collection by an earlier mongopat)."""
        if step.type.kind == "document":
            return OPERATIONS[step.name].pending(step)
        if step.type.kind == "regroup" and original_name(migration_id, index) not in self.db.list_collection_names():
            return bucket.pending(step)
        return None

    step_failures = (*RunnerBase.step_failures, PyMongoError)

    def _run_notes(self, entry: dict[str, Any]) -> list[str]:
        notes = [self.lag.note] if self.lag.note else []
        notes.extend(_online_notes(entry.get("steps") or []))
        if self.retried:
            notes.append(f"{self.retried} transient fault(s) retried from the last checkpoint")
        if self.lag.paused:
            notes.append(f"paused {self.lag.paused:.0f} s for replication lag")
        return notes

    def _run_step_retrying(self, migration_id: str, index: int, step: Step) -> StepOutcome:
        """Run a step; on a transient fault (election, network, killed cursor, write conflict) wait and
        resume from the last checkpoint, a bounded number of times. Permanent errors go up at once."""
        attempt = 0
        while True:
            try:
                # Read under the retry too: after a fault the server may still be away when the checkpoint is read.
                state = self._step_state(migration_id, index)
                return self._run_step(migration_id, index, step, state)
            except PyMongoError as error:
                if not is_transient(error) or attempt >= self.options.retries:
                    raise
                attempt += 1
                self.retried += 1
                time.sleep(backoff(attempt, self.options.retry_base))

    def _run_step(self, migration_id: str, index: int, step: Step, state: dict[str, Any]) -> StepOutcome:
        if step.type.kind == "document":
            return self._document_step(migration_id, index, step, state)
        if step.type.kind == "regroup":
            return self._bucket_step(migration_id, index, step, state)
        return self._collection_step(migration_id, index, step, state)

    # -- scanning --------------------------------------------------------------------------------

    def _collection(self, name: str, raw: bool = True) -> Any:
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
        collection = self._collection(name)
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

    # -- document steps --------------------------------------------------------------------------

    def _document_step(self, migration_id: str, index: int, step: Step, state: dict[str, Any]) -> StepOutcome:
        name = step.collection
        # Once per step: a run that stopped before its first checkpoint has created these collections itself.
        if state.get("count_before") is None and not state.get("has_last") and not state.get("ranges"):
            existing = set(self.db.list_collection_names())
            clash = [c for c in step.created_collections() if c in existing]
            if clash:
                raise OperationFailed(f"{step.name} would write into existing collection(s) {', '.join(clash)}")
            self.changelog.step(migration_id, index, count_before=self.db[name].count_documents({}))
        # Indexes of the collections the step creates first: the application reads a subset's full list or
        # an outlier's overflow by parentId from the start, and so do reruns. The collection's own last.
        for collection, keys in OPERATIONS[step.name].indexes(step):
            if collection != step.collection:
                self.db[collection].create_index(list(keys.items()))
        if self.in_server(migration_id, index, step, state):
            outcome = self.in_server_step(migration_id, index, step, state)
            self._finish_document_step(step)
            return outcome
        kept: dict[Any, Any] = {}  # the context's whole-collection reads, for the step's pass (DatabaseDocuments)
        workers = self.options.workers or 1
        if workers > 1 or state.get("ranges"):
            ranges = state.get("ranges") or self._ranges(migration_id, index, name, workers)
            if ranges:
                outcome = self._document_ranges(migration_id, index, step, ranges, kept)
                self.catch_up(migration_id, index, step, kept, outcome)
                self._finish_document_step(step)
                return outcome
        total = self.db[name].estimated_document_count()
        self.throttle.start(state.get("read", 0))
        outcome = StepOutcome(
            read=state.get("read", 0), written=state.get("written", 0), stats=dict(state.get("stats") or {})
        )
        last_id, has_last = state.get("last_id"), state.get("has_last", False)
        budget = (total or 0) // self.options.batch_size + 2  # documents inserted behind it: the catch-up's
        for number, batch in enumerate(self.scan(name, last_id, has_last, None, budget)):
            # The first batch of a run may be one an interrupted run had begun to write.
            last_id, written = self._apply_batch(
                migration_id, index, step, batch, kept, outcome.stats, replay=number == 0
            )
            outcome.read += len(batch)
            outcome.written += written
            self._checkpoint(migration_id, index, outcome, len(batch), written, last_id, total)
        self.catch_up(migration_id, index, step, kept, outcome)
        self._finish_document_step(step)
        return outcome

    def catch_up(self, migration_id: str, index: int, step: Step, kept: dict[Any, Any], outcome: StepOutcome) -> int:
        """Migrate the documents still in the old shape: written by the application behind the scan, or in
        the old shape again since (see :meth:`passes`)."""

        def new_pass() -> None:
            kept.clear()  # documents inserted since: a tree's new nodes have parents the first map lacks

        def apply(batch: list[Any]) -> tuple[Any, int]:
            return self._apply_batch(migration_id, index, step, batch, kept, outcome.stats, replay=True)

        return self.passes(
            migration_id, index, step, outcome, OPERATIONS[step.name].pending(step), "transformed", apply, new_pass
        )

    def passes(
        self,
        migration_id: str,
        index: int,
        step: Step,
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
        ceiling = self.db[step.collection].estimated_document_count() // self.options.batch_size + 2
        for _pass in range(CATCH_UP_PASSES):
            if new_pass is not None:
                new_pass()
            before = outcome.stats.get(done_stat, 0)
            budget = min(self._budget(step.collection, where), ceiling)
            for batch in self.scan(step.collection, None, False, where, budget):
                last, written = apply(batch)
                outcome.read += len(batch)
                outcome.written += written
                self._checkpoint(migration_id, index, outcome, len(batch), written, last, None)
            done = outcome.stats.get(done_stat, 0) - before
            migrated += done
            if not done:
                break
        outcome.stats["caught_up"] = outcome.stats.get("caught_up", 0) + migrated
        outcome.stats["pending_left"] = self.db[step.collection].count_documents(where)
        return migrated

    def _finish_document_step(self, step: Step) -> None:
        for collection, keys in OPERATIONS[step.name].indexes(step):
            if collection == step.collection:
                self.db[collection].create_index(list(keys.items()))

    def _apply_batch(
        self,
        migration_id: str,
        index: int,
        step: Step,
        batch: list[Any],
        kept: dict[Any, Any],
        stats: dict[str, Any],
        replay: bool = False,
    ) -> tuple[Any, int]:
        """Transform the documents of a batch still in the old shape; returns (last _id, documents written).
        ``replay``: the batch may hold documents whose side documents an interrupted run wrote already.

        The application may write at any moment. Each document is rewritten only if it is still the version
        the transform read (compare-and-swap on the whole document); one the application changed in between
        is read again and transformed again, at most ``CONFLICT_ROUNDS`` times; one it deleted stays deleted.
        Before a document is rewritten, the version transformed is kept for ``down`` with a digest of what
        replaced it, so that ``down`` can tell a document left alone since from one the application changed.
        """
        operation = OPERATIONS[step.name]
        read = versions_of(batch)
        last = read[-1][1]["_id"]
        todo = [(raw, doc) for raw, doc in read if operation.is_pending(doc, step)]
        written = 0
        for round_number in range(CONFLICT_ROUNDS + 1):
            if not todo:
                break
            if round_number:
                count(stats, "conflicts", len(todo))
            sent, missed = self._write_versions(
                migration_id, index, step, todo, kept, stats, replay=replay or round_number > 0
            )
            written += sent
            # Every conditional write took (the usual case): no need to read the batch again.
            todo = self._still_pending(step, todo, stats) if missed else []
        if todo:
            count(stats, "conflicts_unresolved", len(todo))  # left pending: the catch-up pass takes them
        return last, written

    def _write_versions(
        self,
        migration_id: str,
        index: int,
        step: Step,
        versions: list[tuple[bytes, Document]],
        kept: dict[Any, Any],
        stats: dict,
        replay: bool,
    ) -> tuple[int, int]:
        """Back up, transform and conditionally write ``versions`` (the current documents, as read and
        decoded); returns the writes sent and how many conditional writes found their document changed (or
        gone)."""
        name = step.collection
        ctx = self._context(step, [doc for _raw_bytes, doc in versions], kept)
        results = []
        kept = []
        for raw, doc in versions:
            result = transform(doc, step, ctx)
            if result.document == doc and not result.side:
                count(stats, "unchanged")  # nothing to do for it (a reference with nothing to copy)
                continue
            results.append((doc, result))
            kept.append(backup(backup_id(migration_id, index, name, doc["_id"]), raw, bson.encode(result.document)))
        if not results:
            return 0, 0
        keep_backups(self.db[BACKUP], kept)
        side: dict[str, list[Document]] = {}
        for _doc, result in results:
            for collection, documents in result.side.items():
                side.setdefault(collection, []).extend(documents)
        written = 0
        for collection, documents in side.items():
            if replay:
                # Side documents of an older version (a lost race, a replayed batch) go first: subset's and
                # outlier's by parent, so that a shorter list leaves none behind; others by their _id.
                if OPERATIONS[step.name].side_collections:
                    self.db[collection].delete_many({"parentId": {"$in": [doc["_id"] for doc, _ in results]}})
                else:
                    self.db[collection].delete_many({"_id": {"$in": [d["_id"] for d in documents]}})
            _insert_ignoring_duplicates(self.db[collection], documents)
            written += len(documents)
        replaces = [ReplaceOne(unchanged_since(doc), result.document) for doc, result in results]
        outcome = self.db[name].bulk_write(replaces, ordered=False)
        count(stats, "transformed", outcome.matched_count)
        return written + len(replaces), len(replaces) - outcome.matched_count

    def _still_pending(
        self, step: Step, versions: list[tuple[bytes, Document]], stats: dict[str, Any]
    ) -> list[tuple[bytes, Document]]:
        """The current versions of these documents that are still in the old shape (their write lost a race
        with the application's); those it deleted meanwhile are counted and their side documents removed."""
        operation = OPERATIONS[step.name]
        ids = [doc["_id"] for _raw_bytes, doc in versions]
        now = {
            hashable_key(doc["_id"]): (raw, doc)
            for raw, doc in versions_of(self._collection(step.collection).find({"_id": {"$in": ids}}))
        }
        gone = [ident for ident in ids if hashable_key(ident) not in now]
        if gone:
            count(stats, "deleted_meanwhile", len(gone))
            for parameter in operation.side_collections:
                self.db[step.params[parameter]].delete_many({"parentId": {"$in": gone}})
        return [(raw, doc) for raw, doc in now.values() if operation.is_pending(doc, step)]

    # -- parallel workers over _id ranges ---------------------------------------------------------

    def _ranges(self, migration_id: str, index: int, name: str, workers: int) -> list[dict[str, Any]] | None:
        """Split the collection into ``workers`` _id ranges of about equal size, recorded in the changelog
        so that a resumed run continues each range from its own checkpoint. None when the collection is too
        small or its _ids are of several types (the single ordered scan handles those)."""
        collection = self.db[name]
        documents = collection.count_documents({})
        if documents < workers * 2:
            return None
        ends = [
            list(collection.find({}, {"_id": 1}, sort=[("_id", direction)], limit=1))[0]["_id"] for direction in (1, -1)
        ]
        bounds = []
        for k in range(1, workers):
            found = list(collection.find({}, {"_id": 1}, sort=[("_id", 1)], skip=k * documents // workers, limit=1))
            if found and (not bounds or found[0]["_id"] != bounds[-1]):
                bounds.append(found[0]["_id"])
        brackets = {PYTHON_BRACKET.get(type(v).__name__) for v in [*ends, *bounds]}
        if len(brackets) != 1 or None in brackets:
            return None
        edges = [None, *bounds, None]
        ranges = [
            {
                "lo": edges[i],
                "hi": edges[i + 1],
                "last_id": None,
                "has_last": False,
                "read": 0,
                "written": 0,
                "stats": {},
            }
            for i in range(len(edges) - 1)
        ]
        self.changelog.step(migration_id, index, ranges=ranges)
        return ranges

    def _range_batches(self, name: str, part: dict[str, Any]) -> Iterator[list[Any]]:
        collection = self._collection(name)
        last_id, has_last = part.get("last_id"), part.get("has_last", False)
        while True:
            condition: dict[str, Any] = {}
            if has_last:
                condition["$gt"] = last_id
            elif part.get("lo") is not None:
                condition["$gte"] = part["lo"]
            if part.get("hi") is not None:
                condition["$lt"] = part["hi"]
            query = {"_id": condition} if condition else {}
            batch = list(collection.find(query, sort=[("_id", ASCENDING)], limit=self.options.batch_size))
            if not batch:
                return
            yield batch
            last_id, has_last = decoded_id(batch[-1]), True

    def _document_ranges(
        self, migration_id: str, index: int, step: Step, ranges: list[dict[str, Any]], kept: dict[Any, Any]
    ) -> StepOutcome:
        """Each range in its own thread, checkpointed separately; the same guarantees as one worker
        (backups first, transforms from the originals, deterministic side documents)."""
        import threading
        from concurrent.futures import ThreadPoolExecutor

        total = self.db[step.collection].estimated_document_count()
        done_lock = threading.Lock()
        done = {"read": sum(r.get("read", 0) for r in ranges)}
        self.throttle.start(done["read"])

        def work(position: int) -> dict[str, Any]:
            part = dict(ranges[position])
            stats = dict(part.get("stats") or {})
            for number, batch in enumerate(self._range_batches(step.collection, part)):
                last_id, written = self._apply_batch(migration_id, index, step, batch, kept, stats, replay=number == 0)
                part.update(
                    last_id=last_id,
                    has_last=True,
                    read=part.get("read", 0) + len(batch),
                    written=part.get("written", 0) + written,
                    stats=stats,
                )
                prefix = f"ranges.{position}."
                self.changelog.checkpoint(
                    migration_id,
                    index,
                    len(batch),
                    written,
                    **{prefix + k: part[k] for k in ("last_id", "has_last", "read", "written", "stats")},
                )
                with done_lock:
                    done["read"] += len(batch)
                    self._after_batch(migration_id, index, done["read"], total)
            return part

        with ThreadPoolExecutor(max_workers=len(ranges)) as pool:
            finished = list(pool.map(work, range(len(ranges))))
        outcome = StepOutcome(read=sum(p["read"] for p in finished), written=sum(p["written"] for p in finished))
        for part in finished:
            for key, value in (part.get("stats") or {}).items():
                outcome.stats[key] = outcome.stats.get(key, 0) + value
        self.changelog.step(migration_id, index, read=outcome.read, written=outcome.written, stats=outcome.stats)
        return outcome

    def _checkpoint(
        self, migration_id: str, index: int, outcome: StepOutcome, read: int, written: int, last: Any, total: int | None
    ) -> None:
        """A batch of a step run by one worker is done: its checkpoint (one changelog update), the lease,
        then pacing and progress."""
        self.changelog.checkpoint(
            migration_id,
            index,
            read,
            written,
            last_id=last,
            has_last=True,
            read=outcome.read,
            written=outcome.written,
            stats=outcome.stats,
        )
        self._after_batch(migration_id, index, outcome.read, total)

    def _after_batch(self, migration_id: str, index: int, done: int, total: int | None = None) -> None:
        """Pacing, progress and the tests' faults, then the lease: renewed after any pause, so that a run
        paused past its lease learns it lost the lock before it writes again."""
        self.throttle.after(done)
        self.lag.wait()
        if self.options.progress is not None:
            self.options.progress(migration_id, index, done, total)
        if self.options.on_batch is not None:
            self.options.on_batch(migration_id, index, done)
        self.lock.renew()

    def _budget(self, name: str, where: dict[str, Any]) -> int:
        """Batches a pass over the documents matching ``where`` may take: as many as match now, and one."""
        return self.db[name].count_documents(where) // self.options.batch_size + 1

    def _context(self, step: Step, originals: list[Document], kept: dict[Any, Any]) -> Context:
        return OPERATIONS[step.name].context(step, originals, DatabaseDocuments(self.db, kept))

    # -- collection steps ------------------------------------------------------------------------

    def _collection_step(self, migration_id: str, index: int, step: Step, state: dict[str, Any]) -> StepOutcome:
        catalog = self._catalog(migration_id, index, state)
        COLLECTION_OPERATIONS[step.name].apply(step, catalog)
        return StepOutcome(catalog.read, catalog.written, catalog.stats)

    def _catalog(self, migration_id: str, index: int, state: dict[str, Any]) -> ServerCatalog:
        return ServerCatalog(self.db, self.changelog, migration_id, index, state, self.scan, self.lock.renew)

    # -- verify ----------------------------------------------------------------------------------

    def verify_migration(self, migration: Migration) -> list[str]:
        entry = self.changelog.get(migration.id) or {}
        problems = []
        for index, step in enumerate(migration.steps):
            state = (entry.get("steps") or [{}] * (index + 1))[index] if entry.get("steps") else {}
            problems.extend(self._verify_step(migration.id, index, step, state))
        return problems

    def _verify_step(self, migration_id: str, index: int, step: Step, state: dict[str, Any]) -> list[str]:
        db, name = self.db, step.collection
        problems: list[str] = []
        stats = state.get("stats") or {}
        if step.type.kind == "document":
            # The application may insert and delete documents: counts before and after say nothing. What must
            # hold is that every document transformed kept its original for down.
            backed = db[BACKUP].count_documents({"_id.m": migration_id, "_id.s": index})
            transformed = stats.get("transformed", 0)
            if backed < transformed:
                problems.append(f"{name}: {transformed - backed} original(s) not kept for rollback")
        elif step.type.kind == "regroup" and original_name(migration_id, index) not in db.list_collection_names():
            problems.extend(self._verify_buckets(migration_id, index, step, stats))
        elif step.type.kind == "regroup":  # rebuilt beside the collection by an earlier mongopat
            kept = original_name(migration_id, index)
            source_count = db[kept].count_documents({})
            total = sum(
                b.get("count", 0)
                for b in db[name].find({"count": {"$exists": True}, "readings": {"$exists": True}}, {"count": 1})
            )
            total += stats.get("passthrough", 0)
            if total != source_count:
                problems.append(f"{name}: buckets hold {total} readings, the original collection {source_count}")
        elif step.type.kind == "collection" and state.get("state") == "applied":
            problems.extend(COLLECTION_OPERATIONS[step.name].verify(step, self._catalog(migration_id, index, state)))
        return problems

    # -- down ------------------------------------------------------------------------------------

    def _before_revert(self, migration: Migration) -> None:
        if migration.python is not None:
            migration.python.down(self.db)

    def _revert_step(self, migration_id: str, index: int, step: Step, state: dict[str, Any]) -> None:
        db, name = self.db, step.collection
        if step.type.kind == "document":
            backups = db[BACKUP]
            query = {"_id.m": migration_id, "_id.s": index}
            unresolved: list[Any] = []
            chunk: list[dict[str, Any]] = []
            for backup in self._collection(BACKUP).find(query):  # as stored: an original's exact bytes
                chunk.append(backup)
                if len(chunk) >= self.options.batch_size:
                    unresolved.extend(self._revert_documents(step, chunk, state))
                    chunk = []
                    self.lock.renew()
            if chunk:
                unresolved.extend(self._revert_documents(step, chunk, state))
            marker = OPERATIONS[step.name].new_shape_marker(step)
            if marker is not None:
                unresolved.extend(self._revert_new_shape(migration_id, index, step, marker, unresolved))
            for created in step.created_collections():
                db[created].drop()
            for collection, keys in OPERATIONS[step.name].indexes(step):
                if collection == name:  # it may never have been created, or be gone already
                    with contextlib.suppress(OperationFailure, PyMongoError, KeyError, ValueError):
                        db[name].drop_index(list(keys.items()))
            if unresolved:
                # Their originals stay kept: the documents are left as the application wrote them.
                keep = [backup_id(migration_id, index, name, ident) for ident in unresolved]
                backups.delete_many({"$and": [query, {"_id": {"$nin": keep}}]})
                shown = ", ".join(repr(ident) for ident in unresolved[:10])
                raise OperationFailed(
                    f"{step.name} on {name}: {len(unresolved)} document(s) changed by the application since up "
                    f"could not be put back in the old shape without losing that change; left as they are: {shown}"
                    + (" ..." if len(unresolved) > 10 else ""),
                    hint="fix them by hand (their originals are kept in mongopat_backup), then run down again",
                )
            backups.delete_many(query)
        elif step.type.kind == "regroup" and original_name(migration_id, index) not in db.list_collection_names():
            self._unbucket_step(migration_id, index, step)
        elif step.type.kind == "regroup":  # rebuilt beside the collection by an earlier mongopat
            kept, stage = original_name(migration_id, index), stage_name(migration_id, index)
            existing = set(db.list_collection_names())
            if kept in existing:
                if name in existing:
                    db[name].drop()
                db[kept].rename(name)
            if stage in set(db.list_collection_names()):
                db[stage].drop()
        elif step.type.kind == "collection":
            COLLECTION_OPERATIONS[step.name].revert(step, self._catalog(migration_id, index, state))

    def _revert_new_shape(self, migration_id: str, index: int, step: Step, marker: str, skip: list[Any]) -> list[Any]:
        """Documents the application wrote in the new shape after ``up`` (no backup: their elements are in
        the side collection ``down`` is about to drop) are merged back by the step's inverse, as a changed
        document is; returns the _ids it could not."""
        side = self.db[step.created_collections()[0]]
        unresolved: list[Any] = []
        query = {marker: {"$exists": True}, **({"_id": {"$nin": skip}} if skip else {})}
        for batch in self.scan(step.collection, None, False, query):
            documents = [decoded(raw) for raw in batch]
            parents = {
                hashable_key(i) for i in side.distinct("parentId", {"parentId": {"$in": [d["_id"] for d in documents]}})
            }
            # Only documents with elements in the side collection: a field of the same name that a document
            # had before up is not the step's.
            chunk = [
                {
                    "_id": backup_id(migration_id, index, step.collection, doc["_id"]),
                    # As if up had transformed it from this document without the marker, and it changed since.
                    "raw": bson.encode({k: v for k, v in doc.items() if k != marker}),
                    "after": b"",
                }
                for doc in documents
                if hashable_key(doc["_id"]) in parents
            ]
            if chunk:
                unresolved.extend(self._revert_documents(step, chunk, {}))
            self.lock.renew()
        return unresolved

    def _revert_documents(self, step: Step, backups: list[dict[str, Any]], state: dict[str, Any]) -> list[Any]:
        """Put a chunk of documents back in the old shape; returns the _ids it could not.

        A document unchanged since ``up`` (its digest is the one ``up`` wrote) gets its original back,
        byte for byte. One the application changed since gets the step's inverse applied to its current
        state. One it deleted stays deleted. Every write is conditional on the version read; a lost race
        is read again, a bounded number of times.
        """
        operation = OPERATIONS[step.name]
        collection = self.db[step.collection]
        originals = {hashable_key(b["_id"]["id"]): b for b in backups}
        ids = [b["_id"]["id"] for b in backups]
        side: dict[Any, list[Document]] = {}
        for parameter in operation.side_collections:
            for item in self.db[step.params[parameter]].find({"parentId": {"$in": ids}}):
                side.setdefault(hashable_key(item["parentId"]), []).append(item)
        unresolved: list[Any] = []
        todo = ids
        for _round in range(CONFLICT_ROUNDS + 1):
            if not todo:
                break
            found = self._collection(step.collection).find({"_id": {"$in": todo}})
            writes, targets, expected = [], {}, {}
            for raw in found:
                current = decoded(raw)
                key = hashable_key(current["_id"])
                backup = originals[key]
                original = bson.decode(original_bytes(backup))
                if backup.get("after") is None or left_alone(raw_bytes(raw), backup):
                    restored: Document | None = original  # left alone since up: the original bytes
                else:
                    restored = operation.inverse(current, original, step, side.get(key, []))
                if restored is None:
                    unresolved.append(current["_id"])
                    continue
                writes.append(ReplaceOne(unchanged_since(current), restored))
                targets[key] = current["_id"]
                expected[key] = digest(bson.encode(restored))
            if not writes:
                break
            result = collection.bulk_write(writes, ordered=False)
            if result.matched_count == len(writes):
                break
            # Some lost a race with the application: those still in the new shape are tried again from the
            # version now stored; one already back in the old shape was restored and written since.
            again = self._collection(step.collection).find({"_id": {"$in": list(targets.values())}})
            todo = [
                targets[key]
                for raw in again
                if digest(raw_bytes(raw)) != expected[key := hashable_key(decoded(raw)["_id"])]
                and not operation.is_pending(decoded(raw), step)
            ]
        return unresolved

    # -- samples -----------------------------------------------------------------------------------

    def _sample_context(self, step: Step, samples: list[Document]) -> Context | None:
        if step.type.kind != "document" or not samples:
            return None
        return self._context(step, samples, {})

    def transformed_sample(self, step: Step, size: int) -> list[Document]:
        """A random sample of a document step's collection as the step would leave it (nothing is written)."""
        if step.type.kind != "document":
            return []
        raw = self._collection(step.collection).aggregate([{"$sample": {"size": size}}])
        samples = [bson.decode(raw_bytes(d)) for d in raw]
        ctx = self._sample_context(step, samples)
        return [transform(sample, step, ctx).document for sample in samples]

    # -- dry run ---------------------------------------------------------------------------------

    def _dry_run(self, migration: Migration) -> dict[str, Any]:
        from mongopat.migrate.preview import dry_run_examples

        steps = []
        for index, step in enumerate(migration.steps):
            collection = self.db[step.collection]
            documents = collection.count_documents({})
            samples = [
                bson.decode(raw_bytes(d))
                for d in self._collection(step.collection).find({}, limit=3, sort=[("_id", 1)])
            ]
            examples = dry_run_examples(step, samples, self._sample_context(step, samples))
            row = {"step": step.name, "collection": step.collection, "documents": documents, "examples": examples}
            if step.type.kind == "collection":
                catalog = self._catalog(migration.id, index, {})
                row.update(examples=[], would=COLLECTION_OPERATIONS[step.name].dry_run(step, catalog))
            steps.append(row)
        return {"id": migration.id, "state": "dry-run", "steps": steps}


def _both(query: dict[str, Any], where: dict[str, Any] | None) -> dict[str, Any]:
    if not where:
        return query
    return {"$and": [query, where]} if query else where


def _insert_ignoring_duplicates(collection: Any, documents: list[Document]) -> None:
    try:
        collection.insert_many(documents, ordered=False)
    except BulkWriteError as exc:
        if any(error.get("code") != 11000 for error in exc.details.get("writeErrors", [])):
            raise


def _online_notes(steps: list[dict[str, Any]]) -> list[str]:
    """What the application's writes during the run cost, per step that met any (from the changelog)."""
    wording = {
        "conflicts": "write(s) lost a race with the application and were redone",
        "deleted_meanwhile": "document(s) deleted by the application before they were written",
        "caught_up": "document(s) written in the old shape during the run, migrated by the catch-up passes",
        "pending_left": "document(s) still in the old shape (the next up migrates them)",
    }
    notes = []
    for position, step in enumerate(steps):
        if step.get("in_server"):
            notes.append(f"step {position + 1} ({step.get('step')}): computed inside the server")
        elif step.get("client_side") and "needs Python" not in step["client_side"]:
            notes.append(f"step {position + 1} ({step.get('step')}): on the client side ({step['client_side']})")
        stats = step.get("stats") or {}
        for key, text in wording.items():
            if stats.get(key):
                notes.append(f"step {position + 1} ({step.get('step')}): {stats[key]} {text}")
    return notes
