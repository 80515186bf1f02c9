"""The bucket step while the application writes: no reading is lost, duplicated or brought back.

The application (``tests.support.readings``) is the one the README describes for the transition; the
harness of ``tests.support.application`` lets it write before every call mongopat makes, in both lanes of
the ``mongo`` fixture.
"""

from __future__ import annotations

import datetime
import random
from typing import Any

import bson
import pytest

from mongopat.migrate.operations import bucket, bucket_stages
from mongopat.migrate.runner import RunOptions
from mongopat.migrate.script import load_folder, render
from mongopat.migrate.server.runner import Runner
from mongopat.migrate.steps import build_step
from tests.support.application import (
    SEEDS,
    BeforeBulkWrite,
    Crash,
    InterleavingDatabase,
    up_with_crashes,
    with_writer_thread,
)
from tests.support.backend import first_seeds_only
from tests.support.readings import SPEC, T0, ReadingsApplication, check_readings_kept, every_reading, reading


def setup(db: Any, tmp_path: Any, seed: int, readings: int = 60) -> Any:
    rng = random.Random(seed)
    db.readings.insert_many([reading(i, rng) for i in range(readings)])
    db.readings.insert_one({"_id": 999, "sensor": "s0", "note": "no time: left as it is"})
    folder = tmp_path / f"b{seed}"
    folder.mkdir()
    (folder / "0001_bucket.yaml").write_text(render("0001_bucket", "bucket", [SPEC], "test"))
    return folder


def run_online(db: Any, tmp_path: Any, seed: int, batch_size: int = 7) -> None:
    folder = setup(db, tmp_path, seed)
    app = ReadingsApplication(db.readings, seed)
    options = RunOptions(batch_size=batch_size)
    Runner(InterleavingDatabase(db, app), load_folder(folder), options).up()
    app.enabled = False
    Runner(db, load_folder(folder), options).up()  # the application stopped: its last old-shape readings
    assert db.readings.count_documents(bucket.pending(build_step(SPEC))) == 0
    assert Runner(db, load_folder(folder), options).verify() == {"0001_bucket": []}
    check_readings_kept(db, app)
    assert db.readings.find_one({"_id": 999}) == {"_id": 999, "sensor": "s0", "note": "no time: left as it is"}
    app.enabled, app.new_shape_inserts = True, False  # the application going back to the old shape
    Runner(InterleavingDatabase(db, app), load_folder(folder), options).down("base")
    app.enabled = False
    check_readings_kept(db, app)
    assert db.readings.count_documents(bucket.buckets_filter()) == 0
    assert db.mongopat_backup.count_documents({}) == 0


@pytest.mark.parametrize("seed", SEEDS)
def test_no_reading_is_lost_duplicated_or_brought_back(mongo, tmp_path, seed):
    first_seeds_only(mongo, seed)
    run_online(mongo.db, tmp_path, seed)


def test_buckets_fill_up_while_the_application_pushes_into_them(mongo, tmp_path):
    """Batches larger than a bucket: pushes meet buckets the application filled, and go to the next one."""
    run_online(mongo.db, tmp_path, 21, batch_size=25)


def test_untouched_readings_come_back_byte_for_byte(mongo, tmp_path):
    import bson

    db = mongo.db
    folder = setup(db, tmp_path, 5)
    before = sorted(bson.encode(d) for d in db.readings.find())
    Runner(db, load_folder(folder), RunOptions(batch_size=7)).up()
    assert db.readings.count_documents({"readings": {"$exists": False}}) == 1
    Runner(db, load_folder(folder), RunOptions(batch_size=7)).down("base")
    assert sorted(bson.encode(d) for d in db.readings.find()) == before


def test_crashes_while_the_application_writes_then_resume(mongo, tmp_path):
    db = mongo.db
    folder = setup(db, tmp_path, 11)
    app = ReadingsApplication(db.readings, 11)
    up_with_crashes(db, app, folder)
    app.enabled = False
    Runner(db, load_folder(folder), RunOptions(batch_size=7)).up()
    assert db.readings.count_documents(bucket.pending(build_step(SPEC))) == 0
    assert Runner(db, load_folder(folder)).verify() == {"0001_bucket": []}
    check_readings_kept(db, app)


def test_a_writer_thread_during_up_and_down(mongo, tmp_path):
    db = mongo.db
    folder = setup(db, tmp_path, 9)
    app = ReadingsApplication(db.readings, 9)
    guarded = InterleavingDatabase(db, app)
    with_writer_thread(app, lambda: Runner(guarded, load_folder(folder), RunOptions(batch_size=5)).up())
    app.enabled = False
    Runner(db, load_folder(folder), RunOptions(batch_size=5)).up()
    check_readings_kept(db, app)
    assert db.readings.count_documents(bucket.pending(build_step(SPEC))) == 0
    app.enabled, app.new_shape_inserts = True, False
    with_writer_thread(app, lambda: Runner(guarded, load_folder(folder), RunOptions(batch_size=5)).down("base"))
    app.enabled = False
    check_readings_kept(db, app)
    assert db.readings.count_documents(bucket.buckets_filter()) == 0


def crash_before_delete(db: Any, deletes_before_crash: int) -> BeforeBulkWrite:
    """The readings collection of a run killed after it pushed a batch into buckets, before it deleted the
    readings (the window where a replay must not push them twice)."""
    left = [deletes_before_crash]

    def before(operations: list[Any]) -> None:
        if operations and type(operations[0]).__name__ == "DeleteOne":
            left[0] -= 1
            if left[0] < 0:
                raise Crash()

    return BeforeBulkWrite(db, "readings", before)


@pytest.mark.parametrize("crash_after", [0, 2, 5])
def test_a_crash_between_push_and_delete_is_replayed_without_duplicates(mongo, tmp_path, crash_after):
    """The client side's path (the server's is ``test_a_crash_after_any_command_...``)."""
    db = mongo.db
    folder = setup(db, tmp_path, 30 + crash_after)
    options = RunOptions(batch_size=7, client_side=True)
    with pytest.raises(Crash):
        Runner(crash_before_delete(db, crash_after), load_folder(folder), options).up()
    assert any(len(copies) == 2 for copies in every_reading(db).values())  # pushed, not deleted yet
    Runner(db, load_folder(folder), options).up()
    found = every_reading(db)
    assert sorted(found) == [*range(60)] and all(len(copies) == 1 for copies in found.values())
    assert Runner(db, load_folder(folder)).verify() == {"0001_bucket": []}


def test_status_reports_readings_inserted_after_up_and_up_moves_them(mongo, tmp_path):
    db = mongo.db
    folder = setup(db, tmp_path, 40)
    Runner(db, load_folder(folder)).up()
    rng = random.Random(40)
    db.readings.insert_many([reading(500 + i, rng) for i in range(4)])
    [row] = Runner(db, load_folder(folder)).status()
    assert row["state"] == "applied" and row["pending_documents"] == 4
    [result] = Runner(db, load_folder(folder)).up()
    assert result["state"] == "caught-up" and result["read"] == 4
    assert Runner(db, load_folder(folder)).status()[0]["pending_documents"] == 0
    assert sorted(every_reading(db)) == [*range(60), 500, 501, 502, 503]


def _buckets_by_id(documents: Any) -> tuple[dict[Any, Any], list[Any]]:
    """Buckets as (series, window, sequence) -> (count, reading _ids in order, min, max), and the documents
    that are no bucket."""
    buckets, others = {}, []
    for doc in documents:
        if "readings" not in doc:
            others.append(doc)
            continue
        ident = doc["_id"]
        buckets[(ident["s"], ident["w"], ident["n"])] = (
            doc["count"], [r["_id"] for r in doc["readings"]], doc.get("min") or {}, doc.get("max") or {},
            doc["start"], doc["end"],
        )  # fmt: skip
    return buckets, others


def _bucketed_in_dump_folders(tmp_path: Any, documents: list[dict[str, Any]], folder: Any, batch_size: int) -> dict:
    """The same documents as a BSON dump and as a mongoexport dump, migrated by ``folder``'s migrations:
    their buckets by format (as :func:`_buckets_by_id` gives them)."""
    import bson
    from bson import json_util

    from mongopat.migrate.dump_folder.runner import DumpRunner

    found = {}
    for fmt in ("bson", "json"):
        data = tmp_path / fmt
        data.mkdir()
        if fmt == "bson":
            (data / "readings.bson").write_bytes(b"".join(bson.encode(d) for d in documents))
        else:
            (data / "readings.json").write_text("".join(json_util.dumps(d) + "\n" for d in documents))
        DumpRunner(data, load_folder(folder), RunOptions(batch_size=batch_size)).up()
        found[fmt] = _buckets_by_id(DumpRunner(data, []).files.read("readings"))
    return found


@pytest.mark.parametrize("batch_size", [5, 40])
def test_every_backend_places_each_reading_in_the_same_bucket(mongo, tmp_path, batch_size):
    """One rule places readings (``BucketFill``) whatever keeps the buckets: upserts on a server, decoded
    documents of a BSON dump, the lines of a mongoexport file. Small buckets, many fill up mid-batch."""

    rng = random.Random(batch_size)
    spec = {**SPEC, "max_bucket_size": 4}
    documents: list[dict[str, Any]] = [
        {"_id": i, "sensor": f"s{rng.randint(0, 2)}", "ts": T0 + datetime.timedelta(seconds=rng.randint(0, 3600)),
         "v": rng.choice([rng.randint(0, 100), rng.randint(0, 100) / 4, "n/a", None])}
        for i in range(300)
    ]  # fmt: skip
    documents.append({"_id": 999, "sensor": "s0", "note": "no time: left as it is"})
    folder = tmp_path / "migrations"
    folder.mkdir()
    (folder / "0001_bucket.yaml").write_text(render("0001_bucket", "bucket", [spec], "test"))
    mongo.db.readings.insert_many([dict(d) for d in documents])
    Runner(mongo.db, load_folder(folder), RunOptions(batch_size=batch_size)).up()
    on_server = _buckets_by_id(mongo.db.readings.find())
    assert sum(count for count, *_rest in on_server[0].values()) == 300
    assert max(count for count, *_rest in on_server[0].values()) == 4
    for fmt, found in _bucketed_in_dump_folders(tmp_path, documents, folder, batch_size).items():
        assert found == on_server, fmt


def test_nested_measurements_and_their_placeholders_are_bucketed_alike_on_every_backend(mongo, tmp_path):
    """A measurement inside a sub-document (``air.temp``) is bounded in ``min.air.temp`` on every backend,
    and its placeholder value (999.9, "not measured") stays in the reading but never in min or max."""

    rng = random.Random(7)
    spec = {**SPEC, "max_bucket_size": 50, "measurements": ["air.temp", "v"], "sentinels": {"air.temp": [999.9]}}
    documents: list[dict[str, Any]] = [
        {"_id": i, "sensor": f"s{i % 3}", "ts": T0 + datetime.timedelta(seconds=rng.randint(0, 3600)),
         "v": rng.randint(0, 100), "air": {"temp": rng.choice([999.9, rng.randint(-300, 400) / 10])}}
        for i in range(120)
    ]  # fmt: skip
    folder = tmp_path / "migrations"
    folder.mkdir()
    (folder / "0001_bucket.yaml").write_text(render("0001_bucket", "bucket", [spec], "test"))
    mongo.db.readings.insert_many([dict(d) for d in documents])
    Runner(mongo.db, load_folder(folder), RunOptions(batch_size=16)).up()
    on_server = _buckets_by_id(mongo.db.readings.find())
    assert on_server[0], "no bucket written"
    for _count, ids, low, high, _start, _end in on_server[0].values():
        temps = [documents[i]["air"]["temp"] for i in ids if documents[i]["air"]["temp"] != 999.9]
        assert high.get("air", {}).get("temp") == (max(temps) if temps else None)
        assert low.get("air", {}).get("temp") == (min(temps) if temps else None)
        assert high["v"] == max(documents[i]["v"] for i in ids)
    for fmt, found in _bucketed_in_dump_folders(tmp_path, documents, folder, 16).items():
        assert found == on_server, fmt


# -- inside the server (server/bucket_in_server.py) ------------------------------------------------------


class WrappedCalls:
    """A database whose collections' calls go through :meth:`call` (those named in ``left_alone`` do not)."""

    left_alone: tuple[str, ...] = ()

    def __init__(self, db: Any) -> None:
        self._db = db

    def call(self, name: str, attribute: str, found: Any, args: Any, kwargs: Any) -> Any:
        return found(*args, **kwargs)

    def __getitem__(self, name: str) -> Any:
        collection, outer = self._db[name], self
        if name in self.left_alone:
            return collection

        class Collection:
            def __getattr__(self, attribute: str) -> Any:
                found = getattr(collection, attribute)
                if not callable(found):
                    return found
                return lambda *args, **kwargs: outer.call(name, attribute, found, args, kwargs)

        return Collection()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)


class CrashAfterCommand(WrappedCalls):
    """A database whose ``n``-th call mongopat makes on any collection raises :class:`Crash` right after
    the call has done its work (the run is killed before it records that work). The lock's collection is
    left out: a run killed holding it leaves a lease the next run waits out (``test_migrate_unlock.py``)."""

    left_alone = ("mongopat_lock",)

    def __init__(self, db: Any, n: int) -> None:
        super().__init__(db)
        self.left = n

    def call(self, name: str, attribute: str, found: Any, args: Any, kwargs: Any) -> Any:
        result = found(*args, **kwargs)
        if attribute in ("find", "aggregate", "list_indexes"):
            result = list(result)
        self.left -= 1
        if self.left == 0:
            raise Crash()
        return result


def _snapshot(db: Any) -> tuple[list[bytes], list[bytes]]:
    """The collection and the backups, as bytes in a stable order."""
    return sorted(bson.encode(d) for d in db.readings.find()), sorted(bson.encode(d) for d in db.mongopat_backup.find())


@pytest.mark.server_only("the server computes the buckets")
def test_a_crash_after_any_command_of_the_servers_path_resumes_to_the_same_bytes(mongo, tmp_path):
    """Killed after each of its calls in turn (its work done, not yet recorded), ``up`` resumed gives the
    collection and the backups of a run never stopped, byte for byte; ``down`` then gives the original."""
    options = RunOptions(batch_size=12)  # two ranges and an open last one, of 30 readings
    reference = mongo.client[mongo.db_name + "_whole"]
    try:
        (tmp_path / "whole").mkdir()
        folder = setup(reference, tmp_path / "whole", 13, readings=30)
        original = sorted(bson.encode(d) for d in reference.readings.find())
        counting = CrashAfterCommand(reference, -1)
        Runner(counting, load_folder(folder), options).up()
        calls, whole = -1 - counting.left, _snapshot(reference)
    finally:
        mongo.client.drop_database(reference.name)
    assert calls > 20 and reference.name != mongo.db_name
    db = mongo.db
    for n in range(1, calls + 1):
        mongo.client.drop_database(db.name)
        (tmp_path / str(n)).mkdir()
        folder = setup(db, tmp_path / str(n), 13, readings=30)
        with pytest.raises(Crash):
            Runner(CrashAfterCommand(db, n), load_folder(folder), options).up()
        Runner(db, load_folder(folder), options).up()
        assert _snapshot(db) == whole, f"resumed after call {n}"
    Runner(db, load_folder(folder), options).down("base")
    assert sorted(bson.encode(d) for d in db.readings.find()) == original


@pytest.mark.server_only("the server computes the buckets")
def test_a_crash_after_any_command_of_the_servers_down_resumes_to_the_original_bytes(mongo, tmp_path):
    """``down`` killed after each of its calls in turn, then run again, gives the collection as it was
    before ``up``, byte for byte, and keeps no backup."""
    options = RunOptions(batch_size=12)
    db = mongo.db
    folder = setup(db, tmp_path, 23, readings=30)
    original = sorted(bson.encode(d) for d in db.readings.find())
    Runner(db, load_folder(folder), options).up()
    bucketed = list(db.readings.find())
    backups = list(db.mongopat_backup.find())
    changelog = list(db.mongopat_changelog.find())
    for n in range(1, 1000):
        for name, documents in (
            ("readings", bucketed),
            ("mongopat_backup", backups),
            ("mongopat_changelog", changelog),
        ):
            db[name].drop()
            db[name].insert_many(documents)
        try:
            Runner(CrashAfterCommand(db, n), load_folder(folder), options).down("base")
        except Crash:
            Runner(db, load_folder(folder), options).down("base")
        else:
            break  # the n-th call is past the last: every call was one to crash after
        assert sorted(bson.encode(d) for d in db.readings.find()) == original, f"down resumed after call {n}"
        assert db.mongopat_backup.count_documents({}) == 0
    assert n > 20


@pytest.mark.server_only("the server computes the buckets")
def test_no_reading_travels_between_the_server_and_mongopat(mongo, tmp_path):
    """Inside the server, neither a command nor a reply holds a reading (its marked field), nor a backup."""
    from pymongo import MongoClient, monitoring

    class Seen(monitoring.CommandListener):
        def __init__(self) -> None:
            self.payloads: list[bytes] = []

        def started(self, event: Any) -> None:
            self.payloads.append(bson.encode(event.command))

        def succeeded(self, event: Any) -> None:
            self.payloads.append(bson.encode(event.reply))

        def failed(self, event: Any) -> None:
            pass

    rng = random.Random(3)
    mongo.db.readings.insert_many([{**reading(i, rng), "note": f"marked-{i:04d}"} for i in range(200)])
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "0001_bucket.yaml").write_text(render("0001_bucket", "bucket", [SPEC], "test"))
    original = sorted(bson.encode(d) for d in mongo.db.readings.find())
    seen = Seen()
    client = MongoClient(mongo.uri, event_listeners=[seen], serverSelectionTimeoutMS=5000)
    try:
        [result] = Runner(client[mongo.db_name], load_folder(folder), RunOptions(batch_size=50)).up()
        assert result["notes"][0].endswith("computed inside the server")
        assert len(seen.payloads) > 20 and not [p for p in seen.payloads if b"marked-" in p], "up"
        assert sorted(every_reading(mongo.db)) == [*range(200)]
        seen.payloads.clear()
        Runner(client[mongo.db_name], load_folder(folder), RunOptions(batch_size=50)).down("base")
        assert len(seen.payloads) > 20 and not [p for p in seen.payloads if b"marked-" in p], "down"
    finally:
        client.close()
    assert sorted(bson.encode(d) for d in mongo.db.readings.find()) == original


@pytest.mark.server_only("the server computes the buckets")
def test_a_bucket_already_holding_an_id_keeps_the_readings_meant_for_it(mongo, tmp_path):
    """A document the lookup of a window's newest bucket does not see (another series), holding the ``_id``
    a new bucket would take: the insert-only ``$merge`` keeps it, and the readings meant for that bucket
    are not deleted (the client side's catch-up moves them into the next sequence)."""
    db = mongo.db
    folder = setup(db, tmp_path, 17)
    first = min(db.readings.find({"sensor": "s0"}), key=lambda d: d["_id"])
    window = bucket.window_start(first["ts"], build_step(SPEC))
    squatter = {"_id": {"s": "s0", "w": window, "n": 0}, "sensor": "other", "start": window, "readings": [], "count": 0}
    db.readings.insert_one(dict(squatter))
    [result] = Runner(db, load_folder(folder), RunOptions(batch_size=7)).up()
    found = every_reading(db)
    assert sorted(ident for ident in found if not isinstance(ident, dict)) == [*range(60)]
    assert all(len(copies) == 1 for copies in found.values())
    assert db.readings.find_one({"_id": squatter["_id"]}) == squatter
    assert result["notes"][0].endswith("computed inside the server")


@pytest.mark.server_only("the server computes the buckets")
@pytest.mark.parametrize(("client_side", "expected"), [(False, None), (True, "--client-side")])
def test_the_servers_path_is_taken_unless_the_run_asks_for_the_client_side(mongo, tmp_path, client_side, expected):
    db = mongo.db
    folder = setup(db, tmp_path, 19)
    Runner(db, load_folder(folder), RunOptions(batch_size=7, client_side=client_side)).up()
    [state] = db.mongopat_changelog.find_one()["steps"]
    assert (state["in_server"], state["client_side"]) == (not client_side, expected)
    assert "ts_1" not in db.readings.index_information()  # the index the ranges worked with, dropped


class BeforePublishing:
    """A database that calls ``before()`` once, right before the in-server ``down`` writes a range's readings
    into the collection (the aggregation on the stage that starts by leaving out declined buckets)."""

    def __init__(self, db: Any, before: Any) -> None:
        self._db, self._before = db, before

    def __getitem__(self, name: str) -> Any:
        collection, outer = self._db[name], self

        class Collection:
            def __getattr__(self, attribute: str) -> Any:
                return getattr(collection, attribute)

            def aggregate(self, pipeline: list[Any], *args: Any, **kwargs: Any) -> Any:
                if outer._before is not None and pipeline[:1] == [{"$match": {"declined": False}}]:
                    outer._before, before = None, outer._before
                    before()
                return collection.aggregate(pipeline, *args, **kwargs)

        return Collection()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)


@pytest.mark.server_only("the server computes the buckets")
def test_a_reading_deleted_while_a_bucket_the_client_side_shares_is_unpacked_stays_deleted(mongo, tmp_path):
    """A bucket holding a reading the client side's catch-up moved (its backup is bytes) is declined whole:
    none of its readings is written by the server, so a reading of it the application deletes meanwhile (its
    document not there yet, then pulled from the bucket) is not brought back."""
    db = mongo.db
    folder = setup(db, tmp_path, 29)
    options = RunOptions(batch_size=7)
    Runner(db, load_folder(folder), options).up()
    roomy = db.readings.find_one({"readings": {"$type": "array"}, "count": {"$lt": SPEC["max_bucket_size"]}})
    late = {"_id": 700, "sensor": roomy["sensor"], "ts": roomy["start"], "v": 1, "app_counter": 0}
    db.readings.insert_one(dict(late))
    Runner(db, load_folder(folder), options).up()  # the client side's catch-up: into that bucket's room
    shared = db.readings.find_one({"readings._id": 700})
    victim = next(item["_id"] for item in shared["readings"] if item["_id"] != 700)
    deleted: list[int] = []

    def delete_it() -> None:
        deleted.append(db.readings.delete_one({"_id": victim, "readings": {"$exists": False}}).deleted_count)
        pull = {"$pull": {"readings": {"_id": victim}}, "$inc": {"count": -1}}
        deleted.append(db.readings.update_one({"readings._id": victim}, pull).modified_count)

    Runner(BeforePublishing(db, delete_it), load_folder(folder), options).down("base")
    assert deleted == [0, 1]
    found = every_reading(db)
    assert victim not in found
    assert sorted(found) == sorted([*(i for i in range(60) if i != victim), 700])


@pytest.mark.server_only("the server computes the buckets")
def test_readings_whose_ids_start_with_a_dollar_are_pulled_out_of_their_buckets_when_changed(mongo, tmp_path):
    """Readings the application changes between their stash and their delete are pulled out of the buckets
    by their ``_id``s, sent as a ``let`` variable: ``"$r03"`` is a value there, not a path (without
    ``$literal`` the pull finds nothing, and the reading is in a bucket and a document at once until the
    catch-up)."""
    rng = random.Random(5)
    mongo.db.readings.insert_many([{**reading(i, rng), "_id": f"$r{i:02d}"} for i in range(30)])
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "0001_bucket.yaml").write_text(render("0001_bucket", "bucket", [SPEC], "test"))
    changed: list[Any] = []
    in_buckets_after_the_pull: list[Any] = []

    def change_two_stashed() -> None:
        stashed = [d["_id"] for d in mongo.db.readings.find({bucket_stages.STASHED: {"$exists": True}}).limit(2)]
        mongo.db.readings.update_many({"_id": {"$in": stashed}}, {"$inc": {"app_counter": 1}})
        changed.extend(stashed)

    def look_into_the_buckets() -> None:
        buckets = mongo.db.readings.find({"readings._id": {"$in": changed}}, {"readings._id": 1})
        in_buckets_after_the_pull.extend(r["_id"] for b in buckets for r in b["readings"] if r["_id"] in changed)

    hooks = {"delete_many": change_two_stashed, "unstash": look_into_the_buckets}
    Runner(BeforeCalls(mongo.db, hooks), load_folder(folder), RunOptions(batch_size=12)).up()
    assert len(changed) == 2 and in_buckets_after_the_pull == []
    Runner(mongo.db, load_folder(folder), RunOptions(batch_size=12)).up()
    found = every_reading(mongo.db)
    assert sorted(found) == [f"$r{i:02d}" for i in range(30)]
    assert all(len(copies) == 1 for copies in found.values())
    assert [found[ident][0]["app_counter"] for ident in changed] == [1, 1]


class BeforeCalls(WrappedCalls):
    """A database running each of ``hooks`` once, before the first call on the readings it names: a method
    (``delete_many``), or ``unstash`` for the ``update_many`` that unstashes a range's readings (the
    application writing between mongopat's commands)."""

    def __init__(self, db: Any, hooks: dict[str, Any]) -> None:
        super().__init__(db)
        self.hooks = dict(hooks)

    def call(self, name: str, attribute: str, found: Any, args: Any, kwargs: Any) -> Any:
        if name == "readings":
            unstash = attribute == "update_many" and args and list(args[0]) == [bucket_stages.STASHED]
            hook = "unstash" if unstash and "delete_many" not in self.hooks else attribute
            if (action := self.hooks.pop(hook, None)) is not None:
                action()
        return found(*args, **kwargs)
