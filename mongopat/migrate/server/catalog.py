"""The catalog of a MongoDB deployment: database commands (``createIndexes``, ``renameCollection``,
``collMod``...), and copies in ``_id`` order with a checkpoint per batch."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import bson
from pymongo import ReplaceOne
from pymongo.errors import OperationFailure, PyMongoError

from mongopat.migrate.bookkeeping import Changelog
from mongopat.migrate.catalog import Catalog
from mongopat.migrate.server.document_versions import raw_bytes

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
        scan: Callable[[str, Any, bool], Iterator[list[Any]]],
        renew: Callable[[], None],
    ) -> None:
        super().__init__(state.get("stats"))
        self.db, self.changelog, self.migration_id, self.index = db, changelog, migration_id, index
        self.state, self.scan, self.renew = state, scan, renew

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
            self.renew()

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
