"""The bucket step on a live server: readings move into buckets in the collection itself, and back.

``up`` takes the pending readings a batch at a time, in ``_id`` order: it keeps each reading's bytes in
``mongopat_backup``, pushes the readings into their buckets (upserts with deterministic ``_id``s), then
deletes each reading only while it is still the version pushed. A reading the application changed in
between is pulled out of its bucket again and stays pending; one it deleted is pulled out too. Readings the
application inserts meanwhile are pending documents for the catch-up passes. A crash anywhere leaves
readings that are either pending (pushed again after their stale copies are pulled) or moved.

``down`` does the reverse: it writes every reading of a bucket back as a document (its original bytes when
the reading is the one ``up`` moved, untouched since) and deletes the bucket only while it is still the
version unpacked; a bucket the application pushed into or pulled from meanwhile is unpacked again.

While either runs, the application sees both shapes (the schema versioning pattern): it reads readings and
buckets, inserts readings in either shape, and changes or deletes a reading in both (by ``_id``, and by
``readings._id`` in its bucket). See the README's "Migrating while the application writes".
"""

from __future__ import annotations

from typing import Any

import bson
from pymongo import ASCENDING, DeleteOne, ReplaceOne
from pymongo.errors import BulkWriteError

from mongopat.errors import OperationFailed
from mongopat.migrate.bookkeeping import BACKUP, original_name, stage_name
from mongopat.migrate.contracts import StepRun
from mongopat.migrate.document_batches import Version, conflict_rounds
from mongopat.migrate.operations import STEP_OPERATIONS, bucket
from mongopat.migrate.runner import CATCH_UP_PASSES, StepOutcome, count
from mongopat.migrate.server.bucket_in_server import BucketsInServer, client_side_because
from mongopat.migrate.server.document_versions import (
    backup,
    backup_id,
    decoded,
    decoded_id,
    keep_backups,
    left_alone,
    original_bytes,
    step_backups,
    unchanged_since,
    versions_of,
)
from mongopat.migrate.server.steps import ServerSteps
from mongopat.migrate.server.unbucket_in_server import UnbucketInServer
from mongopat.migrate.steps import Step
from mongopat.migrate.transform_api import Document

# Windows whose newest bucket (sequence and fill) the run keeps: buckets being filled are usually the same
# from one batch to the next. Bounded: forgetting only costs a read.
_SEQUENCE_CACHE = 10_000


class BucketSteps(ServerSteps):
    """The bucket step on a live server (and ``down`` or ``verify`` of one that an earlier mongopat ran by
    rebuilding the collection beside it, keeping the original under another name)."""

    def _rebuilt_beside(self, migration_id: str, index: int) -> bool:
        return original_name(migration_id, index) in self.db.list_collection_names()

    def run(self, run: StepRun) -> StepOutcome:
        if not self.in_server(run):
            return self._bucket_step(run)
        outcome = self._outcome(run)
        self.throttle.start(outcome.read)
        BucketsInServer(self, run, outcome).up()
        self._after_up(run, outcome)
        return outcome

    def in_server(self, run: StepRun) -> bool:
        """Whether the step runs inside the server (``bucket_in_server.py``); decided once and kept in the
        changelog, so that a resumed run goes on the way it began."""
        if run.state.get("in_server") is not None:
            return bool(run.state["in_server"])
        if run.state.get("phase") or self._rebuilt_beside(run.migration_id, run.index):
            return False  # an earlier mongopat's run: _bucket_step says so
        why = client_side_because(self, run)
        self.changelog.step(run.migration_id, run.index, in_server=why is None, client_side=why)
        run.state["in_server"], run.state["client_side"] = why is None, why
        return why is None

    def pending_filter(self, run: StepRun) -> dict[str, Any] | None:
        return None if self._rebuilt_beside(run.migration_id, run.index) else bucket.pending(run.step)

    def catch_up(self, run: StepRun, outcome: StepOutcome) -> int:
        if run.state.get("in_server"):
            BucketsInServer(self, run, outcome).settle()  # a range a stopped run left open
        # Readings written in the old shape since: into the room of their window's newest bucket.
        return self._bucket_catch_up(run, outcome, bucket.BucketFill(run.step.params["max_bucket_size"]))

    def verify(self, run: StepRun) -> list[str]:
        stats = run.state.get("stats") or {}
        if not self._rebuilt_beside(run.migration_id, run.index):
            return self.missing_indexes(run) + self._verify_buckets(run, stats)
        source_count = self.db[original_name(run.migration_id, run.index)].count_documents({})
        in_buckets = {"count": {"$exists": True}, "readings": {"$exists": True}}
        total = sum(b.get("count", 0) for b in self.db[run.step.collection].find(in_buckets, {"count": 1}))
        total += stats.get("passthrough", 0)
        if total != source_count:
            return [f"{run.step.collection}: buckets hold {total} readings, the original collection {source_count}"]
        return []

    def revert(self, run: StepRun) -> None:
        if not self._rebuilt_beside(run.migration_id, run.index):
            stats = dict(run.state.get("stats") or {})
            if run.state.get("in_server"):
                outcome = StepOutcome(run.state.get("read", 0), run.state.get("written", 0), stats)
                BucketsInServer(self, run, outcome).settle()
                if not self.options.client_side:
                    UnbucketInServer(self, run, outcome).down()
                self.drop_work_indexes(run, stats)
            self._unbucket_step(run, stats)
            return
        db, name = self.db, run.step.collection
        kept, stage = original_name(run.migration_id, run.index), stage_name(run.migration_id, run.index)
        if name in db.list_collection_names():
            db[name].drop()
        db[kept].rename(name)
        if stage in set(db.list_collection_names()):
            db[stage].drop()

    # -- up --------------------------------------------------------------------------------------

    def _bucket_step(self, run: StepRun) -> StepOutcome:
        name = run.step.collection
        if run.state.get("phase"):
            raise OperationFailed(
                f"bucket on {name}: this step was started by an earlier mongopat that rebuilt the collection beside it",
                hint="finish or roll it back with that version, then run this one",
            )
        outcome = self._outcome(run)
        # Reads of one series over a time range, in both shapes, during the transition and after.
        for _collection, keys in STEP_OPERATIONS[run.step.name].indexes(run.step):
            self.create_own_index(run, keys, outcome.stats)
        fill = bucket.BucketFill(run.step.params["max_bucket_size"])
        where = bucket.pending(run.step)
        total = self.db[name].estimated_document_count()
        self.throttle.start(outcome.read)
        last_id, has_last = run.state.get("last_id"), run.state.get("has_last", False)
        budget = (total or 0) // self.options.batch_size + 2
        for number, batch in enumerate(self.runner.scan(name, last_id, has_last, where, budget)):
            last_id = decoded_id(batch[-1])
            written = self._move_readings(run, batch, outcome.stats, fill, number == 0)
            outcome.read += len(batch)
            outcome.written += written
            self.runner.checkpoint(run, outcome, len(batch), written, last_id, total)
        self._after_up(run, outcome)
        return outcome

    def _outcome(self, run: StepRun) -> StepOutcome:
        """The step's figures so far (a resumed run's from its changelog), the count before it first began."""
        if run.state.get("count_before") is None and not run.state.get("has_last"):
            count_before = self.db[run.step.collection].count_documents({})
            self.changelog.step(run.migration_id, run.index, count_before=count_before)
        return StepOutcome(
            read=run.state.get("read", 0), written=run.state.get("written", 0), stats=dict(run.state.get("stats") or {})
        )

    def _after_up(self, run: StepRun, outcome: StepOutcome) -> None:
        """The catch-up of this side (every pending reading on the client side; on the server's path what its
        passes leave), then the documents that are no reading."""
        self._bucket_catch_up(run, outcome, bucket.BucketFill(run.step.params["max_bucket_size"]))
        outcome.stats["passthrough"] = (
            self.db[run.step.collection].count_documents({"readings": {"$exists": False}})
            - outcome.stats["pending_left"]
        )

    def _bucket_catch_up(self, run: StepRun, outcome: StepOutcome, fill: bucket.BucketFill) -> int:
        """Readings still pending after the scan (inserted behind it, or whose move lost a race)."""

        def apply(batch: list[Any]) -> tuple[Any, int]:
            written = self._move_readings(run, batch, outcome.stats, fill, True)
            return decoded_id(batch[-1]), written

        return self.runner.passes(run, outcome, bucket.pending(run.step), "moved", apply)

    def _move_readings(
        self,
        run: StepRun,
        batch: list[Any],
        stats: dict[str, Any],
        fill: bucket.BucketFill,
        replay: bool,
    ) -> int:
        """Move a batch of readings into their buckets; returns the writes sent. ``replay``: an interrupted
        run may have pushed some of them already (their copies are pulled out before they are pushed).

        A move is a push of the readings (after their backups), then the delete of each reading only while
        it is still the version pushed; one the application changed or deleted in between is pulled out of
        its bucket again, and one still pending is moved again in the next round
        (``document_batches.conflict_rounds``)."""
        collection = self.db[run.step.collection]
        placed: dict[Any, tuple[Any, Any]] = {}  # reading -> (its _id, the bucket it was pushed into)
        pulled = 0  # the pulls of stale copies, sent while reading again

        def move(todo: list[Version], again: bool) -> tuple[int, list[Version]]:
            written = self._pull_copies(run.step, [doc for _raw, doc in todo]) if replay or again else 0
            keep_backups(
                self.db[BACKUP],
                [
                    backup(
                        backup_id(run.migration_id, run.index, run.step.collection, doc["_id"]),
                        raw or b"",  # read as raw BSON: never None on a server
                        bson.encode(bucket.entry(doc, run.step)),
                    )
                    for raw, doc in todo
                ],
            )
            placed.update(self._push(run.step, [doc for _raw, doc in todo], fill))
            written += len(todo)
            ids = [doc["_id"] for _raw, doc in todo]
            present = {_key(d["_id"]) for d in collection.find({"_id": {"$in": ids}}, {"_id": 1})}
            # Deleted by the application before the push: its delete could not reach the copy just pushed.
            gone = [doc["_id"] for _raw, doc in todo if _key(doc["_id"]) not in present]
            if gone:
                count(stats, "deleted_meanwhile", len(gone))
                written += self._pull(run.step, [placed[_key(i)] for i in gone])
            todo = [Version(raw, doc) for raw, doc in todo if _key(doc["_id"]) in present]
            if not todo:
                return written, []
            result = collection.bulk_write([DeleteOne(unchanged_since(doc)) for _raw, doc in todo], ordered=False)
            written += len(todo)
            count(stats, "moved", result.deleted_count)
            return written, [] if result.deleted_count == len(todo) else todo

        def current(missed: list[Version]) -> list[Version]:
            nonlocal pulled
            # Changed by the application after they were read: their copies are stale. Those still there are
            # pulled out (pending or not); those gone were deleted after the check above, by an application
            # that also pulls them from their bucket.
            now = versions_of(collection.find({"_id": {"$in": [doc["_id"] for _raw, doc in missed]}}))
            pulled += self._pull(run.step, [placed[_key(doc["_id"])] for _raw, doc in now])
            return now

        pending = [version for version in versions_of(batch) if bucket.is_pending(version.document, run.step)]
        moved, left = conflict_rounds(pending, move, current, lambda doc: bucket.is_pending(doc, run.step), stats)
        if left:
            count(stats, "conflicts_unresolved", len(left))  # pending still: the catch-up passes take them
        return moved + pulled

    def _push(self, step: Step, readings: list[Document], fill: bucket.BucketFill) -> dict[Any, tuple[Any, Any]]:
        """Push readings into the buckets :class:`~mongopat.migrate.operations.bucket.BucketFill` places
        them in, one update per bucket; returns, per reading (by :func:`_key` of its ``_id``), the pair
        (reading ``_id``, bucket ``_id``)."""
        window_of = {_key(doc["_id"]): bucket.window_of(doc, step) for doc in readings}
        key_of = {ident: _key(window) for ident, window in window_of.items()}
        windows = {key_of[ident]: window for ident, window in window_of.items()}
        self._learn_sequences(step, [w for key, w in windows.items() if key not in fill.open], fill)
        placed: dict[Any, tuple[Any, Any]] = {}
        todo = readings
        while todo:
            by_window: dict[bytes, list[Document]] = {}
            for doc in todo:
                by_window.setdefault(key_of[_key(doc["_id"])], []).append(doc)
            targets: list[tuple[tuple[bytes, int], list[Document]]] = []
            for window, docs in by_window.items():
                taken = 0
                for sequence, size in fill.place(window, len(docs)):
                    targets.append(((window, sequence), docs[taken : taken + size]))
                    taken += size
            full: set[int] = set()
            try:
                self.db[step.collection].bulk_write(
                    [bucket.push(docs, step, sequence) for (_window, sequence), docs in targets], ordered=False
                )
            except BulkWriteError as exc:
                errors = exc.details.get("writeErrors", [])
                if any(error.get("code") != 11000 for error in errors):
                    raise
                full = {error["index"] for error in errors}
            todo = []
            for position, ((window, sequence), docs) in enumerate(targets):
                if position in full:
                    # The bucket has no room for them all (the application pushed into it): the next one.
                    fill.full(window, sequence)
                    todo.extend(docs)
                    continue
                series, start = window_of[_key(docs[0]["_id"])]
                for doc in docs:
                    placed[_key(doc["_id"])] = (doc["_id"], bucket.bucket_id(series, start, sequence))
        if len(fill.open) > _SEQUENCE_CACHE:
            fill.forget()
        return placed

    def _learn_sequences(self, step: Step, windows: list[tuple[Any, Any]], fill: bucket.BucketFill) -> None:
        """The newest bucket (sequence, count) of each window not seen yet, in one read."""
        if not windows:
            return
        series_key = step.params["series_key"]
        for window in windows:
            fill.seed(_key(window), 0, 0)
        query = {"$or": [{series_key: series, "start": start} for series, start in windows], **bucket.buckets_filter()}
        for found in self.db[step.collection].find(query, {"_id": 1, "count": 1}):
            if not (isinstance(found["_id"], dict) and isinstance(found["_id"].get("n"), int)):
                continue  # a bucket the application created, with an _id of its own
            key = _key((found["_id"].get("s"), found["_id"].get("w")))
            if key in fill.open:
                fill.seed(key, found["_id"]["n"], found.get("count", 0))

    def _pull(self, step: Step, placed: list[tuple[Any, Any]]) -> int:
        """Pull readings ((reading ``_id``, bucket ``_id``) pairs) out of the buckets they were pushed into."""
        operations = [bucket.pull(target, reading_id) for reading_id, target in placed]
        if operations:
            self.db[step.collection].bulk_write(operations, ordered=False)
        return len(operations)

    def _pull_copies(self, step: Step, readings: list[Document]) -> int:
        """Pull any copy of these readings out of the buckets of their windows (a replayed batch)."""
        series_key = step.params["series_key"]
        query = {
            "$or": [
                {series_key: series, "start": start}
                for series, start in {
                    _key(bucket.window_of(d, step)): bucket.window_of(d, step) for d in readings
                }.values()
            ],
            "readings._id": {"$in": [d["_id"] for d in readings]},
        }
        wanted = {_key(d["_id"]) for d in readings}
        placed = [
            (item["_id"], found["_id"])
            for found in self.db[step.collection].find(query, {"_id": 1, "readings._id": 1})
            for item in found.get("readings") or []
            if _key(item.get("_id")) in wanted
        ]
        return self._pull(step, placed)

    # -- down ------------------------------------------------------------------------------------

    def _unbucket_step(self, run: StepRun, stats: dict[str, Any]) -> None:
        """Every bucket back into readings (passes until none is left); buckets the application kept
        changing past the conflict rounds are left, listed, and the run fails."""
        name = run.step.collection
        size = max(1, self.options.batch_size // max(1, run.step.params["max_bucket_size"]))
        unresolved: list[Any] = []
        for _pass in range(CATCH_UP_PASSES + 1):
            unresolved = []
            budget = self.db[name].count_documents(bucket.buckets_filter()) // size + 1
            for batch in self._bucket_batches(name, size, budget, unresolved):
                unresolved.extend(self._unpack(run, batch))
                self.lock.renew()
            if not self.db[name].count_documents(bucket.buckets_filter(), limit=1):
                break
        left = self.db[name].count_documents(bucket.buckets_filter())
        if left:
            shown = ", ".join(repr(i) for i in unresolved[:5])
            raise OperationFailed(
                f"bucket on {name}: {left} bucket(s) kept changing while they were unpacked; left as they are"
                + (f": {shown}" if shown else ""),
                hint="run 'mongopat migrate down' again (readings already unpacked are not duplicated)",
            )
        query = step_backups(run.migration_id, run.index)
        self.db[BACKUP].delete_many(query)
        self.drop_own_indexes(run.step, stats)

    def _bucket_batches(self, name: str, size: int, budget: int, skip: list[Any]) -> Any:
        """Batches of buckets; each batch is gone once unpacked, so the next is again the first ones left
        (but those in ``skip``, still changing)."""
        query = {**bucket.buckets_filter(), **({"_id": {"$nin": skip}} if skip else {})}
        for _ in range(budget):
            batch = [decoded(b) for b in self.db[name].find(query, sort=[("_id", ASCENDING)], limit=size)]
            if not batch:
                return
            yield batch

    def _unpack(self, run: StepRun, buckets: list[Document]) -> list[Any]:
        """Write the readings of these buckets back as documents, then delete each bucket only while it is
        the version unpacked (``document_batches.conflict_rounds``); returns the _ids of buckets still
        changing after the rounds."""
        collection = self.db[run.step.collection]
        ids = [item["_id"] for b in buckets for item in b.get("readings") or []]
        backups = {
            _key(found["_id"]["id"]): found
            for found in self.db[BACKUP].find(
                {"_id": {"$in": [backup_id(run.migration_id, run.index, run.step.collection, i) for i in ids]}}
            )
        }
        written: dict[Any, dict[Any, Any]] = {}  # bucket -> readings written from it (hashable _id -> _id)

        def unpack(todo: list[Version], again: bool) -> tuple[int, list[Version]]:
            writes = []
            for b in (version.document for version in todo):
                from_bucket = written.setdefault(_key(b["_id"]), {})
                for item in b.get("readings") or []:
                    writes.append(
                        ReplaceOne({"_id": item["_id"]}, _as_document(item, b, run.step, backups), upsert=True)
                    )
                    from_bucket[_key(item["_id"])] = item["_id"]
            if writes:
                collection.bulk_write(writes, ordered=False)
            bucket_ids = [version.document["_id"] for version in todo]
            present = {_key(d["_id"]) for d in collection.find({"_id": {"$in": bucket_ids}}, {"_id": 1})}
            for b in (version.document for version in todo):
                if _key(b["_id"]) not in present:
                    # The application deleted the whole bucket before its readings were written back.
                    self._delete_readings(run.step, [item["_id"] for item in b.get("readings") or []])
            todo = [version for version in todo if _key(version.document["_id"]) in present]
            if not todo:
                return len(writes), []
            result = collection.bulk_write([DeleteOne(unchanged_since(v.document)) for v in todo], ordered=False)
            return len(writes) + len(todo), [] if result.deleted_count == len(todo) else todo

        def current(missed: list[Version]) -> list[Version]:
            now = [decoded(found) for found in collection.find({"_id": {"$in": [v.document["_id"] for v in missed]}})]
            for b in now:
                # Readings pulled from the bucket meanwhile were deleted by the application.
                kept = {_key(item.get("_id")) for item in b.get("readings") or []}
                from_bucket = written.get(_key(b["_id"]), {})
                self._delete_readings(run.step, [ident for key, ident in from_bucket.items() if key not in kept])
            return [Version(None, b) for b in now]

        versions = [Version(None, b) for b in buckets]
        # A bucket still there after a lost race is still to unpack, whatever it holds now.
        _written, left = conflict_rounds(versions, unpack, current, lambda _doc: True, {})
        return [version.document["_id"] for version in left]

    def _delete_readings(self, step: Step, ids: list[Any]) -> None:
        if ids:
            self.db[step.collection].delete_many({"_id": {"$in": ids}, "readings": {"$exists": False}})

    # -- verify ----------------------------------------------------------------------------------

    def _verify_buckets(self, run: StepRun, stats: dict[str, Any]) -> list[str]:
        """Every reading moved kept its original for down, and every bucket's count is its readings'."""
        name = run.step.collection
        problems = []
        backed = self.backups_kept(run)
        if backed < stats.get("moved", 0):
            problems.append(f"{name}: {stats['moved'] - backed} reading(s) moved without their original kept")
        wrong = self.db[name].count_documents(
            {**bucket.buckets_filter(), "$expr": {"$ne": ["$count", {"$size": "$readings"}]}}
        )
        if wrong:
            problems.append(f"{name}: {wrong} bucket(s) whose count is not their number of readings")
        return problems


def _as_document(item: Document, b: Document, step: Step, backups: dict[Any, Document]) -> Document:
    """A reading as a document again: its original bytes when it is the reading ``up`` moved, untouched."""
    backup = backups.get(_key(item.get("_id")))
    original = bson.decode(original_bytes(backup)) if backup else None
    if backup and left_alone(bson.encode(item), backup):
        return original  # type: ignore[return-value]
    return bucket.reading(item, b, step, original)


def _key(value: Any) -> bytes:
    """A dict key for any BSON value: its encoding (a driver may hand back an ``_id`` document as a dict or
    as an ordered mapping of another type; the bytes are the same)."""
    return bson.encode({"": value})
