"""Document steps on a live server: each document restructured in place, while the application writes.

The collection is read in ``_id`` order, a batch at a time (or over ``_id`` ranges, one thread each), and
each batch goes through the algorithm every backend runs (``document_batches.py``) over this module's
:class:`ServerDocuments`: before a document is rewritten, the version read is kept in ``mongopat_backup``,
and the write takes only while the document is still that version (``document_versions.py``); a document
the application changed in between is read and transformed again, one it deleted stays deleted. The
changelog records the last ``_id`` of each batch, so a crash anywhere leaves a state that ``up`` resumes to
the same end. Steps whose transform MongoDB can compute run inside the server instead
(``in_server_steps.py``).

``down`` gives every document left alone since ``up`` its original bytes back, and applies the step's
inverse to one the application changed since.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import bson
from pymongo import ASCENDING, ReplaceOne
from pymongo.errors import BulkWriteError

from mongopat.errors import InputError, OperationFailed
from mongopat.migrate.bookkeeping import BACKUP
from mongopat.migrate.context_sources import DatabaseDocuments
from mongopat.migrate.contracts import StepRun, StepState
from mongopat.migrate.document_batches import (
    Change,
    Version,
    apply_batch,
    apply_batches,
    conflict_rounds,
    refuse_existing,
)
from mongopat.migrate.operations import OPERATIONS, transform
from mongopat.migrate.runner import StepOutcome, count
from mongopat.migrate.server.document_versions import (
    backup,
    backup_id,
    decoded,
    decoded_id,
    digest,
    keep_backups,
    left_alone,
    original_bytes,
    raw_bytes,
    step_backups,
    unchanged_since,
    versions_of,
)
from mongopat.migrate.server.id_cuts import id_cuts
from mongopat.migrate.server.in_server_steps import (
    ORIGINAL,
    InServerSteps,
    left_to_the_client_side,
    server_pending,
    stash_key,
)
from mongopat.migrate.server.restore_in_server import restore_in_server
from mongopat.migrate.server.steps import PYTHON_BRACKET
from mongopat.migrate.server.unset_in_server import unset_in_server
from mongopat.migrate.steps import Step
from mongopat.migrate.transform_api import Context, Document, hashable_key


class DocumentSteps(InServerSteps):
    """Document steps: on the client side, or computed inside the server where the step allows it."""

    def run(self, run: StepRun) -> StepOutcome:
        name = run.step.collection
        # Once per step: a run that stopped before its first checkpoint has created these collections itself.
        if run.state.get("count_before") is None and not run.state.get("has_last") and not run.state.get("ranges"):
            names = set(self.db.list_collection_names())
            if name not in names:  # MongoDB creates a collection on its first write: a misspelled name would not fail
                raise InputError(f"collection {name!r} not found in database {self.db.name}")
            # A collection the step creates may exist empty, made beforehand (to shard it, say): it is taken,
            # and down empties it and drops the indexes it did not have rather than dropping it.
            prepared = {
                created: [index["name"] for index in self.db[created].list_indexes()]
                for created in run.step.created_collections()
                if created in names
            }
            refuse_existing(
                run.step, lambda created: created in prepared and self.db[created].find_one({}, {"_id": 1}) is not None
            )
            more = {"prepared": prepared} if prepared else {}
            self.changelog.step(run.migration_id, run.index, count_before=self.db[name].count_documents({}), **more)
            if prepared:
                run.state["prepared"] = prepared
        # Indexes of the collections the step creates first: the application reads a subset's full list or
        # an outlier's overflow by parentId from the start, and so do reruns. The collection's own last.
        for collection, keys in OPERATIONS[run.step.name].indexes(run.step):
            if collection != run.step.collection:
                self.db[collection].create_index(list(keys.items()))
        if self.in_server(run):
            outcome = self.in_server_step(run)
            self._left_by_the_server(run, outcome)
            self._finish_document_step(run, outcome.stats)
            return outcome
        kept: dict[Any, Any] = {}  # the context's whole-collection reads, for the step's pass (DatabaseDocuments)
        workers = self.options.workers or 1
        if workers > 1 or run.state.get("ranges"):
            ranges = run.state.get("ranges") or self._ranges(run, name, workers)
            if ranges:
                outcome = self._document_ranges(run, ranges, kept)
                self._catch_up_client_side(run, kept, outcome)
                self._finish_document_step(run, outcome.stats)
                return outcome
        total = self.db[name].estimated_document_count()
        self.throttle.start(run.state.get("read", 0))
        outcome = StepOutcome(
            read=run.state.get("read", 0), written=run.state.get("written", 0), stats=dict(run.state.get("stats") or {})
        )
        budget = (total or 0) // self.options.batch_size + 2  # documents inserted behind it: the catch-up's
        batches = self.runner.scan(name, run.state.get("last_id"), run.state.get("has_last", False), None, budget)

        def checkpoint(batch: list[Version], written: int) -> None:
            last = batch[-1].document["_id"]
            self.runner.checkpoint(run, outcome, len(batch), written, last, total)

        apply_batches(ServerDocuments(self, run, kept), run.step, map(versions_of, batches), outcome, checkpoint)
        self._catch_up_client_side(run, kept, outcome)
        self._finish_document_step(run, outcome.stats)
        return outcome

    def pending_filter(self, run: StepRun) -> dict[str, Any] | None:
        return OPERATIONS[run.step.name].pending(run.step)

    def catch_up(self, run: StepRun, outcome: StepOutcome) -> int:
        if run.state.get("in_server"):
            migrated = self.in_server_catch_up(run, outcome)
            return migrated + self._left_by_the_server(run, outcome)
        return self._catch_up_client_side(run, {}, outcome)

    def _left_by_the_server(self, run: StepRun, outcome: StepOutcome) -> int:
        """The client side's pass over the documents the server left pending: too large to hold their
        original beside them, holding mongopat's field, or declined by the step. Returns how many."""
        if not outcome.stats.get("pending_left"):
            return 0
        migrated = self._catch_up_client_side(run, {}, outcome, only=left_to_the_client_side(run.step))
        outcome.stats["pending_left"] = self.db[run.step.collection].count_documents(server_pending(run.step))
        outcome.stats["backups"] = self.backups_kept(run)
        return migrated

    def _catch_up_client_side(
        self, run: StepRun, kept: dict[Any, Any], outcome: StepOutcome, only: dict[str, Any] | None = None
    ) -> int:
        """Migrate the documents still in the old shape (those ``only`` matches too): written by the
        application behind the scan, or in the old shape again since (see :meth:`passes`)."""

        def new_pass() -> None:
            kept.clear()  # documents inserted since: a tree's new nodes have parents the first map lacks

        store = ServerDocuments(self, run, kept)

        def apply(batch: list[Any]) -> tuple[Any, int]:
            versions = versions_of(batch)
            return versions[-1].document["_id"], apply_batch(store, run.step, versions, outcome.stats, replay=True)

        pending = OPERATIONS[run.step.name].pending(run.step)
        return self.runner.passes(
            run, outcome, {"$and": [pending, only]} if only else pending, "transformed", apply, new_pass
        )

    def _finish_document_step(self, run: StepRun, stats: dict[str, Any]) -> None:
        for collection, keys in OPERATIONS[run.step.name].indexes(run.step):
            if collection == run.step.collection:
                self.create_own_index(run, dict(keys), stats)

    # -- parallel workers over _id ranges ---------------------------------------------------------

    def _ranges(self, run: StepRun, name: str, workers: int) -> list[dict[str, Any]] | None:
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
        bounds = id_cuts(collection, {}, workers, documents)
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
        self.changelog.step(run.migration_id, run.index, ranges=ranges)
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

    def _document_ranges(self, run: StepRun, ranges: list[dict[str, Any]], kept: dict[Any, Any]) -> StepOutcome:
        """Each range in its own thread, checkpointed separately; the same guarantees as one worker
        (backups first, transforms from the originals, deterministic side documents)."""
        total = self.db[run.step.collection].estimated_document_count()
        done_lock = threading.Lock()
        done = {"read": sum(r.get("read", 0) for r in ranges)}
        self.throttle.start(done["read"])

        store = ServerDocuments(self, run, kept)

        def work(position: int) -> dict[str, Any]:
            part = dict(ranges[position])
            stats = dict(part.get("stats") or {})
            for number, batch in enumerate(self._range_batches(run.step.collection, part)):
                versions = versions_of(batch)
                written = apply_batch(store, run.step, versions, stats, replay=number == 0)
                part.update(
                    last_id=versions[-1].document["_id"],
                    has_last=True,
                    read=part.get("read", 0) + len(batch),
                    written=part.get("written", 0) + written,
                    stats=stats,
                )
                prefix = f"ranges.{position}."
                self.changelog.checkpoint(
                    run.migration_id,
                    run.index,
                    len(batch),
                    written,
                    **{prefix + k: part[k] for k in ("last_id", "has_last", "read", "written", "stats")},
                )
                with done_lock:
                    done["read"] += len(batch)
                    self.runner.after_batch(run, done["read"], total)
            return part

        with ThreadPoolExecutor(max_workers=len(ranges)) as pool:
            finished = list(pool.map(work, range(len(ranges))))
        outcome = StepOutcome(read=sum(p["read"] for p in finished), written=sum(p["written"] for p in finished))
        for part in finished:
            for key, value in (part.get("stats") or {}).items():
                outcome.stats[key] = outcome.stats.get(key, 0) + value
        self.changelog.step(
            run.migration_id, run.index, read=outcome.read, written=outcome.written, stats=outcome.stats
        )
        return outcome

    # -- verify ----------------------------------------------------------------------------------

    def verify(self, run: StepRun) -> list[str]:
        # The application may insert and delete documents: counts before and after say nothing. What must
        # hold is that every document transformed kept its original for down.
        problems = self.missing_indexes(run)
        backed = self.backups_kept(run)
        if run.state.get("in_server"):
            # Inside the server a document's original is kept by the very update that rewrites it: what
            # must hold is that every one reached its backup, and that the backups counted at the end of
            # the run are all still there (a document written back in the old shape and rewritten again
            # counts twice in the figures, and keeps one backup).
            kept = (run.state.get("stats") or {}).get("backups")
            if kept is not None and backed < kept:
                problems.append(f"{run.step.collection}: {kept - backed} original(s) not kept for rollback")
            held = self.db[run.step.collection].count_documents({f"{ORIGINAL}.k": stash_key(run)})
            if held:
                problems.append(f"{run.step.collection}: {held} document(s) still hold their original")
            return problems
        transformed = (run.state.get("stats") or {}).get("transformed", 0)
        if backed < transformed:
            problems.append(f"{run.step.collection}: {transformed - backed} original(s) not kept for rollback")
        return problems

    # -- down ------------------------------------------------------------------------------------

    def revert(self, run: StepRun) -> None:
        db, name = self.db, run.step.collection
        if run.state.get("in_server"):
            self.settle_stashed(run)  # what a stopped run left holding its original first
            unset_in_server(self, run)  # then what the server can revert itself; the rest below
            restore_in_server(self, run)  # the originals of documents left alone, of the other steps
        backups = db[BACKUP]
        query = step_backups(run.migration_id, run.index)
        unresolved: list[Any] = []
        chunk: list[dict[str, Any]] = []
        for kept in self._collection(BACKUP).find(query):  # as stored: an original's exact bytes
            chunk.append(kept)
            if len(chunk) >= self.options.batch_size:
                unresolved.extend(self._revert_documents(run.step, chunk, run.state))
                chunk = []
                self.lock.renew()
        if chunk:
            unresolved.extend(self._revert_documents(run.step, chunk, run.state))
        marker = OPERATIONS[run.step.name].new_shape_marker(run.step)
        if marker is not None:
            unresolved.extend(self._revert_new_shape(run, marker, unresolved))
        prepared = run.state.get("prepared") or {}
        for created in run.step.created_collections():
            if created not in prepared:
                db[created].drop()
                continue
            db[created].delete_many({})
            for index in list(db[created].list_indexes()):
                if index["name"] not in prepared[created]:
                    db[created].drop_index(index["name"])
        self.drop_own_indexes(run.step, run.state.get("stats") or {})
        if unresolved:
            # Their originals stay kept: the documents are left as the application wrote them.
            keep = [backup_id(run.migration_id, run.index, name, ident) for ident in unresolved]
            backups.delete_many({"$and": [query, {"_id": {"$nin": keep}}]})
            shown = ", ".join(repr(ident) for ident in unresolved[:10])
            raise OperationFailed(
                f"{run.step.name} on {name}: {len(unresolved)} document(s) changed by the application since up "
                f"could not be put back in the old shape without losing that change; left as they are: {shown}"
                + (" ..." if len(unresolved) > 10 else ""),
                hint="fix them by hand (their originals are kept in mongopat_backup), then run down again",
            )
        backups.delete_many(query)

    def _revert_new_shape(self, run: StepRun, marker: str, skip: list[Any]) -> list[Any]:
        """Documents the application wrote in the new shape after ``up`` (no backup: their elements are in
        the side collection ``down`` is about to drop) are merged back by the step's inverse, as a changed
        document is; returns the _ids it could not."""
        side = self.db[run.step.created_collections()[0]]
        unresolved: list[Any] = []
        query = {marker: {"$exists": True}, **({"_id": {"$nin": skip}} if skip else {})}
        for batch in self.runner.scan(run.step.collection, None, False, query):
            documents = [decoded(raw) for raw in batch]
            parents = {
                hashable_key(i) for i in side.distinct("parentId", {"parentId": {"$in": [d["_id"] for d in documents]}})
            }
            # Only documents with elements in the side collection: a field of the same name that a document
            # had before up is not the step's.
            chunk = [
                {
                    "_id": backup_id(run.migration_id, run.index, run.step.collection, doc["_id"]),
                    # As if up had transformed it from this document without the marker, and it changed since.
                    "raw": bson.encode({k: v for k, v in doc.items() if k != marker}),
                    "after": b"",
                }
                for doc in documents
                if hashable_key(doc["_id"]) in parents
            ]
            if chunk:
                unresolved.extend(self._revert_documents(run.step, chunk, {}))
            self.lock.renew()
        return unresolved

    def _revert_documents(self, step: Step, backups: list[dict[str, Any]], state: StepState) -> list[Any]:
        """Put a chunk of documents back in the old shape; returns the _ids it could not.

        A document unchanged since ``up`` (its digest is the one ``up`` wrote) gets its original back,
        byte for byte. One the application changed since gets the step's inverse applied to its current
        state. One it deleted stays deleted. Every write is conditional on the version read; a lost race
        is read again, a bounded number of times (``document_batches.conflict_rounds``), and one still
        losing after them is left as it is, its original kept.
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
        expected: dict[Any, bytes] = {}  # the digest of what each write put back

        def restore(todo: list[Version], again: bool) -> tuple[int, list[Version]]:
            writes, written = [], []
            for version in todo:
                current = version.document
                key = hashable_key(current["_id"])
                backup = originals[key]
                original = bson.decode(original_bytes(backup))
                if backup.get("after") is None or left_alone(version.raw or b"", backup):
                    restored: Document | None = original  # left alone since up: the original bytes
                else:
                    restored = operation.inverse(current, original, step, side.get(key, []))
                if restored is None:
                    unresolved.append(current["_id"])
                    continue
                writes.append(ReplaceOne(unchanged_since(current), restored))
                written.append(version)
                expected[key] = digest(bson.encode(restored))
            if not writes:
                return 0, []
            result = collection.bulk_write(writes, ordered=False)
            return len(writes), [] if result.matched_count == len(writes) else written

        def current(missed: list[Version]) -> list[Version]:
            # Those written since are no longer candidates: restored by this round, or deleted.
            now = versions_of(
                self._collection(step.collection).find({"_id": {"$in": [v.document["_id"] for v in missed]}})
            )
            return [v for v in now if digest(v.raw or b"") != expected.get(hashable_key(v.document["_id"]))]

        found = versions_of(self._collection(step.collection).find({"_id": {"$in": ids}}))
        # Those back in the old shape since were restored and written since: the application's now.
        _written, left = conflict_rounds(found, restore, current, lambda doc: not operation.is_pending(doc, step), {})
        return unresolved + [version.document["_id"] for version in left]

    # -- samples -----------------------------------------------------------------------------------

    def sample_context(self, step: Step, samples: list[Document]) -> Context | None:
        return OPERATIONS[step.name].context(step, samples, DatabaseDocuments(self.db, {})) if samples else None

    def transformed_sample(self, step: Step, size: int) -> list[Document]:
        raw = self._collection(step.collection).aggregate([{"$sample": {"size": size}}])
        samples = [bson.decode(raw_bytes(d)) for d in raw]
        ctx = self.sample_context(step, samples)
        return [transform(sample, step, ctx).document for sample in samples]


class ServerDocuments:
    """The server as the store of a document step's batches (``document_batches.DocumentStore``).

    Before a document is rewritten, the version transformed is kept in ``mongopat_backup`` with a digest of
    what replaced it, so that ``down`` can tell a document left alone since ``up`` from one the application
    changed; the rewrite is a replace whose filter is the whole version read (compare-and-swap).
    """

    def __init__(self, steps: DocumentSteps, run: StepRun, kept: dict[Any, Any]) -> None:
        self.db, self.raw_collection = steps.db, steps.runner.raw_collection
        self.migration_id, self.index = run.migration_id, run.index
        self.kept = kept  # the context's whole-collection reads, for the step's pass (DatabaseDocuments)

    def context(self, step: Step, documents: list[Document]) -> Context:
        return OPERATIONS[step.name].context(step, documents, DatabaseDocuments(self.db, self.kept))

    def write(
        self, step: Step, changes: list[Change], replay: bool, stats: dict[str, Any]
    ) -> tuple[int, list[Version]]:
        if not changes:
            return 0, []
        name = step.collection
        keep_backups(
            self.db[BACKUP],
            [
                backup(backup_id(self.migration_id, self.index, name, version.document["_id"]), version.raw or b"",
                       bson.encode(result.document))
                for version, result in changes
            ],
        )  # fmt: skip
        side: dict[str, list[Document]] = {}
        for _version, result in changes:
            for collection, documents in result.side.items():
                side.setdefault(collection, []).extend(documents)
        written = 0
        for collection, documents in side.items():
            if replay:
                # Side documents of an older version (a lost race, a replayed batch) go first: subset's and
                # outlier's by parent, so that a shorter list leaves none behind; others by their _id.
                if OPERATIONS[step.name].side_collections:
                    parents = [version.document["_id"] for version, _result in changes]
                    self.db[collection].delete_many({"parentId": {"$in": parents}})
                else:
                    self.db[collection].delete_many({"_id": {"$in": [d["_id"] for d in documents]}})
            _insert_ignoring_duplicates(self.db[collection], documents)
            written += len(documents)
        replaces = [ReplaceOne(unchanged_since(version.document), result.document) for version, result in changes]
        outcome = self.db[name].bulk_write(replaces, ordered=False)
        count(stats, "transformed", outcome.matched_count)
        # A bulk write tells how many matched, not which: when some did not, all are read again.
        missed = [] if outcome.matched_count == len(replaces) else [version for version, _result in changes]
        return written + len(replaces), missed

    def current(self, step: Step, versions: list[Version], stats: dict[str, Any]) -> list[Version]:
        """Those the application deleted meanwhile are counted and their side documents removed."""
        ids = [version.document["_id"] for version in versions]
        now = versions_of(self.raw_collection(step.collection).find({"_id": {"$in": ids}}))
        present = {hashable_key(version.document["_id"]) for version in now}
        gone = [ident for ident in ids if hashable_key(ident) not in present]
        if gone:
            count(stats, "deleted_meanwhile", len(gone))
            for parameter in OPERATIONS[step.name].side_collections:
                self.db[step.params[parameter]].delete_many({"parentId": {"$in": gone}})
        return now


def _insert_ignoring_duplicates(collection: Any, documents: list[Document]) -> None:
    try:
        collection.insert_many(documents, ordered=False)
    except BulkWriteError as exc:
        if any(error.get("code") != 11000 for error in exc.details.get("writeErrors", [])):
            raise
