"""The timeseries step with an application writing: inserts, updates and deletes of readings in the
original collection while ``up`` runs all reach the time-series copy; after the switch, what the
application wrote to the copy goes back on ``down``, readings it left alone keep their bytes, and a reading
changed on both sides since the last ``up`` is refused rather than guessed."""

from __future__ import annotations

import datetime
import random
import threading
from pathlib import Path
from typing import Any

import bson
import pymongo
import pytest
from bson import ObjectId

from mongopat.command import migrate_down, migrate_up
from mongopat.errors import OperationFailed
from mongopat.migrate.script import load_folder
from mongopat.migrate.server.runner import Runner, RunOptions
from mongopat.sources import SourceSpec
from mongopat.sources.dump import DumpSource
from mongopat.timeseries.buckets import BUCKETS_PREFIX, pack
from mongopat.timeseries.options import TimeSeriesOptions
from mongopat.timeseries.sync import canonical
from tests.support.dumps import write_bson_dump
from tests.support.timeseries import NO_TIMESERIES, START, migration_file, readings

pytestmark = pytest.mark.diverges("mongomock", NO_TIMESERIES)


def run(db: Any, folder: Path, **options: Any) -> Runner:
    return Runner(db, load_folder(folder), RunOptions(**{"batch_size": 100, "lock_timeout": 0.3, **options}))


def contents(collection: Any) -> list[bytes]:
    """A collection's readings, each in canonical form (a time-series collection orders fields its way)."""
    return sorted(canonical(d) for d in collection.find())


def raw(collection: Any) -> dict[Any, bytes]:
    return {d["_id"]: bson.encode(d) for d in collection.find()}


class Writer:
    """The application: random inserts, updates and deletes of readings, each acknowledged before the next."""

    def __init__(self, collection: Any, seed: int) -> None:
        self.collection, self.rng = collection, random.Random(seed)
        self.ids = [d["_id"] for d in collection.find({}, {"_id": 1})]
        self.writes = 0

    def act(self) -> None:
        roll = self.rng.random()
        if roll < 0.4 or not self.ids:
            reading = {"_id": ObjectId(), "ts": START + datetime.timedelta(minutes=self.rng.randint(0, 600)),
                       "sensor": f"s{self.rng.randint(0, 9)}", "temp": self.rng.random(), "n": -1}  # fmt: skip
            self.collection.insert_one(reading)
            self.ids.append(reading["_id"])
        elif roll < 0.8:
            self.collection.update_one({"_id": self.rng.choice(self.ids)}, {"$set": {"temp": self.rng.random()}})
        else:
            gone = self.ids.pop(self.rng.randrange(len(self.ids)))
            self.collection.delete_one({"_id": gone})
        self.writes += 1


def test_inserts_updates_and_deletes_while_up_runs_all_reach_the_copy(mongo, tmp_path):
    db = mongo.db
    db.readings.insert_many(readings(1500))
    folder = migration_file(tmp_path / "m")
    app = Writer(db.readings, 1)

    def between_batches(*_args: Any) -> None:
        if app.writes < 42:  # the application writes while the copy and its comparisons run, then stops
            for _ in range(3):
                app.act()

    [result] = run(db, folder, on_batch=between_batches).up()
    assert result["state"] == "applied" and app.writes == 42
    assert contents(db.readings_ts) == contents(db.readings)
    assert run(db, folder).status()[0]["pending_documents"] == 0
    assert run(db, folder).verify() == {"0001_ts": []}


def test_a_writer_thread_on_its_own_connection_during_up(mongo, tmp_path):
    db = mongo.db
    db.readings.insert_many(readings(2000))
    folder = migration_file(tmp_path / "m")
    client = pymongo.MongoClient(mongo.uri)
    app = Writer(client[db.name].readings, 2)
    stop = threading.Event()

    def writer() -> None:
        while not stop.is_set():
            app.act()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        try:
            run(db, folder).up()
        except OperationFailed as exc:  # the application wrote behind up's last comparison
            assert "verification failed" in str(exc)
    finally:
        stop.set()
        thread.join()
        client.close()
    assert app.writes > 0
    # The application stopped: the next up leaves nothing behind (a failed run resumes; an applied one
    # copies what came after it, or verify names what it could not see).
    run(db, folder).up()
    if run(db, folder).verify()["0001_ts"]:
        run(db, folder).down()
        run(db, folder).up()
    assert contents(db.readings_ts) == contents(db.readings)


def test_after_the_switch_down_gives_back_the_application_s_inserts_updates_and_deletes(mongo, tmp_path):
    db = mongo.db
    db.readings.insert_many(readings(600))
    before = raw(db.readings)
    folder = migration_file(tmp_path / "m")
    run(db, folder).up()
    first, second = sorted(before)[:2]
    added = {"_id": ObjectId(), "ts": START, "sensor": "s3", "temp": 9.5, "n": -1}
    db.readings_ts.insert_one(added)  # the application switched: it writes the time-series collection
    db.readings_ts.update_many({"_id": first}, {"$set": {"temp": -40.0}})
    db.readings_ts.delete_many({"_id": second})
    run(db, folder).down()
    assert "readings_ts" not in db.list_collection_names()
    after = raw(db.readings)
    assert second not in after and after[added["_id"]] == bson.encode(added)
    assert bson.decode(after[first])["temp"] == -40.0
    untouched = set(before) - {first, second}
    assert all(after[i] == before[i] for i in untouched), "a reading the application left alone changed"


def test_a_reading_changed_on_both_sides_since_up_is_refused_and_nothing_is_written(mongo, tmp_path):
    db = mongo.db
    db.readings.insert_many(readings(300))
    folder = migration_file(tmp_path / "m")
    run(db, folder).up()
    one, other = sorted(raw(db.readings))[:2]
    db.readings.update_one({"_id": one}, {"$set": {"temp": 1.0}})  # the old collection, before the switch
    db.readings_ts.update_many({"_id": other}, {"$set": {"temp": 2.0}})  # the new one, after it
    kept = raw(db.readings)
    with pytest.raises(OperationFailed, match="cannot tell which write is the application's last"):
        run(db, folder).down()
    assert raw(db.readings) == kept and "readings_ts" in db.list_collection_names()


def test_after_the_switch_up_copies_only_readings_inserted_after_the_copy(mongo, tmp_path):
    db = mongo.db
    db.readings.insert_many(readings(300))
    folder = migration_file(tmp_path / "m")
    run(db, folder).up()
    late = {"_id": ObjectId(), "ts": START, "sensor": "s1", "temp": 2.0, "n": -2}
    db.readings.insert_one(late)  # into the old collection, before the switch
    theirs = {"_id": ObjectId(), "ts": START, "sensor": "s2", "temp": 3.0, "n": -3}
    db.readings_ts.insert_one(theirs)  # into the new one, after it
    first = min(raw(db.readings))
    db.readings_ts.delete_many({"_id": first})  # the application removed a reading from the new collection
    [result] = run(db, folder).up()
    assert result["state"] == "caught-up"
    assert db.readings_ts.count_documents({"_id": late["_id"]}) == 1
    assert db.readings_ts.count_documents({"_id": first}) == 0, "a reading the application deleted came back"
    assert db.readings_ts.count_documents({"_id": theirs["_id"]}) == 1


def test_on_a_dump_folder_down_gives_back_what_the_copy_holds_in_another_version(tmp_path):
    data = tmp_path / "db"
    docs = readings(400)
    write_bson_dump(data, "readings", docs)
    original = (data / "readings.bson").read_bytes()
    spec, folder = SourceSpec(dump=str(data)), migration_file(tmp_path / "m")
    migrate_up(spec, str(folder))
    # The buckets written anew as a restored collection would be dumped after the application wrote it.
    moved = [dict(d) for d, _ in DumpSource(data).documents("readings_ts", None)]
    changed = next(d for d in moved if d["n"] == 5)
    changed["temp"] = 99.0
    moved = [d for d in moved if d["n"] != 7]
    options = TimeSeriesOptions("ts", "sensor", "seconds")
    with (data / f"{BUCKETS_PREFIX}readings_ts.bson").open("wb") as handle:
        for bucket in pack(iter(moved), options):
            handle.write(bson.encode(bucket))
    migrate_down(spec, str(folder), to="base")
    after = {d["n"]: d for d in bson.decode_all((data / "readings.bson").read_bytes())}
    assert 7 not in after and after[5]["temp"] == 99.0 and len(after) == len(docs) - 1
    assert all(bson.encode(after[d["n"]]) == bson.encode(d) for d in docs if d["n"] not in (5, 7))
    # And with the copy left alone, down gives the file back as it was.
    migrate_up(spec, str(folder))
    migrate_down(spec, str(folder), to="base")
    assert sorted(bson.encode(d) for d in bson.decode_all((data / "readings.bson").read_bytes())) == sorted(
        bson.encode(d) for d in after.values()
    )
    assert original != (data / "readings.bson").read_bytes()
