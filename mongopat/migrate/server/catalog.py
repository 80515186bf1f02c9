"""The catalog of a MongoDB deployment: database commands (``createIndexes``, ``renameCollection``,
``collMod``...), and copies in ``_id`` order with a checkpoint per batch."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import bson
from pymongo import ReplaceOne
from pymongo.errors import BulkWriteError, CollectionInvalid, OperationFailure, PyMongoError

from mongopat.errors import OperationFailed
from mongopat.migrate.bookkeeping import Changelog
from mongopat.migrate.catalog import Catalog
from mongopat.migrate.contracts import StepState
from mongopat.migrate.server.document_versions import raw_bytes, unchanged_since
from mongopat.migrate.transform_api import hashable_key as _key
from mongopat.timeseries.options import TimeSeriesOptions
from mongopat.timeseries.sync import Change, Digest, reading_hash
from mongopat.timeseries.unwind import Readings

# Passes of a copy that chase an application inserting behind it, before the rest is left to the next up.
MAX_PASSES = 5

# What a server adds to an index spec that createIndexes must not be given back.
SERVER_KEYS = ("v", "ns")


class ServerCatalog(Catalog):
    copies_incrementally = True

    def __init__(
        self,
        db: Any,
        changelog: Changelog,
        migration_id: str,
        index: int,
        state: StepState,
        scan: Callable[..., Iterator[list[Any]]],
        after_batch: Callable[[int], None],
        batch_size: int = 1000,
    ) -> None:
        super().__init__(state.get("stats"))
        self.db, self.changelog, self.migration_id, self.index = db, changelog, migration_id, index
        # after_batch: pacing, progress and the lease, after each batch written
        self.state, self.scan, self.after_batch, self.batch_size = state, scan, after_batch, batch_size

    def _save(self) -> None:
        self.changelog.step(self.migration_id, self.index, stats=self.stats)

    def names(self) -> set[str]:
        return set(self.db.list_collection_names())

    def count(self, collection: str) -> int:
        return self.db[collection].count_documents({})

    def indexes(self, collection: str) -> list[dict[str, Any]]:
        return [
            {k: v for k, v in dict(spec).items() if k not in SERVER_KEYS} for spec in self.db[collection].list_indexes()
        ]

    def create_index(self, collection: str, spec: dict[str, Any]) -> str:
        options = {k: v for k, v in spec.items() if k not in ("key", *SERVER_KEYS)}
        return str(self.db[collection].create_index(list(dict(spec["key"]).items()), **options))

    def drop_index(self, collection: str, name: str) -> None:
        self.db[collection].drop_index(name)

    def rename(self, collection: str, to: str) -> None:
        self.db[collection].rename(to)

    def drop(self, collection: str) -> None:
        self.db[collection].drop()

    def copy(self, collection: str, to: str) -> None:
        # Upserts by _id from the last checkpoint: a batch copied twice after a crash changes nothing.
        target = self.db[to]
        last_id, has_last = self.state.get("last_id"), self.state.get("has_last", False)
        for batch in self.scan(collection, last_id, has_last):
            documents = [bson.decode(raw_bytes(d)) for d in batch]
            target.bulk_write([ReplaceOne({"_id": d["_id"]}, d, upsert=True) for d in documents], ordered=True)
            self.read += len(documents)
            self.written += len(documents)
            self.changelog.step(
                self.migration_id, self.index, last_id=documents[-1]["_id"], has_last=True, read=self.read
            )
            self.after_batch(self.read)

    def options(self, collection: str) -> dict[str, Any]:
        for entry in self.db.list_collections(filter={"name": collection}):
            return dict(entry.get("options") or {})
        return {}

    def set_validation(self, collection: str, validator: dict[str, Any], level: str, action: str) -> None:
        self.db.command(
            {"collMod": collection, "validator": validator, "validationLevel": level, "validationAction": action}
        )

    def violations(self, collection: str, validator: dict[str, Any]) -> int | None:
        if not validator:
            return 0
        try:
            return self.db[collection].count_documents({"$nor": [validator]})
        except (OperationFailure, PyMongoError, NotImplementedError):
            return None  # an operator the server does not evaluate in a query, or no permission to count

    # -- time-series collections ---------------------------------------------------------------------

    def create_timeseries(self, name: str, options: TimeSeriesOptions) -> None:
        extra = {} if options.expire_after_seconds is None else {"expireAfterSeconds": options.expire_after_seconds}
        try:
            self.db.create_collection(name, timeseries=options.create_options(), **extra)
        except CollectionInvalid:
            return  # created by a run that stopped before it could record more
        except NotImplementedError as exc:
            raise OperationFailed(
                f"this server cannot create time-series collections ({exc}); MongoDB 5.0+ can"
            ) from None
        except OperationFailure as exc:
            reason = (exc.details or {}).get("errmsg", str(exc))
            raise OperationFailed(f"creating the time-series collection {name} failed: {reason}") from None

    def copy_measurements(
        self, collection: str, to: str, options: TimeSeriesOptions, source: Readings
    ) -> Digest | None:
        # Passes in _id order from the checkpoint: the bulk of the copy, paced and resumable. What a scan
        # cannot see (updates and deletes behind it, inserts below its position) the step's comparison
        # finds after; hence None: the copy is not known to agree with the collection yet.
        target = self.db[to]
        last_id, has_last = self.state.get("last_id"), self.state.get("has_last", False)
        unsure = True  # the first batch of a run may have been written, in part, by the run a crash stopped
        for _pass in range(MAX_PASSES):
            copied = 0
            budget = self.db[collection].estimated_document_count() // self.batch_size + 1
            for batch in self.scan(collection, last_id, has_last, budget=budget):
                documents = [bson.decode(raw_bytes(d)) for d in batch]
                written = self._insert_missing(target, [r for d in documents for r in source.of(d)], unsure)
                unsure = False
                last_id, has_last = documents[-1]["_id"], True
                copied += len(documents)
                self.read += len(documents)
                self.written += written
                self.changelog.checkpoint(
                    self.migration_id, self.index, len(documents), written,
                    last_id=last_id, has_last=True, read=self.read, written=self.written,
                )  # fmt: skip
                self.after_batch(self.read)
            if not copied:
                break  # a pass found nothing behind the last reading copied: caught up
        return None

    def _insert_missing(self, target: Any, dated: list[Any], unsure: bool) -> int:
        """Insert the ``dated`` readings (those ``target`` lacks, when ``unsure``), in order."""
        if unsure and dated:
            present = {d["_id"] for d in target.find({"_id": {"$in": [d["_id"] for d in dated]}}, {"_id": 1})}
            dated = [d for d in dated if d["_id"] not in present]
        if dated:
            target.insert_many(dated, ordered=True)
            for document in dated:
                self.inserted.add(reading_hash(document))
        return len(dated)

    def copied_through(self, collection: str) -> Any:
        last = next(iter(self.db[collection].find({}, {"_id": 1}, sort=[("_id", -1)], limit=1)), None)
        if last is None:
            return None
        self.changelog.step(self.migration_id, self.index, last_id=last["_id"], has_last=True)
        return last["_id"]

    def readings(self, collection: str, time_field: str | None) -> Iterator[dict[str, Any]]:
        where = {} if time_field is None else {time_field: {"$type": "date"}}
        return iter(self.db[collection].find(where, batch_size=self.batch_size))

    def undated(self, collection: str, time_field: str) -> int:
        return self.db[collection].count_documents({time_field: {"$not": {"$type": "date"}}})

    def write_readings(self, to: str, changes: Iterable[Change]) -> None:
        target = self.db[to]
        for chunk in _chunks(changes, self.batch_size):
            # A time-series collection updates no reading before 7.0: a reading in another version is
            # deleted and inserted again. A crash between the two leaves it missing, which the next
            # comparison finds.
            gone = [c.id for c in chunk if c.kind != "missing"]
            if gone:
                try:
                    target.delete_many({"_id": {"$in": gone}})
                except OperationFailure as exc:
                    reason = (exc.details or {}).get("errmsg", str(exc))
                    raise OperationFailed(
                        f"{len(gone):,} reading(s) of {to} must be replaced or removed (the application updated or "
                        f"deleted them in the original collection after they were copied), which this server "
                        f"refuses: {reason}. MongoDB deletes single readings of a time-series collection from "
                        "7.0; before, stop updating and deleting readings, run 'mongopat migrate down' and "
                        "'mongopat migrate up' again"
                    ) from None
            documents = [c.document for c in chunk if c.document is not None]
            if documents:
                target.insert_many(documents, ordered=True)
            self.written += len(documents)
            self.after_batch(self.read)

    def documents(self, collection: str, ids: list[Any]) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for start in range(0, len(ids), self.batch_size):
            found.extend(self.db[collection].find({"_id": {"$in": ids[start : start + self.batch_size]}}))
        return found

    def write_source(self, collection: str, changes: Iterable[Change], expected: Callable[[Any], int | None]) -> int:
        """Each change made only while the document is still the version compared (a compare-and-swap on
        its bytes); returns the changes the application's own writes overtook, left as they are."""
        source, overtaken = self.db[collection], 0
        for chunk in _chunks(changes, self.batch_size):
            inserts = [c.document for c in chunk if c.kind == "missing" and c.document is not None]
            if inserts:
                try:
                    source.insert_many(inserts, ordered=False)
                except BulkWriteError as exc:  # inserted meanwhile by the application: theirs stays
                    errors = exc.details.get("writeErrors", [])
                    if any(error.get("code") != 11000 for error in errors):
                        raise
                    overtaken += len(errors)
                self.written += len(inserts)
            rest = [c for c in chunk if c.kind != "missing"]
            current = {_key(d["_id"]): d for d in source.find({"_id": {"$in": [c.id for c in rest]}})}
            for change in rest:
                found = current.get(_key(change.id))
                if found is None or reading_hash(found) != expected(change.id):
                    overtaken += 1  # changed since it was compared: the application's write stands
                    continue
                where = unchanged_since(found)
                if change.kind == "extra":
                    done = source.delete_one(where).deleted_count
                else:
                    done = source.replace_one(where, change.document).matched_count
                overtaken += 0 if done else 1
                self.written += 1 if done else 0
            self.after_batch(self.written)
        return overtaken

    def drop_timeseries(self, name: str) -> None:
        self.db[name].drop()  # drops the view and its buckets


def _chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
