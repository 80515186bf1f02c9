"""Migrations while the application writes: no acknowledged write is lost, reverted or brought back.

The harness wraps the database so that, before calls mongopat makes, a simulated application writes to the
migrated collection: increments of a counter the steps never touch, updates of a field some steps read,
inserts in the old shape, deletes, pushes into the arrays that subset and outlier split. Its writes land in
every window between mongopat's reads and its conditional writes. Every acknowledged write is recorded and
checked after ``up`` (with a final ``up`` once the application stops) and after ``down --to base`` run while
the application keeps writing.

The harness (``tests.support.application``) interleaves on one thread, so it runs in both lanes of the
``mongo`` fixture; the writer-thread tests add a second thread writing all the while.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from mongopat.migrate.operations import OPERATIONS
from mongopat.migrate.runner import RunOptions
from mongopat.migrate.script import load_folder
from mongopat.migrate.server import sharding
from mongopat.migrate.server.runner import Runner
from tests.support.application import (
    SEEDS,
    STEPS,
    Application,
    InterleavingDatabase,
    check_writes_kept,
    migrated_fields_gone,
    order,
    setup,
    up_and_down_while_writing,
    up_with_crashes,
    writer_cases,
)
from tests.support.backend import first_seeds_only


def run_online(db: Any, tmp_path: Any, name: str, seed: int) -> None:
    step, folder = setup(db, tmp_path, name, seed)
    app = Application(db.orders, seed)
    options = RunOptions(batch_size=7)
    Runner(InterleavingDatabase(db, app), load_folder(folder), options).up()
    app.enabled = False
    Runner(db, load_folder(folder), options).up()  # the application stopped: the last old-shape writes
    operation = OPERATIONS[step.name]
    state = db.mongopat_changelog.find_one({"_id": "0001_online"})["steps"][0]
    on_a_server = type(db.client).__module__.startswith("pymongo")
    assert state["in_server"] is (on_a_server and operation.server_stages(step) is not None), state["client_side"]
    assert db.orders.count_documents(operation.pending(step)) == 0
    assert Runner(db, load_folder(folder), options).verify() == {"0001_online": []}
    check_writes_kept(db, app, step)
    if name == "document_versioning":  # every document the run stamped has its first revision
        revisions = {d["_id"]["doc"] for d in db[step.params["history_collection"]].find({"_id.revision": 1})}
        assert {d["_id"] for d in db.orders.find({}, {"_id": 1})} <= revisions
    app.enabled = True
    Runner(InterleavingDatabase(db, app), load_folder(folder), options).down("base")
    app.enabled = False
    check_writes_kept(db, app, step)
    for doc in db.orders.find():
        assert migrated_fields_gone(step, doc), f"{doc['_id']} still in the new shape after down: {doc}"


@pytest.mark.parametrize("name", sorted(STEPS))
@pytest.mark.parametrize("seed", SEEDS)
def test_no_application_write_is_lost_during_up_and_down(mongo, tmp_path, name, seed):
    first_seeds_only(mongo, seed)
    run_online(mongo.db, tmp_path, name, seed)


@pytest.mark.parametrize(("name", "client_side"), writer_cases(sorted(STEPS)))
def test_a_writer_thread_during_up_and_down(mongo, tmp_path, name, client_side):
    """An application writing all the while on its own connection: on a server its writes land whenever
    they land, inside mongopat's commands too (mongomock is not thread-safe: there they interleave between
    mongopat's calls). No acknowledged write is lost, reverted or brought back, by up or by down."""
    db = mongo.db
    step, folder = setup(db, tmp_path, name, 9)
    other = mongo.new_client() if mongo.real else None
    app = Application((other[mongo.db_name] if other is not None else db).orders, 9)
    target = db if other is not None else InterleavingDatabase(db, app)
    options = RunOptions(batch_size=5, client_side=client_side)
    computed_inside = OPERATIONS[step.name].server_stages(step) is not None

    def recorded(state: dict[str, Any]) -> None:
        assert bool(state["in_server"]) is (mongo.real and not client_side and computed_inside), state["client_side"]

    try:
        up_and_down_while_writing(db, target, app, folder, step, options, recorded)
    finally:
        if other is not None:
            other.close()


def test_down_keeps_a_change_and_restores_an_untouched_document_byte_for_byte(mongo, tmp_path):
    db = mongo.db
    step, folder = setup(db, tmp_path, "computed", 4)
    before = {d["_id"]: copy.deepcopy(d) for d in db.orders.find()}
    Runner(db, load_folder(folder)).up()
    db.orders.update_one({"_id": 3}, {"$set": {"status": "paid"}})
    db.orders.delete_one({"_id": 5})
    Runner(db, load_folder(folder)).down("base")
    after = {d["_id"]: d for d in db.orders.find()}
    assert 5 not in after
    assert after[3] == {**before[3], "status": "paid"}
    assert all(after[i] == before[i] for i in after if i != 3)


def test_down_that_cannot_keep_a_change_leaves_the_document_and_exits_1(mongo, tmp_path):
    from mongopat.errors import OperationFailed

    db = mongo.db
    _step, folder = setup(db, tmp_path, "map_to_array", 5)
    Runner(db, load_folder(folder)).up()
    db.orders.update_one({"_id": 2}, {"$push": {"details": {"no_key": 1}}})  # an element no map can hold
    with pytest.raises(OperationFailed, match="could not be put back"):
        Runner(db, load_folder(folder)).down("base")
    assert isinstance(db.orders.find_one({"_id": 2})["details"], list)
    assert isinstance(db.orders.find_one({"_id": 3})["details"], dict)
    assert db.mongopat_changelog.find_one({"_id": "0001_online"})["state"] == "failed"


def test_status_and_up_report_documents_written_in_the_old_shape(mongo, tmp_path):
    db = mongo.db
    _step, folder = setup(db, tmp_path, "computed", 6)
    Runner(db, load_folder(folder)).up()
    db.orders.insert_many([order(500 + i, random.Random(i)) for i in range(3)])
    [row] = Runner(db, load_folder(folder)).status()
    assert row["state"] == "applied" and row["pending_documents"] == 3
    [result] = Runner(db, load_folder(folder)).up()
    assert result["state"] == "caught-up" and result["read"] == 3
    assert db.orders.count_documents({"total": {"$exists": False}}) == 0
    assert Runner(db, load_folder(folder)).status()[0]["pending_documents"] == 0


@pytest.mark.parametrize(
    "name",
    [
        "computed",
        "subset",
        "subset_sorted",
        "outlier",
        "attribute",
        "document_versioning",
        "extended_reference",
        "tree",
    ],
)
def test_crashes_while_the_application_writes_then_resume(mongo, tmp_path, name):
    """A run killed after random batches, resumed while the application keeps writing: the same guarantees."""
    db = mongo.db
    step, folder = setup(db, tmp_path, name, 11)
    app = Application(db.orders, 11)
    up_with_crashes(db, app, folder)
    app.enabled = False
    Runner(db, load_folder(folder), RunOptions(batch_size=7)).up()
    assert db.orders.count_documents(OPERATIONS[step.name].pending(step)) == 0
    assert Runner(db, load_folder(folder)).verify() == {"0001_online": []}
    check_writes_kept(db, app, step)


@pytest.mark.parametrize("name", ["computed", "outlier"])
def test_parallel_workers_write_conditionally_too(mongo, tmp_path, name):
    db = mongo.db
    step, folder = setup(db, tmp_path, name, 12)
    app = Application(db.orders, 12)
    Runner(InterleavingDatabase(db, app), load_folder(folder), RunOptions(batch_size=5, workers=2)).up()
    app.enabled = False
    Runner(db, load_folder(folder), RunOptions(batch_size=5)).up()
    assert db.orders.count_documents(OPERATIONS[step.name].pending(step)) == 0
    check_writes_kept(db, app, step)


def test_check_reports_documents_written_in_the_old_shape(mongo, tmp_path):
    import json

    from typer.testing import CliRunner

    from mongopat.cli import app

    db = mongo.db
    _step, folder = setup(db, tmp_path, "computed", 13)
    Runner(db, load_folder(folder)).up()
    db.orders.insert_one(order(900, random.Random(1)))
    result = CliRunner().invoke(
        app, ["check", *mongo.cli_args(), "--dir", str(folder), "--fail-on", "warning", "-f", "json"]
    )
    found = [f for f in json.loads(result.stdout)["findings"] if f["id"] == "old-shape-documents"]
    assert result.exit_code == 1 and found and found[0]["evidence"]["pending_documents"] == 1


def test_an_application_inserting_faster_than_the_scan_does_not_keep_up_running(mongo, tmp_path):
    """Before every call mongopat makes, the application inserts old-shape documents until it has inserted a
    quarter more than mongopat has migrated, whatever a batch costs in calls on this lane: each pass is
    bounded; what is left is counted, and the next up takes it. (A fixed number per call grows the
    collection geometrically with the calls a batch makes: thousands of documents inside the server.)"""
    db = mongo.db
    step, folder = setup(db, tmp_path, "computed", 14)
    rng = random.Random(3)

    class Flood(Application):
        flooded = 0

        def act(self) -> None:
            if not self.enabled:
                return
            migrated = self.collection.count_documents({"total": {"$exists": True}})
            while self.flooded < 1.25 * migrated + 3:
                self.next_id += 1
                self.flooded += 1
                self.collection.insert_one(order(self.next_id, rng))

    app = Flood(db.orders, 14)
    [result] = Runner(InterleavingDatabase(db, app), load_folder(folder), RunOptions(batch_size=7)).up()
    assert result["state"] == "applied"
    stats = db.mongopat_changelog.find_one({"_id": "0001_online"})["steps"][0]["stats"]
    assert stats["pending_left"] > 0
    app.enabled = False
    # Large batches: what is left is a thousand or so documents on the server lane, not the point here.
    Runner(db, load_folder(folder), RunOptions(batch_size=500)).up()
    assert db.orders.count_documents(OPERATIONS["computed"].pending(step)) == 0


def test_the_run_says_what_the_application_cost_it(mongo, tmp_path):
    """A write that lands between mongopat's read and its write is redone, and the result says so."""
    db = mongo.db
    _step, folder = setup(db, tmp_path, "computed", 15)

    class OneRace(Application):
        def act(self) -> None:
            if self.enabled:
                self.collection.update_one({"_id": 3}, {"$set": {"status": "paid"}})
                self.enabled = False

    class RaceBeforeWrite(InterleavingDatabase):
        def __getitem__(self, name: str) -> Any:
            collection = self._db[name]
            if name != "orders":
                return collection
            app = self._app

            class Orders:
                def __getattr__(self, attribute: str) -> Any:
                    return getattr(collection, attribute)

                def bulk_write(self, *args: Any, **kwargs: Any) -> Any:
                    app.act()
                    return collection.bulk_write(*args, **kwargs)

            return Orders()

    app = OneRace(db.orders, 15)
    # The race is between a read and a compare-and-swap write: the client-side path's (the server's own is
    # in test_migrate_in_server.py).
    options = RunOptions(batch_size=50, client_side=True)
    [result] = Runner(RaceBeforeWrite(db, app), load_folder(folder), options).up()
    assert "step 1 (computed): 1 write(s) lost a race with the application and were redone" in result["notes"]
    assert db.orders.find_one({"_id": 3})["status"] == "paid" and "total" in db.orders.find_one({"_id": 3})


@pytest.mark.parametrize("name", ["outlier", "subset"])
def test_down_merges_back_documents_the_application_wrote_in_the_new_shape(mongo, tmp_path, name):
    """After up, a new application writes a document in the new shape, its tail in the side collection: down
    drops that collection, so it must first merge the tail back, as for a document it changed."""
    db = mongo.db
    step, folder = setup(db, tmp_path, name, 16)
    Runner(db, load_folder(folder)).up()
    items = [{"sku": f"new{i}", "price": i, "qty": 1} for i in range(7)]
    side = db[step.created_collections()[0]]
    if name == "outlier":
        db.orders.insert_one({"_id": 900, "status": "new", "items": items[:3], "has_overflow": True})
        side.insert_many(
            [{"_id": {"parent": 900, "page": 1}, "parentId": 900, "page": 1, "items": items[3:6]},
             {"_id": {"parent": 900, "page": 2}, "parentId": 900, "page": 2, "items": items[6:]}]
        )  # fmt: skip
    else:
        db.orders.insert_one({"_id": 900, "status": "new", "items": items[:3], "itemsCount": 7})
        side.insert_many(
            [{"_id": {"parent": 900, "index": i}, "parentId": 900, "index": i, **item} for i, item in enumerate(items)]
        )
    db.orders.insert_one({"_id": 901, "status": "new", "items": items[:2], "itemsCount": 2, "has_overflow": False})
    Runner(db, load_folder(folder)).down("base")
    assert db.orders.find_one({"_id": 900}) == {"_id": 900, "status": "new", "items": items}
    # A document without elements in the side collection keeps fields of the same names: they are its own.
    assert db.orders.find_one({"_id": 901})["items"] == items[:2]
    assert {"itemsCount", "has_overflow"} <= set(db.orders.find_one({"_id": 901}))
    assert step.created_collections()[0] not in db.list_collection_names()


@pytest.mark.server_only("the server computes the transform, a thread per shard")
@pytest.mark.parametrize("name", ["computed", "subset", "extended_reference", "document_versioning"])
@pytest.mark.parametrize("workers", [None, 3], ids=["two-shards", "three-workers"])
def test_a_writer_thread_while_each_stretch_is_taken_by_its_own_thread(mongo, tmp_path, monkeypatch, name, workers):
    """The orders sharded on a range of _id whose chunks lie on two shards (as config.chunks would say), or
    unsharded with --workers 3: a thread per shard (or part), each taking its stretches, while the
    application writes on its own connection. No acknowledged write is lost, reverted or brought back."""
    breaks = sharding.ShardBreaks((13, 27), ("a", "b", "a")) if workers is None else sharding.ShardBreaks()
    monkeypatch.setattr(
        sharding, "shard_breaks", lambda db, coll: breaks if coll == "orders" else sharding.ShardBreaks()
    )
    db = mongo.db
    step, folder = setup(db, tmp_path, name, 9)
    other = mongo.new_client()
    app = Application(other[mongo.db_name].orders, 9)

    def recorded(state: dict[str, Any]) -> None:
        assert state["in_server"] is True and state["stats"]["threads_at_once"] == (workers or 2)
        assert [stretch["done"] for stretch in state["stretches"]] == [True, True, True]

    try:
        up_and_down_while_writing(db, db, app, folder, step, RunOptions(batch_size=4, workers=workers), recorded)
    finally:
        other.close()
