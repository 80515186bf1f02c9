"""An application writing readings while the bucket step runs: it reads both shapes, inserts a reading
as a document or pushes it into the current bucket with its own upsert, and changes or deletes a reading in
either shape (by ``_id``, or by ``readings._id`` in its bucket); and the check that no reading was lost,
held twice or brought back."""

from __future__ import annotations

import datetime
import random
from collections.abc import Callable
from typing import Any

from mongopat.migrate.operations import bucket
from mongopat.migrate.steps import build_step
from tests.support.application import Application

T0 = datetime.datetime(2026, 3, 1)
SPEC = {
    "step": "bucket",
    "collection": "readings",
    "series_key": "sensor",
    "time_field": "ts",
    "window_seconds": 600,
    "measurements": ["v"],
    "max_bucket_size": 6,
}


def reading(ident: int, rng: random.Random) -> dict[str, Any]:
    return {
        "_id": ident,
        "sensor": f"s{rng.randint(0, 2)}",
        "ts": T0 + datetime.timedelta(seconds=rng.randint(0, 3600)),
        "v": rng.randint(0, 100),
        "app_counter": 0,
    }


class ReadingsApplication(Application):
    """Writes readings in both shapes; records every write MongoDB acknowledged (its recording, lock and
    ``act`` are :class:`tests.support.application.Application`'s)."""

    def __init__(
        self,
        collection: Any,
        seed: int,
        spec: dict[str, Any] | None = None,
        make: Callable[[int, random.Random], dict[str, Any]] | None = None,
        skip: frozenset[Any] = frozenset({999}),
    ) -> None:
        super().__init__(collection, seed, make=make or reading)
        self.spec = spec or SPEC
        self.skip = skip  # documents that are not readings (no time): the application leaves them alone
        self.new_shape_inserts = True

    def all_ids(self) -> list[Any]:
        ids = []
        for doc in self.collection.find({}, {"_id": 1, "readings._id": 1}):
            if "readings" in doc or doc["_id"] not in self.skip:  # bucket _ids are documents
                ids.extend([r["_id"] for r in doc["readings"]] if "readings" in doc else [doc["_id"]])
        return ids

    def _one(self) -> None:
        kind = self.rng.choice(("inc", "inc", "insert", "push", "delete"))
        ids = self.all_ids()
        ident = self.rng.choice(ids) if ids else None
        if kind == "inc" and ident is not None:
            # The same change in both shapes: at most one of them holds the reading at a time.
            matched = self.collection.update_one({"_id": ident}, {"$inc": {"app_counter": 1}}).matched_count
            matched += self.collection.update_one(
                {"readings._id": ident}, {"$inc": {"readings.$.app_counter": 1}}
            ).matched_count
            if matched:
                self.counters[ident] = self.counters.get(ident, 0) + 1
        elif kind == "insert" or (kind == "push" and not self.new_shape_inserts):
            self.next_id += 1
            self.collection.insert_one(self.make(self.next_id, self.rng))
            self.inserted.add(self.next_id)
        elif kind == "push":
            # A new reading in the new shape: the application's own upsert into the current bucket.
            self.next_id += 1
            new = self.make(self.next_id, self.rng)
            series_key, spec = self.spec["series_key"], self.spec
            start = bucket.window_start(new[spec["time_field"]], build_step(spec))
            self.collection.update_one(
                {series_key: new[series_key], "start": start, "count": {"$lt": spec["max_bucket_size"]}},
                {
                    "$push": {"readings": {k: v for k, v in new.items() if k != series_key}},
                    "$inc": {"count": 1},
                    "$setOnInsert": {"end": start + datetime.timedelta(seconds=spec["window_seconds"])},
                },
                upsert=True,
            )
            self.inserted.add(self.next_id)
        elif kind == "delete" and ident is not None and self.rng.random() < 0.5:
            deleted = self.collection.delete_one({"_id": ident, "readings": {"$exists": False}}).deleted_count
            deleted += self.collection.update_one(
                {"readings._id": ident}, {"$pull": {"readings": {"_id": ident}}, "$inc": {"count": -1}}
            ).modified_count
            if deleted:
                self.deleted.add(ident)


def every_reading(
    db: Any, collection: str = "readings", spec: dict[str, Any] = SPEC
) -> dict[Any, list[dict[str, Any]]]:
    """Each reading's copies, whichever shape holds them (more than one copy is a duplicate)."""
    found: dict[Any, list[dict[str, Any]]] = {}
    for doc in db[collection].find():
        if "readings" in doc:
            for item in doc["readings"]:
                found.setdefault(item["_id"], []).append({**item, spec["series_key"]: doc[spec["series_key"]]})
        elif spec["time_field"] in doc:
            found.setdefault(doc["_id"], []).append(doc)
    return found


def check_readings_kept(db: Any, app: ReadingsApplication, collection: str = "readings") -> None:
    found = every_reading(db, collection, app.spec)
    duplicated = [ident for ident, copies in found.items() if len(copies) > 1]
    assert not duplicated, f"readings held twice: {duplicated}"
    assert not (app.deleted & set(found)), f"deleted readings came back: {sorted(app.deleted & set(found))}"
    assert app.inserted - app.deleted <= set(found), "an inserted reading is missing"
    for ident, count in app.counters.items():
        if ident in found:
            assert found[ident][0]["app_counter"] == count, f"lost increments on reading {ident}"
    for doc in db[collection].find({"readings": {"$type": "array"}}):
        assert doc["count"] == len(doc["readings"]), f"bucket {doc['_id']} counts {doc['count']}"
