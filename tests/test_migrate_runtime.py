"""Running migrations: up/down round trips per step, crash and resume, the lock, status, verify.

Every test runs in both lanes of the ``mongo`` fixture (mongomock, and a real server: SecantusDB, or
MONGOPAT_TEST_URI's deployment). Where mongomock cannot return raw BSON, mongopat encodes the decoded
document, which keeps field order; what either engine departs from is marked ``diverges``.
"""

import datetime
import random

import pytest

from mongopat.errors import OperationFailed
from mongopat.migrate.bookkeeping import BACKUP, CHANGELOG, LOCK, utcnow
from mongopat.migrate.catalog import index_name
from tests.support.migrations import (
    STEPS,
    dataset,
    final_state_without_faults,
    load,
    oid,
    runner,
    snapshot,
    write,
)


class Boom(RuntimeError):
    pass


@pytest.mark.parametrize("name", sorted(STEPS))
def test_each_step_up_verify_down_restores_the_original_bytes(mongo, tmp_path, name):
    db = mongo.db
    load(db)
    before = snapshot(db)
    write(tmp_path, "0001_step", STEPS[name])
    results = runner(db, tmp_path).up()
    assert results[0]["state"] == "applied"
    assert runner(db, tmp_path).verify() == {"0001_step": []}
    if name == "create_index":
        assert [list(i["key"]) for i in db.orders.list_indexes()] == [["_id"], ["status", "createdAt"]]
    else:
        assert snapshot(db) != before
    assert runner(db, tmp_path).down() == ["0001_step"]
    assert snapshot(db) == before
    assert db[BACKUP].count_documents({}) == 0
    assert db[CHANGELOG].find_one({"_id": "0001_step"})["state"] == "rolled_back"


def test_shapes_after_up(mongo, tmp_path):
    db = mongo.db
    load(db)
    write(
        tmp_path,
        "0001_all",
        STEPS["computed"],
        STEPS["outlier"],
        STEPS["tree"],
        STEPS["pre_aggregation"],
        STEPS["bucket"],
    )
    runner(db, tmp_path).up()
    big = db.orders.find_one({"has_overflow": True})
    assert len(big["items"]) == 20 and db.orders_items_overflow.count_documents({"parentId": big["_id"]}) == 5
    assert isinstance(big["total"], float)  # computed before the items were cut
    assert db.categories.find_one({"_id": "n7"})["ancestors"] == ["root", "n1"]
    assert db.accounts.find_one({"_id": 0})["stats"] == {
        "total": sum(100 + i for i in range(0, 150, 7)),
        "open": sum(1 for i in range(0, 150, 7) if i % 2),
    }
    buckets = list(db.readings.find())
    assert sum(b["count"] for b in buckets) == 900 and all(b["count"] <= 50 for b in buckets)
    # Buckets are built in the collection itself; the readings' bytes are kept for down.
    assert db[BACKUP].count_documents({"_id.m": "0001_all", "_id.s": 4}) == 900
    assert not [name for name in db.list_collection_names() if name.startswith("mongopat_orig")]


@pytest.mark.parametrize("combo", [["computed", "outlier"], ["bucket"], ["subset", "document_versioning"]])
def test_crash_at_random_batches_then_resume_gives_the_same_result(mongo, tmp_path, combo):
    steps = [STEPS[name] for name in combo]
    # On SecantusDB the path inside the server $merges into collections keyed by documents, which it scans
    # for each (README, conformance): seven runs of these steps take minutes. That path is stopped at each
    # of its commands in test_migrate_in_server.py (killed inside a batch) and test_online_buckets.py;
    # here the client side's, whose batches these cuts fall between.
    options = {"client_side": True} if mongo.engine == "secantusdb" else {}
    expected = final_state_without_faults(mongo, tmp_path, steps, **options)
    rng = random.Random(11)
    db = mongo.db
    for attempt in range(6):
        load(db)
        for name in list(db.list_collection_names()):
            if name.startswith("mongopat_") or name not in dataset():
                db[name].drop()
        folder = tmp_path / f"run{attempt}"
        write(folder, "0001_m", *steps)
        cut = rng.randint(1, 20)
        calls = {"n": 0}

        def fault(*_args, cut=cut, calls=calls):
            calls["n"] += 1
            if calls["n"] == cut:
                raise Boom(f"injected at batch {cut}")

        try:
            runner(db, folder, on_batch=fault, **options).up()
        except Boom:
            assert db[CHANGELOG].find_one({"_id": "0001_m"})["state"] == "failed"
        runner(db, folder, **options).up()  # resume
        assert snapshot(db) == expected, f"attempt {attempt}, cut at batch {cut}"
        assert runner(db, folder).verify() == {"0001_m": []}


def test_a_held_lock_stops_a_second_run_and_names_the_holder(mongo, tmp_path):
    db = mongo.db
    load(db)
    write(tmp_path, "0001_m", STEPS["computed"])
    db[LOCK].insert_one(
        {
            "_id": "migrate",
            "holder": "other",
            "host": "ci-runner:4242",
            "acquired_at": utcnow(),
            "expires_at": utcnow() + datetime.timedelta(minutes=5),
        }
    )
    with pytest.raises(OperationFailed, match="ci-runner:4242"):
        runner(db, tmp_path).up()
    assert db.orders.count_documents({"total": {"$exists": True}}) == 0


def test_a_stale_lock_is_taken_over(mongo, tmp_path):
    db = mongo.db
    load(db)
    write(tmp_path, "0001_m", STEPS["computed"])
    db[LOCK].insert_one(
        {
            "_id": "migrate",
            "holder": "dead",
            "host": "killed:1",
            "acquired_at": utcnow(),
            "expires_at": utcnow() - datetime.timedelta(seconds=1),
        }
    )
    assert runner(db, tmp_path).up()[0]["state"] == "applied"
    assert db[LOCK].count_documents({}) == 0  # released at the end


def test_two_runs_exactly_one_applies(mongo, tmp_path):
    db = mongo.db
    load(db)
    write(tmp_path, "0001_m", STEPS["computed"])
    first = runner(db, tmp_path)
    first.lock.acquire(1)
    try:
        with pytest.raises(OperationFailed, match="holds the lock"):
            runner(db, tmp_path).up()
    finally:
        first.lock.release()
    assert runner(db, tmp_path).up()[0]["state"] == "applied"
    assert runner(db, tmp_path).up() == []  # nothing left: applied once


def test_status_pending_applied_and_edited(mongo, tmp_path):
    db = mongo.db
    load(db)
    write(tmp_path, "0001_a", STEPS["computed"])
    write(tmp_path, "0002_b", STEPS["set_field"])
    assert [r["state"] for r in runner(db, tmp_path).status()] == ["pending", "pending"]
    runner(db, tmp_path).up(to="0001_a")
    rows = runner(db, tmp_path).status()
    assert [r["state"] for r in rows] == ["applied", "pending"] and rows[0]["read"] == 230
    path = tmp_path / "0001_a.yaml"
    path.write_text(path.read_text().replace("total", "grand_total"))
    assert runner(db, tmp_path).status()[0]["edited"] is True
    with pytest.raises(OperationFailed, match="changed since they ran: 0001_a"):
        runner(db, tmp_path).up()


def test_dry_run_writes_nothing(mongo, tmp_path):
    db = mongo.db
    load(db)
    before = snapshot(db)
    write(tmp_path, "0001_m", STEPS["computed"], STEPS["bucket"])
    [result] = runner(db, tmp_path, dry_run=True).up()
    assert result["steps"][0]["documents"] == 230 and "total" in result["steps"][0]["examples"][0]["after"]
    assert result["steps"][1]["examples"][0]["after"]["count"] == 3
    assert snapshot(db) == before and CHANGELOG not in db.list_collection_names()


def test_verify_finds_a_lost_original_but_not_a_document_the_application_deleted(mongo, tmp_path):
    db = mongo.db
    load(db)
    write(tmp_path, "0001_m", STEPS["computed"])
    runner(db, tmp_path).up()
    db.orders.delete_one({})  # the application's business
    assert runner(db, tmp_path).verify()["0001_m"] == []
    db.mongopat_backup.delete_one({})
    problems = runner(db, tmp_path).verify()["0001_m"]
    assert problems and "not kept for rollback" in problems[0]


STEP_INDEXES = {
    "subset": (STEPS["subset"]["full_collection"], {"parentId": 1}),
    "bucket": (STEPS["bucket"]["collection"], {"sensor": 1, "start": 1}),
}


@pytest.mark.parametrize("name", ["subset", "bucket"])
def test_verify_finds_an_index_of_the_step_dropped_since(mongo, tmp_path, name):
    """The indexes a step's module declares are the engine's to create, and verify's to check."""
    db = mongo.db
    load(db)
    write(tmp_path, "0001_m", STEPS[name])
    runner(db, tmp_path).up()
    assert runner(db, tmp_path).verify()["0001_m"] == []
    collection, keys = STEP_INDEXES[name]
    db[collection].drop_index(list(keys.items()))
    assert runner(db, tmp_path).verify()["0001_m"] == [f"{collection}: index {index_name(keys)} missing"]


def test_down_drops_only_the_indexes_the_step_added(mongo, tmp_path):
    """An index the collection had before the step is the application's: down keeps it."""
    db = mongo.db
    load_a_slice(db)
    db.readings.create_index([("sensor", 1), ("start", 1)])
    write(tmp_path, "0001_b", STEPS["bucket"])
    write(tmp_path, "0002_s", STEPS["subset"])
    runner(db, tmp_path).up()
    runner(db, tmp_path).down(to="base")
    assert "sensor_1_start_1" in db.readings.index_information()
    assert STEPS["subset"]["full_collection"] not in db.list_collection_names()
    db.readings.drop_index("sensor_1_start_1")
    runner(db, tmp_path).up()
    assert "sensor_1_start_1" in db.readings.index_information()
    runner(db, tmp_path).down(to="base")
    assert "sensor_1_start_1" not in db.readings.index_information()


def test_down_to_base_and_to_an_id(mongo, tmp_path):
    db = mongo.db
    load_a_slice(db)
    before = snapshot(db)
    write(tmp_path, "0001_a", STEPS["computed"])
    write(tmp_path, "0002_b", STEPS["outlier"])
    write(tmp_path, "0003_c", STEPS["bucket"])
    runner(db, tmp_path).up()
    assert runner(db, tmp_path).down(to="0001_a") == ["0003_c", "0002_b"]
    assert [r["state"] for r in runner(db, tmp_path).status()] == ["applied", "pending", "pending"]
    runner(db, tmp_path).up()
    assert runner(db, tmp_path).down(to="base") == ["0003_c", "0002_b", "0001_a"]
    assert snapshot(db) == before


def load_a_slice(db):
    """The dataset with 60 of its 230 orders (two of them with 120 items) and 180 of its 900 readings:
    still several ranges of each step, for tests whose subject is not the data, in a fraction of the
    server lane's time (the in-server path's $merges scan collections keyed by documents on SecantusDB:
    README, conformance)."""
    load(db)
    db.orders.delete_many({"_id": {"$gte": oid(2000 + 60)}})
    db.readings.delete_many({"_id": {"$gte": oid(5000 + 180)}})


def test_python_migrations_run_only_from_py_files(mongo, tmp_path):
    db = mongo.db
    load(db)
    (tmp_path / "0001_py.py").write_text(
        '"""Tag every customer."""\n'
        "def up(db):\n    db.customers.update_many({}, {'$set': {'tagged': True}})\n"
        "def down(db):\n    db.customers.update_many({}, {'$unset': {'tagged': ''}})\n"
    )
    (tmp_path / "0002_yaml.yaml").write_text(
        "id: 0002_yaml\ndescription: x\nsteps:\n- step: unset_field\n  collection: orders\n  field: up(db)\n"
    )
    runner(db, tmp_path).up()
    assert db.customers.count_documents({"tagged": True}) == 12
    runner(db, tmp_path).down(to="base")
    assert db.customers.count_documents({"tagged": True}) == 0


def test_created_collections_must_not_hold_documents(mongo, tmp_path):
    db = mongo.db
    load(db)
    db.orders_history.insert_one({"_id": 1})
    write(tmp_path, "0001_m", STEPS["document_versioning"])
    with pytest.raises(OperationFailed, match="existing collection"):
        runner(db, tmp_path).up()


def test_a_created_collection_made_empty_beforehand_is_emptied_not_dropped_by_down(mongo, tmp_path):
    """One made beforehand (to shard it, or to give it options) keeps what it had once down has run: no
    document, and only its own indexes."""
    db = mongo.db
    load(db)
    db.create_collection("orders_history")
    db.orders_history.create_index("by", name="by_1")
    write(tmp_path, "0001_m", STEPS["document_versioning"])
    runner(db, tmp_path).up()
    assert db.orders_history.count_documents({}) == db.orders.count_documents({})
    runner(db, tmp_path).down(to="base")
    assert "orders_history" in db.list_collection_names()
    assert db.orders_history.count_documents({}) == 0
    assert sorted(index["name"] for index in db.orders_history.list_indexes()) == ["_id_", "by_1"]
