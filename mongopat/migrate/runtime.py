"""The run: apply migrations in order, in batches, with checkpoints, backups, a lock and a changelog.

Document steps read the collection in ``_id`` order, a batch at a time; before a document is rewritten its
original bytes are saved in ``mongopat_backup``, and every transform starts from that original, so a batch
replayed after a crash gives the same result. The changelog records the last ``_id`` of each batch: a
crash anywhere leaves a state that ``up`` resumes to the same end. Regroup steps (bucket) build the new
documents in a staging collection and swap it in by renaming; the original collection is kept, renamed,
for ``down``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import bson
from bson.binary import Binary
from pymongo import ASCENDING, ReplaceOne
from pymongo.errors import BulkWriteError, OperationFailure, PyMongoError

from mongopat.errors import InputError, OperationFailed
from mongopat.migrate.bookkeeping import BACKUP, Changelog, Lock, original_name, stage_name
from mongopat.migrate.gentle import LagGuard, Throttle, backoff, is_transient
from mongopat.migrate.runner import RunnerBase, RunOptions, aggregate_in_python, initial_steps
from mongopat.migrate.script import Migration
from mongopat.migrate.steps import Step
from mongopat.migrate.transforms import (
    BucketBuilder,
    Context,
    Document,
    empty_aggregates,
    get_path,
    hashable_key,
    transform,
)

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


@dataclass
class StepOutcome:
    read: int = 0
    written: int = 0
    stats: dict[str, Any] = field(default_factory=dict)


def _raw(document: Any) -> bytes:
    return bytes(document.raw) if hasattr(document, "raw") else bson.encode(document)


def _backup_id(migration_id: str, step: int, collection: str, document_id: Any) -> dict[str, Any]:
    return {"m": migration_id, "s": step, "c": collection, "id": document_id}


class Runner(RunnerBase):
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

    def up(self, to: str | None = None) -> list[dict[str, Any]]:
        self._refuse_edited()
        pending = self.pending(to)
        if self.options.dry_run:
            return [self._dry_run(m) for m in pending]
        results = []
        self.lock.acquire(self.options.lock_timeout)
        try:
            for migration in self.pending(to):  # read again under the lock: another run may have applied some
                results.append(self._apply(migration))
        finally:
            self.lock.release()
        return results

    def _apply(self, migration: Migration) -> dict[str, Any]:
        started = time.monotonic()
        self.changelog.start(migration.id, migration.checksum, migration.description, initial_steps(migration))
        try:
            if migration.python is not None:  # the user's code: it must be safe to run again after a failure
                migration.python.up(self.db)
            for index, step in enumerate(migration.steps):
                state = (self.changelog.get(migration.id) or {})["steps"][index]
                if state["state"] == "applied":
                    continue
                self.changelog.step(migration.id, index, state="running")
                outcome = self._run_step_retrying(migration.id, index, step)
                self.changelog.step(migration.id, index, state="applied", stats=outcome.stats)
            problems = self.verify_migration(migration)
            if problems:
                raise OperationFailed(f"{migration.id}: verification failed: {'; '.join(problems)}")
        except (OperationFailed, PyMongoError, InputError, ValueError) as exc:
            message = str(exc).split(", full error:")[0]
            self.changelog.finish(migration.id, "failed", started, message)
            raise OperationFailed(
                f"{migration.id} failed: {message}", hint="fix the cause, then run 'mongopat migrate up' to resume"
            ) from None
        except Exception as exc:  # injected faults and user code: record the failure, keep the traceback
            self.changelog.finish(migration.id, "failed", started, f"{type(exc).__name__}: {exc}")
            raise
        self.changelog.finish(migration.id, "applied", started)
        final = self.changelog.get(migration.id) or {}
        notes = [self.lag.note] if self.lag.note else []
        if self.retried:
            notes.append(f"{self.retried} transient fault(s) retried from the last checkpoint")
        if self.lag.paused:
            notes.append(f"paused {self.lag.paused:.0f} s for replication lag")
        return {
            "id": migration.id,
            "state": "applied",
            "read": final.get("read"),
            "written": final.get("written"),
            "duration_s": final.get("duration_s"),
            "notes": notes,
        }

    def _run_step_retrying(self, migration_id: str, index: int, step: Step) -> StepOutcome:
        """Run a step; on a transient fault (election, network, killed cursor, write conflict) wait and
        resume from the last checkpoint, a bounded number of times. Permanent errors go up at once."""
        attempt = 0
        while True:
            state = (self.changelog.get(migration_id) or {})["steps"][index]
            try:
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

    def scan(self, name: str, last_id: Any, has_last: bool) -> Iterator[list[Any]]:
        """Batches of documents in ``_id`` order after ``last_id``, hopping across _id type brackets."""
        collection = self._collection(name)
        size = self.options.batch_size
        while True:
            query = {"_id": {"$gt": last_id}} if has_last else {}
            batch = list(collection.find(query, sort=[("_id", ASCENDING)], limit=size))
            if not batch and has_last:
                batch = self._next_bracket(collection, last_id, size)
            if not batch:
                return
            yield batch
            last_id, has_last = _decoded_id(batch[-1]), True

    def _next_bracket(self, collection: Any, last_id: Any, size: int) -> list[Any]:
        bracket = PYTHON_BRACKET.get(type(last_id).__name__)
        if bracket is None:
            return []
        for later in TYPE_BRACKETS[TYPE_BRACKETS.index(bracket) + 1 :]:
            try:
                batch = list(collection.find({"_id": {"$type": later}}, sort=[("_id", ASCENDING)], limit=size))
            except NotImplementedError:  # mongomock lacks some $type names (timestamp); MongoDB has them all
                continue
            if batch:
                return batch
        return []

    # -- document steps --------------------------------------------------------------------------

    def _document_step(self, migration_id: str, index: int, step: Step, state: dict[str, Any]) -> StepOutcome:
        name = step.collection
        if not state.get("has_last") and state.get("read", 0) == 0 and not state.get("ranges"):
            existing = set(self.db.list_collection_names())
            clash = [c for c in step.created_collections() if c in existing]
            if clash:
                raise OperationFailed(f"{step.name} would write into existing collection(s) {', '.join(clash)}")
            self.changelog.step(migration_id, index, count_before=self.db[name].count_documents({}))
        parents = self._parents(step) if step.name == "tree" else {}
        workers = self.options.workers or 1
        if workers > 1 or state.get("ranges"):
            ranges = state.get("ranges") or self._ranges(migration_id, index, name, workers)
            if ranges:
                outcome = self._document_ranges(migration_id, index, step, ranges, parents)
                self._finish_document_step(step)
                return outcome
        total = self.db[name].estimated_document_count()
        self.throttle.start(state.get("read", 0))
        outcome = StepOutcome(
            read=state.get("read", 0), written=state.get("written", 0), stats=dict(state.get("stats") or {})
        )
        last_id, has_last = state.get("last_id"), state.get("has_last", False)
        for batch in self.scan(name, last_id, has_last):
            last_id, written = self._apply_batch(migration_id, index, step, batch, parents, outcome.stats)
            outcome.read += len(batch)
            outcome.written += written
            self._checkpoint(migration_id, index, outcome, len(batch), written, last_id, total)
        self._finish_document_step(step)
        return outcome

    def _finish_document_step(self, step: Step) -> None:
        if step.name in ("attribute", "map_to_array") and step.params.get("index"):
            self.db[step.collection].create_index(list(step.params["index"].items()))

    def _apply_batch(
        self,
        migration_id: str,
        index: int,
        step: Step,
        batch: list[Any],
        parents: dict[Any, Any],
        stats: dict[str, Any],
    ) -> tuple[Any, int]:
        """Keep the originals, transform them, write the results; returns (last _id, documents written)."""
        name = step.collection
        backups = self.db[BACKUP]
        ids = [_decoded_id(d) for d in batch]
        keys = [_backup_id(migration_id, index, name, i) for i in ids]
        saved = {hashable_key(b["_id"]["id"]): b["raw"] for b in backups.find({"_id": {"$in": keys}})}
        originals: list[Document] = []
        new_backups = []
        for doc, key in zip(batch, keys, strict=True):
            raw = saved.get(hashable_key(key["id"]))
            if raw is None:
                raw = _raw(doc)
                new_backups.append({"_id": key, "raw": Binary(raw)})
            originals.append(bson.decode(bytes(raw)))
        if new_backups:
            _insert_ignoring_duplicates(backups, new_backups)
        ctx = self._context(step, originals, parents)
        replaces, side = [], {}
        for original in originals:
            result = transform(original, step, ctx)
            replaces.append(ReplaceOne({"_id": original["_id"]}, result.document))
            for collection, docs in result.side.items():
                side.setdefault(collection, []).extend(docs)
            _accumulate(stats, step, original, result)
        self.db[name].bulk_write(replaces, ordered=True)
        written = len(replaces)
        for collection, docs in side.items():
            # Side documents derive from the originals and have deterministic _ids: on a replayed
            # batch the same documents exist already, so duplicates are skipped, not overwritten.
            _insert_ignoring_duplicates(self.db[collection], docs)
            written += len(docs)
        return ids[-1], written

    # -- parallel workers over _id ranges ---------------------------------------------------------

    def _ranges(self, migration_id: str, index: int, name: str, workers: int) -> list[dict[str, Any]] | None:
        """Split the collection into ``workers`` _id ranges of about equal size, recorded in the changelog
        so that a resumed run continues each range from its own checkpoint. None when the collection is too
        small or its _ids are of several types (the single ordered scan handles those)."""
        collection = self.db[name]
        count = collection.count_documents({})
        if count < workers * 2:
            return None
        ends = [
            list(collection.find({}, {"_id": 1}, sort=[("_id", direction)], limit=1))[0]["_id"] for direction in (1, -1)
        ]
        bounds = []
        for k in range(1, workers):
            found = list(collection.find({}, {"_id": 1}, sort=[("_id", 1)], skip=k * count // workers, limit=1))
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
            last_id, has_last = _decoded_id(batch[-1]), True

    def _document_ranges(
        self, migration_id: str, index: int, step: Step, ranges: list[dict[str, Any]], parents: dict[Any, Any]
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
            for batch in self._range_batches(step.collection, part):
                last_id, written = self._apply_batch(migration_id, index, step, batch, parents, stats)
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
                self.lock.renew()
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
        self.lock.renew()
        self._after_batch(migration_id, index, outcome.read, total)

    def _after_batch(self, migration_id: str, index: int, done: int, total: int | None = None) -> None:
        self.throttle.after(done)
        self.lag.wait()
        if self.options.progress is not None:
            self.options.progress(migration_id, index, done, total)
        if self.options.on_batch is not None:
            self.options.on_batch(migration_id, index, done)

    def _parents(self, step: Step) -> dict[Any, Any]:
        """The whole tree's parent map (one small projection scan; memory: one entry per node)."""
        field_name = step.params["parent_field"]
        return {hashable_key(d["_id"]): d.get(field_name) for d in self.db[step.collection].find({}, {field_name: 1})}

    def _context(self, step: Step, originals: list[Document], parents: dict[Any, Any]) -> Context:
        ctx = Context(parents=parents)
        if step.name == "extended_reference":
            values = list(
                {hashable_key(v): v for d in originals if (v := get_path(d, step.params["local"])) is not None}.values()
            )
            projection = {name: 1 for name in step.params["fields"]} | {step.params["foreign"]: 1}
            for ref in self.db[step.params["from"]].find({step.params["foreign"]: {"$in": values}}, projection):
                ctx.references[hashable_key(get_path(ref, step.params["foreign"]))] = ref
        elif step.name == "pre_aggregation":
            values = list(
                {hashable_key(v): v for d in originals if (v := get_path(d, step.params["local"])) is not None}.values()
            )
            ctx.aggregates = self._aggregates(step, values)
        return ctx

    def _aggregates(self, step: Step, values: list[Any]) -> dict[Any, Document]:
        foreign = step.params["foreign"]
        group: dict[str, Any] = {"_id": f"${foreign}"}
        for output, spec in step.params["compute"].items():
            op, argument = next(iter(spec.items()))
            if op == "count":
                condition = (
                    {"$and": [{"$eq": [f"${k}", v]} for k, v in argument.items()]}
                    if isinstance(argument, dict)
                    else True
                )
                group[output] = {"$sum": {"$cond": [condition, 1, 0]}}
            else:
                group[output] = {f"${op}": f"${argument}"}
        results: dict[Any, Document] = {}
        try:
            rows = self.db[step.params["from"]].aggregate([{"$match": {foreign: {"$in": values}}}, {"$group": group}])
            for row in rows:
                results[hashable_key(row.pop("_id"))] = row
        except NotImplementedError:  # mongomock lacks some expressions: compute in Python, same semantics
            results = aggregate_in_python(self.db[step.params["from"]].find({foreign: {"$in": values}}), step)
        for value in values:
            results.setdefault(hashable_key(value), empty_aggregates(step.params["compute"]))
        return results

    # -- bucket ----------------------------------------------------------------------------------

    def _bucket_step(self, migration_id: str, index: int, step: Step, state: dict[str, Any]) -> StepOutcome:
        name, stage, kept = step.collection, stage_name(migration_id, index), original_name(migration_id, index)
        existing = set(self.db.list_collection_names())
        outcome = StepOutcome(
            read=state.get("read", 0), written=state.get("written", 0), stats=dict(state.get("stats") or {})
        )
        phase = state.get("phase") or "build"
        if phase == "build":
            if not state.get("has_last") and stage in existing:
                self.db[stage].drop()  # a staging collection from a run that never checkpointed: start clean
            if not state.get("has_last"):
                self.changelog.step(migration_id, index, count_before=self.db[name].count_documents({}))
            staging = self.db[stage]

            def load(series: Any, start: Any) -> Document | None:
                found = list(staging.find({"_id.s": series, "_id.w": start}, sort=[("_id.n", -1)], limit=1))
                return found[0] if found else None

            builder = BucketBuilder(step, load)
            total = self.db[name].estimated_document_count()
            self.throttle.start(state.get("read", 0))
            last_id, has_last = state.get("last_id"), state.get("has_last", False)
            for batch in self.scan(name, last_id, has_last):
                touched: dict[str, Document] = {}
                passthrough = []
                for raw in batch:
                    doc = bson.decode(_raw(raw))
                    bucket = builder.add(doc)
                    builder.completed.clear()  # full buckets were written when touched; nothing to add
                    if bucket is None:
                        passthrough.append(ReplaceOne({"_id": doc["_id"]}, doc, upsert=True))
                    else:
                        touched[repr(bucket["_id"])] = bucket
                operations = [ReplaceOne({"_id": b["_id"]}, b, upsert=True) for b in touched.values()] + passthrough
                if operations:
                    staging.bulk_write(operations, ordered=True)
                if len(builder.open) > 10_000:  # bounded memory: buckets are reloaded from staging on demand
                    builder.open.clear()
                    builder.ids.clear()
                outcome.read += len(batch)
                outcome.written += len(operations)
                outcome.stats["passthrough"] = outcome.stats.get("passthrough", 0) + len(passthrough)
                last_id, has_last = _decoded_id(batch[-1]), True
                self._checkpoint(migration_id, index, outcome, len(batch), len(operations), last_id, total)
            if stage not in set(self.db.list_collection_names()):
                self.db.create_collection(stage)
            self.changelog.step(migration_id, index, phase="swap")
        existing = set(self.db.list_collection_names())
        if name in existing and kept not in existing:
            self.db[name].rename(kept)
        existing = set(self.db.list_collection_names())
        if stage in existing and name not in existing:
            self.db[stage].rename(name)
            self.db[name].create_index([(step.params["series_key"], ASCENDING), ("start", ASCENDING)])
        self.changelog.step(migration_id, index, phase="done")
        return outcome

    # -- collection steps ------------------------------------------------------------------------

    def _collection_step(self, migration_id: str, index: int, step: Step, state: dict[str, Any]) -> StepOutcome:
        collection = self.db[step.collection]
        outcome = StepOutcome()
        if step.name == "create_index":
            name = collection.create_index(
                list(step.params["keys"].items()), name=step.params.get("name"), unique=bool(step.params.get("unique"))
            )
            outcome.stats["index"] = name
        elif step.name == "drop_index":
            spec = next((dict(i) for i in collection.list_indexes() if i["name"] == step.params["name"]), None)
            if spec is None:
                raise OperationFailed(f"drop_index: no index {step.params['name']!r} on {step.collection}")
            outcome.stats["spec"] = {k: v for k, v in spec.items() if k not in ("v", "ns")}
            self.changelog.step(migration_id, index, stats=outcome.stats)
            collection.drop_index(step.params["name"])
        elif step.name == "copy_collection":
            target = self.db[step.params["to"]]
            last_id, has_last = state.get("last_id"), state.get("has_last", False)
            for batch in self.scan(step.collection, last_id, has_last):
                docs = [bson.decode(_raw(d)) for d in batch]
                target.bulk_write([ReplaceOne({"_id": d["_id"]}, d, upsert=True) for d in docs], ordered=True)
                outcome.read += len(docs)
                outcome.written += len(docs)
                self.changelog.step(migration_id, index, last_id=docs[-1]["_id"], has_last=True, read=outcome.read)
                self.lock.renew()
        elif step.name == "rename_collection":
            existing = set(self.db.list_collection_names())
            if step.collection in existing:
                if step.params["to"] in existing:
                    raise OperationFailed(f"rename_collection: {step.params['to']} exists already")
                collection.rename(step.params["to"])
        return outcome

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
            before = state.get("count_before")
            now = db[name].count_documents({})
            if before is not None and now < before:
                problems.append(f"{name}: {before - now} document(s) missing ({before} before, {now} now)")
            backed = db[BACKUP].count_documents({"_id.m": migration_id, "_id.s": index})
            if before is not None and backed < before:
                problems.append(f"{name}: {before - backed} original(s) not kept for rollback")
            problems.extend(_shape_problems(db, step, stats))
        elif step.type.kind == "regroup":
            kept = original_name(migration_id, index)
            source_count = db[kept].count_documents({})
            total = sum(
                b.get("count", 0)
                for b in db[name].find({"count": {"$exists": True}, "readings": {"$exists": True}}, {"count": 1})
            )
            total += stats.get("passthrough", 0)
            if total != source_count:
                problems.append(f"{name}: buckets hold {total} readings, the original collection {source_count}")
        elif step.name == "create_index":
            if not any(i["name"] == stats.get("index") for i in db[name].list_indexes()):
                problems.append(f"{name}: index {stats.get('index')} is missing")
        elif step.name == "copy_collection" and db[step.params["to"]].count_documents({}) < db[name].count_documents(
            {}
        ):
            problems.append(f"{step.params['to']}: fewer documents than {name}")
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
            batch: list[ReplaceOne] = []
            for backup in backups.find(query):
                original = bson.decode(bytes(backup["raw"]))
                batch.append(ReplaceOne({"_id": original["_id"]}, original, upsert=True))
                if len(batch) >= self.options.batch_size:
                    db[name].bulk_write(batch, ordered=True)
                    batch = []
                    self.lock.renew()
            if batch:
                db[name].bulk_write(batch, ordered=True)
            for created in step.created_collections():
                db[created].drop()
            if step.name in ("attribute", "map_to_array") and step.params.get("index"):
                # The index may never have been created, or be gone already.
                with contextlib.suppress(OperationFailure, PyMongoError, KeyError, ValueError):
                    db[name].drop_index(list(step.params["index"].items()))
            backups.delete_many(query)
        elif step.type.kind == "regroup":
            kept, stage = original_name(migration_id, index), stage_name(migration_id, index)
            existing = set(db.list_collection_names())
            if kept in existing:
                if name in existing:
                    db[name].drop()
                db[kept].rename(name)
            if stage in set(db.list_collection_names()):
                db[stage].drop()
        elif step.name == "create_index":
            index_name = (state.get("stats") or {}).get("index")
            if index_name and any(i["name"] == index_name for i in db[name].list_indexes()):
                db[name].drop_index(index_name)
        elif step.name == "drop_index":
            spec = dict((state.get("stats") or {}).get("spec") or {})
            if spec and not any(i["name"] == spec.get("name") for i in db[name].list_indexes()):
                keys = list(spec.pop("key").items())
                db[name].create_index(keys, **spec)
        elif step.name == "copy_collection":
            db[step.params["to"]].drop()
        elif step.name == "rename_collection":
            existing = set(db.list_collection_names())
            if step.params["to"] in existing and name not in existing:
                db[step.params["to"]].rename(name)

    # -- dry run ---------------------------------------------------------------------------------

    def _dry_run(self, migration: Migration) -> dict[str, Any]:
        from mongopat.migrate.preview import dry_run_examples

        steps = []
        for step in migration.steps:
            collection = self.db[step.collection]
            count = collection.count_documents({})
            samples = [
                bson.decode(_raw(d)) for d in self._collection(step.collection).find({}, limit=3, sort=[("_id", 1)])
            ]
            ctx = (
                self._context(step, samples, self._parents(step) if step.name == "tree" else {})
                if step.type.kind == "document" and samples
                else None
            )
            examples = dry_run_examples(step, samples, ctx)
            steps.append({"step": step.name, "collection": step.collection, "documents": count, "examples": examples})
        return {"id": migration.id, "state": "dry-run", "steps": steps}


def _insert_ignoring_duplicates(collection: Any, documents: list[Document]) -> None:
    try:
        collection.insert_many(documents, ordered=False)
    except BulkWriteError as exc:
        if any(error.get("code") != 11000 for error in exc.details.get("writeErrors", [])):
            raise


def _decoded_id(document: Any) -> Any:
    if hasattr(document, "raw"):
        return bson.decode(bytes(document.raw))["_id"]
    return document["_id"]


def _accumulate(stats: dict[str, Any], step: Step, original: Document, result: Any) -> None:
    """Counts that verification checks afterwards (elements moved, documents matched)."""
    if step.name in ("subset", "outlier"):
        elements = original.get(step.params["field"])
        if isinstance(elements, list):
            stats["elements"] = stats.get("elements", 0) + len(elements)
    elif step.name == "extended_reference" and step.params["as"] in result.document:
        stats["matched"] = stats.get("matched", 0) + 1
    elif step.name == "polymorphic" and step.params["type_field"] in result.document:
        stats["typed"] = stats.get("typed", 0) + 1


def _shape_problems(db: Any, step: Step, stats: dict[str, Any]) -> list[str]:
    name, params = step.collection, step.params
    collection = db[name]

    def missing(path: str) -> int:
        return collection.count_documents({path: {"$exists": False}})

    problems = []
    if step.name in ("computed", "set_field", "schema_versioning", "approximation", "pre_aggregation", "tree"):
        target = {
            "computed": "field",
            "set_field": "field",
            "schema_versioning": "field",
            "approximation": "field",
            "pre_aggregation": "into",
            "tree": "ancestors_field",
        }[step.name]
        count = missing(params[target])
        if count:
            problems.append(f"{name}: {count} document(s) without {params[target]}")
    elif step.name == "unset_field" and collection.count_documents({params["field"]: {"$exists": True}}):
        problems.append(f"{name}: {params['field']} still present")
    elif step.name == "rename_field" and collection.count_documents({params["from"]: {"$exists": True}}):
        problems.append(f"{name}: {params['from']} still present")
    elif step.name == "attribute":
        left = collection.count_documents({"$or": [{f: {"$exists": True}} for f in params["fields"]]})
        if left:
            problems.append(f"{name}: {left} document(s) still hold pivoted fields")
    elif step.name == "map_to_array":
        # $type matches an array by its elements: an array of documents is "object" too, hence the $not.
        field = params["field"]
        still_maps = {"$and": [{field: {"$type": "object"}}, {field: {"$not": {"$type": "array"}}}]}
        left = collection.count_documents(still_maps)
        if left:
            problems.append(f"{name}: {left} document(s) still hold {params['field']} as a sub-document")
    elif step.name == "document_versioning":
        history = db[params["history_collection"]].count_documents({})
        if history < collection.count_documents({}):
            problems.append(
                f"{params['history_collection']}: {history} revisions for {collection.count_documents({})} documents"
            )
    elif step.name == "subset":
        full = db[params["full_collection"]].count_documents({})
        if full != stats.get("elements", 0):
            problems.append(f"{params['full_collection']}: {full} elements, expected {stats.get('elements', 0)}")
    elif step.name == "outlier":
        kept = sum(len(d.get(params["field"]) or []) for d in collection.find({}, {params["field"]: 1}))
        moved = sum(
            len(d.get(params["field"]) or []) for d in db[params["overflow_collection"]].find({}, {params["field"]: 1})
        )
        if kept + moved != stats.get("elements", 0):
            problems.append(
                f"{name}.{params['field']}: {kept} kept + {moved} moved, expected {stats.get('elements', 0)}"
            )
    elif step.name == "extended_reference":
        copied = collection.count_documents({params["as"]: {"$exists": True}})
        if copied < stats.get("matched", 0):
            problems.append(f"{name}: {copied} documents with {params['as']}, expected {stats.get('matched', 0)}")
    elif step.name == "polymorphic":
        typed = collection.count_documents({params["type_field"]: {"$exists": True}})
        if typed < stats.get("typed", 0):
            problems.append(f"{name}: {typed} typed documents, expected {stats.get('typed', 0)}")
    return problems
