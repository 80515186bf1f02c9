"""The catalog of a MongoDB deployment: database commands (``createIndexes``, ``renameCollection``,
``collMod``...), and copies in ``_id`` order with a checkpoint per batch."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterator
from typing import Any

import bson
from pymongo import ReplaceOne
from pymongo.errors import BulkWriteError, CollectionInvalid, OperationFailure, PyMongoError

from mongopat.errors import OperationFailed
from mongopat.migrate.bookkeeping import Changelog
from mongopat.migrate.catalog import Catalog
from mongopat.migrate.server.document_versions import raw_bytes
from mongopat.timeseries.options import TimeSeriesOptions

# Passes of a copy that chase an application inserting behind it, before the rest is left to the next up.
MAX_PASSES = 5

# What a server adds to an index spec that createIndexes must not be given back.
SERVER_KEYS = ("v", "ns")


class ServerCatalog(Catalog):
    def __init__(
        self,
        db: Any,
        changelog: Changelog,
        migration_id: str,
        index: int,
        state: dict[str, Any],
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

    def copy_measurements(self, collection: str, to: str, options: TimeSeriesOptions) -> None:
        target, time = self.db[to], options.time_field
        last_id, has_last = self.state.get("last_id"), self.state.get("has_last", False)
        unsure = True  # the first batch of a run may have been written, in part, by the run a crash stopped
        for _pass in range(MAX_PASSES):
            copied = 0
            budget = self.db[collection].estimated_document_count() // self.batch_size + 1
            for batch in self.scan(collection, last_id, has_last, budget=budget):
                documents = [bson.decode(raw_bytes(d)) for d in batch]
                written = self._insert_missing(target, documents, time, unsure)
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
        self._reconcile(collection, to, time, last_id, has_last)

    def _insert_missing(self, target: Any, documents: list[Any], time: str, unsure: bool) -> int:
        """Insert the dated ``documents`` (those ``target`` lacks, when ``unsure``), in order."""
        dated = [d for d in documents if isinstance(d.get(time), datetime.datetime)]
        if unsure and dated:
            present = {d["_id"] for d in target.find({"_id": {"$in": [d["_id"] for d in dated]}}, {"_id": 1})}
            dated = [d for d in dated if d["_id"] not in present]
        if dated:
            target.insert_many(dated, ordered=True)
        return len(dated)

    def _reconcile(self, collection: str, to: str, time: str, last_id: Any, has_last: bool) -> None:
        """Counts first: every dated document up to the last copied has its reading. Where one lacks it (a
        document inserted behind the scan, its ``_id`` below ones copied already), a pass over the whole
        collection inserts the readings missing, and only those."""
        source, target = self.db[collection], self.db[to]
        dated = {time: {"$type": "date"}}
        upto = {"_id": {"$lte": last_id}} if has_last else {}
        refused = source.count_documents({time: {"$not": {"$type": "date"}}})
        missing = source.count_documents({**upto, **dated}) - target.count_documents(upto)
        if missing > 0:
            for batch in self.scan(collection, None, False):
                documents = [bson.decode(raw_bytes(d)) for d in batch]
                self.written += self._insert_missing(target, documents, time, True)
                self.after_batch(self.read)
        self.record(refused=refused, reconciled=max(0, missing))

    def copy_back(self, to: str, collection: str) -> None:
        source, back = self.db[to], self.db[collection]
        chunk: list[Any] = []
        for reading in source.find({}):
            chunk.append(reading)
            if len(chunk) >= self.batch_size:
                self._restore(back, chunk)
                chunk = []
        if chunk:
            self._restore(back, chunk)

    def _restore(self, back: Any, readings: list[Any]) -> None:
        present = {d["_id"] for d in back.find({"_id": {"$in": [r["_id"] for r in readings]}}, {"_id": 1})}
        missing = [r for r in readings if r["_id"] not in present]
        if not missing:
            return
        try:
            back.insert_many(missing, ordered=False)
        except BulkWriteError as exc:  # inserted meanwhile by the application: theirs stays
            if any(error.get("code") != 11000 for error in exc.details.get("writeErrors", [])):
                raise
        self.written += len(missing)
        self.after_batch(self.written)

    def missing_measurements(self, collection: str, to: str, time: str) -> int:
        last_id, has_last = self.state.get("last_id"), self.state.get("has_last", False)
        upto = {"_id": {"$lte": last_id}} if has_last else {}
        dated = {time: {"$type": "date"}}
        return max(0, self.db[collection].count_documents({**upto, **dated}) - self.db[to].count_documents(upto))

    def drop_timeseries(self, name: str) -> None:
        self.db[name].drop()  # drops the view and its buckets
