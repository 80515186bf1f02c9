"""Migrations while the application writes: no acknowledged write is lost, reverted or brought back.

The harness wraps the database so that, before calls mongopat makes, a simulated application writes to the
migrated collection: increments of a counter the steps never touch, updates of a field some steps read,
inserts in the old shape, deletes, pushes into the arrays that subset and outlier split. Its writes land in
every window between mongopat's reads and its conditional writes. Every acknowledged write is recorded and
checked after ``up`` (with a final ``up`` once the application stops) and after ``down --to base`` run while
the application keeps writing.

mongomock stands in for MongoDB here (one thread interleaving, not a real concurrent writer): it supports
``$expr`` with ``$$ROOT`` and ``$literal``, which the conditional writes use. With MONGOPAT_TEST_URI the same
harness runs against the real server.
"""

from __future__ import annotations

import copy
import os
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from mongopat.migrate.operations import OPERATIONS
from mongopat.migrate.runner import RunOptions
from mongopat.migrate.script import load_folder, render
from mongopat.migrate.server.runner import Runner
from mongopat.migrate.steps import build_step
from tests.conftest import first_seeds_only

BOOKKEEPING = ("mongopat_changelog", "mongopat_lock", "mongopat_backup")
HEX = "0123456789abcdef"


def order(i: int, rng: random.Random) -> dict[str, Any]:
    items = [{"sku": f"s{rng.randint(0, 9)}", "price": rng.randint(1, 20), "qty": rng.randint(1, 3)}]
    items = items * 1 + [
        {"sku": f"s{rng.randint(0, 9)}", "price": rng.randint(1, 20), "qty": 1} for _ in range(rng.randint(0, 7))
    ]
    doc: dict[str, Any] = {
        "_id": i,
        "status": "new",
        "app_counter": 0,
        "customerId": i % 7,
        "parent": i // 2 if i else None,
        "items": items,
        "note": "n",
        "legacy": 1,
        "likes": rng.randint(0, 50),
        "details": {"".join(rng.choice(HEX) for _ in range(24)): {"v": i, "w": rng.random()} for _ in range(2)},
    }
    for name in ("a1", "a2", "a3"):
        if rng.random() < 0.4:
            doc[name] = rng.randint(0, 9)
    return doc


STEPS: dict[str, dict[str, Any]] = {
    "set_field": {"field": "flag", "value": True},
    "unset_field": {"field": "legacy"},
    "rename_field": {"from": "note", "to": "remark"},
    "computed": {"field": "total", "expression": "sum(items.price * items.qty)"},
    "attribute": {"fields": ["a1", "a2", "a3"], "into": "attributes"},
    "map_to_array": {"field": "details", "layout": "merge", "key_field": "k"},
    "polymorphic": {"type_field": "kind", "rules": [{"when_has": "a1", "type": "A"}], "default": "plain"},
    "schema_versioning": {"field": "schemaVersion", "default_version": 2},
    "approximation": {"field": "likes", "factor": 10},
    "tree": {"parent_field": "parent"},
    "extended_reference": {"from": "customers", "local": "customerId", "fields": ["name"], "as": "customer"},
    "pre_aggregation": {"from": "customers", "local": "customerId", "foreign": "_id", "compute": {"n": {"count": True}}, "into": "agg"},
    "document_versioning": {"history_collection": "orders_history"},
    "subset": {"field": "items", "keep": 3, "full_collection": "orders_items_full"},
    "outlier": {"field": "items", "threshold": 3, "overflow_collection": "orders_items_overflow"},
}  # fmt: skip


class Application:
    """Random writes to one collection, each recorded only once MongoDB acknowledged it."""

    def __init__(
        self,
        collection: Any,
        seed: int,
        make: Callable[[int, random.Random], dict[str, Any]] | None = None,
        element: Callable[[random.Random], dict[str, Any]] | None = None,
    ) -> None:
        self.collection = collection
        self.make = make or order  # a new document in the old shape
        self.element = element or (lambda rng: {"sku": f"app{rng.randint(0, 10**6)}", "price": 1, "qty": 1})
        self.rng = random.Random(seed)
        self.next_id = 10_000 + seed * 1000
        self.counters: dict[Any, int] = {}
        self.statuses: dict[Any, str] = {}
        self.pushed: dict[Any, list[dict[str, Any]]] = {}
        self.deleted: set[Any] = set()
        self.inserted: set[Any] = set()
        self.enabled = True
        self.lock = threading.RLock()

    def some_id(self) -> Any:
        ids = [d["_id"] for d in self.collection.find({}, {"_id": 1})]
        return self.rng.choice(ids) if ids else None

    def act(self) -> None:
        if not self.enabled:
            return
        with self.lock:
            for _ in range(self.rng.randint(1, 3)):
                self._one()

    def _one(self) -> None:
        kind = self.rng.choice(("inc", "inc", "status", "push", "insert", "delete"))
        ident = self.some_id()
        if ident is None and kind != "insert":
            return
        if kind == "inc":
            if self.collection.update_one({"_id": ident}, {"$inc": {"app_counter": 1}}).matched_count:
                self.counters[ident] = self.counters.get(ident, 0) + 1
        elif kind == "status":
            status = self.rng.choice(("paid", "shipped", "cancelled"))
            if self.collection.update_one({"_id": ident}, {"$set": {"status": status}}).matched_count:
                self.statuses[ident] = status
        elif kind == "push":
            element = self.element(self.rng)
            if self.collection.update_one(
                {"_id": ident, "items": {"$type": "array"}}, {"$push": {"items": element}}
            ).matched_count:
                self.pushed.setdefault(ident, []).append(element)
        elif kind == "insert":
            self.next_id += 1
            self.collection.insert_one(self.make(self.next_id, self.rng))
            self.inserted.add(self.next_id)
        elif kind == "delete" and self.rng.random() < 0.5 and self.collection.delete_one({"_id": ident}).deleted_count:
            self.deleted.add(ident)


class InterleavingCollection:
    """A collection whose every call (but mongopat's bookkeeping) lets the application write first."""

    def __init__(self, collection: Any, app: Application) -> None:
        self._collection, self._app = collection, app

    def with_options(self, *args: Any, **kwargs: Any) -> InterleavingCollection:
        return InterleavingCollection(self._collection.with_options(*args, **kwargs), self._app)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._collection, name)
        if not callable(attribute) or name.startswith("_"):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            # mongomock is not thread-safe: with a writer thread, each call (and reading its cursor) holds
            # the application's lock, so writes interleave between mongopat's calls, not inside one.
            with self._app.lock:
                self._app.act()
                result = attribute(*args, **kwargs)
                return list(result) if name in ("find", "aggregate") else result

        return call


class BackupCollection:
    """mongopat_backup, whose aggregations (the rewrite of a step run inside the server) let the
    application write first: into the window between a range's backup and its rewrite."""

    def __init__(self, collection: Any, app: Application) -> None:
        self._collection, self._app = collection, app

    def aggregate(self, *args: Any, **kwargs: Any) -> Any:
        with self._app.lock:
            self._app.act()
            return list(self._collection.aggregate(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._collection, name)


class BeforeBulkWrite:
    """A database whose collection ``name`` calls ``before(operations)`` before each bulk write mongopat
    sends it (an application writing, or a crash, at that moment); everything else as the database."""

    def __init__(self, db: Any, name: str, before: Callable[[list[Any]], None]) -> None:
        self._db, self._name, self._before = db, name, before

    def __getitem__(self, name: str) -> Any:
        collection = self._db[name]
        if name != self._name:
            return collection
        before = self._before

        class Collection:
            def __getattr__(self, attribute: str) -> Any:
                return getattr(collection, attribute)

            def bulk_write(self, operations: list[Any], **kwargs: Any) -> Any:
                before(operations)
                return collection.bulk_write(operations, **kwargs)

        return Collection()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)


class InterleavingDatabase:
    def __init__(self, db: Any, app: Application) -> None:
        self._db, self._app = db, app

    def __getitem__(self, name: str) -> Any:
        collection = self._db[name]
        if name == "mongopat_backup":  # a step run inside the server rewrites from its backups: race that too
            return BackupCollection(collection, self._app)
        return collection if name in BOOKKEEPING else InterleavingCollection(collection, self._app)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)


def setup(db: Any, tmp_path: Any, name: str, seed: int) -> tuple[Any, Any]:
    rng = random.Random(seed)
    db.orders.insert_many([order(i, rng) for i in range(40)])
    db.customers.insert_many([{"_id": i, "name": f"c{i}"} for i in range(7)])
    spec = {"step": name, "collection": "orders", **STEPS[name]}
    folder = tmp_path / f"m{seed}"
    folder.mkdir()
    (folder / "0001_online.yaml").write_text(render("0001_online", name, [spec], "test"))
    return build_step(spec), folder


def elements(db: Any, step: Any, doc: dict[str, Any]) -> list[Any]:
    """Every element of a document's items, embedded or moved to the step's side collection."""
    found = list(doc.get("items") or [])
    for created in step.created_collections() if step.name in ("subset", "outlier") else []:
        for side in db[created].find({"parentId": doc["_id"]}):
            if step.name == "outlier":
                found.extend(side.get("items") or [])
            else:  # a full-list entry: the element with its parent and position
                found.append({k: v for k, v in side.items() if k not in ("_id", "parentId", "index")})
    return found


def check_writes_kept(db: Any, app: Application, step: Any) -> None:
    documents = {d["_id"]: d for d in db[app.collection.name].find()}
    assert not (app.deleted & set(documents)), "a deleted document came back"
    assert app.inserted - app.deleted <= set(documents), "an inserted document is missing"
    for ident, count in app.counters.items():
        if ident in documents:
            assert documents[ident]["app_counter"] == count, f"lost increments on {ident}"
    for ident, status in app.statuses.items():
        if ident in documents:
            assert documents[ident]["status"] == status, f"status of {ident} reverted"
    for ident, pushed in app.pushed.items():
        if ident in documents:
            have = elements(db, step, documents[ident])
            assert all(element in have for element in pushed), f"pushed element lost on {ident}"


def run_online(db: Any, tmp_path: Any, name: str, seed: int) -> None:
    step, folder = setup(db, tmp_path, name, seed)
    app = Application(db.orders, seed)
    options = RunOptions(batch_size=7)
    Runner(InterleavingDatabase(db, app), load_folder(folder), options).up()
    app.enabled = False
    Runner(db, load_folder(folder), options).up()  # the application stopped: the last old-shape writes
    operation = OPERATIONS[name]
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


def migrated_fields_gone(step: Any, doc: dict[str, Any]) -> bool:
    """No trace of the new shape the step writes (the fields it adds, the shape it changes)."""
    params = step.params
    name = step.name
    if name == "set_field":
        return "flag" not in doc
    if name == "unset_field":
        return "legacy" in doc
    if name == "rename_field":
        return "remark" not in doc and "note" in doc
    if name == "attribute":
        return "attributes" not in doc
    if name == "map_to_array":
        return isinstance(doc.get("details"), dict)
    if name in ("subset", "outlier"):
        return "itemsCount" not in doc and "has_overflow" not in doc
    added = {
        "computed": ["total"], "polymorphic": ["kind"], "schema_versioning": ["schemaVersion"],
        "approximation": ["likesFactor"], "tree": ["ancestors", "path"], "extended_reference": ["customer"],
        "pre_aggregation": ["agg"], "document_versioning": ["revision"],
    }[name]  # fmt: skip
    return not any(field in doc for field in added) and params is not None


# Three seeds per step in the suite; MONGOPAT_ONLINE_SEEDS=50 runs more (see the README's Tests section).
SEEDS = range(1, 1 + int(os.environ.get("MONGOPAT_ONLINE_SEEDS", "3")))


@pytest.mark.parametrize("name", sorted(STEPS))
@pytest.mark.parametrize("seed", SEEDS)
def test_no_application_write_is_lost_during_up_and_down(mongo, tmp_path, name, seed):
    first_seeds_only(mongo, seed)
    run_online(mongo.db, tmp_path, name, seed)


def with_writer_thread(app: Any, action: Callable[[], Any]) -> None:
    """Run ``action`` while a second thread keeps writing through ``app`` (mongomock is not thread-safe:
    both sides hold the application's lock around each call, so writes interleave between mongopat's
    calls, not inside one)."""
    stop = threading.Event()

    def writer() -> None:
        while not stop.is_set():
            app.act()
            time.sleep(0.001)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        action()
    finally:
        stop.set()
        thread.join()


# SecantusDB runs $merge's whenMatched pipeline as a read, then a delete and an insert: a write landing in
# between is lost (tests/test_conformance.py, test_merge_updates_each_document_atomically).
MERGE_NOT_ATOMIC = "$merge whenMatched beside a second client's $inc: increments lost (in some runs)"


def writer_cases(names: list[str]) -> list[Any]:
    """Each step for a test whose application writes while mongopat runs; a step the server computes
    itself (``$merge``) also forced to the client side, so that where the test engine's ``$merge`` fails
    the guarantee (SecantusDB: test_conformance.py) the client-side path is still checked."""
    cases = []
    for name in names:
        spec = {"step": name, "collection": "orders", **STEPS[name]}
        if OPERATIONS[name].server_stages(build_step(spec)) is None:
            cases.append(pytest.param(name, False, id=name))
            continue
        diverges = pytest.mark.diverges("secantusdb", MERGE_NOT_ATOMIC, sometimes=True)
        cases.append(pytest.param(name, False, id=f"{name}-in-server", marks=diverges))
        cases.append(pytest.param(name, True, id=f"{name}-client-side"))
    return cases


@pytest.mark.parametrize(("name", "client_side"), writer_cases(["computed"]))
def test_a_writer_thread_during_up_and_down(mongo, tmp_path, name, client_side):
    db = mongo.db
    step, folder = setup(db, tmp_path, name, 9)
    app = Application(db.orders, 9)
    guarded = InterleavingDatabase(db, app)
    options = RunOptions(batch_size=5, client_side=client_side)
    with_writer_thread(app, lambda: Runner(guarded, load_folder(folder), options).up())
    app.enabled = False
    Runner(db, load_folder(folder), options).up()
    assert db.orders.count_documents({"total": {"$exists": False}}) == 0
    check_writes_kept(db, app, step)
    app.enabled = True
    with_writer_thread(app, lambda: Runner(guarded, load_folder(folder), options).down("base"))
    app.enabled = False
    check_writes_kept(db, app, step)
    assert db.orders.count_documents({"total": {"$exists": True}}) == 0


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


class Crash(Exception):
    pass


def up_with_crashes(db: Any, app: Any, folder: Any, batch_size: int = 7) -> None:
    """``up`` killed after a random number of batches, again and again, while the application writes,
    until one run completes (at most 20 runs)."""
    rng = random.Random(7)
    for _attempt in range(20):
        crash_at = rng.randint(1, 4)

        def fault(_migration: str, _index: int, done: int, crash_at: int = crash_at) -> None:
            if done >= crash_at * batch_size:
                raise Crash()

        options = RunOptions(batch_size=batch_size, on_batch=fault)
        try:
            Runner(InterleavingDatabase(db, app), load_folder(folder), options).up()
            return
        except Crash:
            continue


@pytest.mark.parametrize("name", ["computed", "subset", "outlier", "attribute", "document_versioning"])
def test_crashes_while_the_application_writes_then_resume(mongo, tmp_path, name):
    """A run killed after random batches, resumed while the application keeps writing: the same guarantees."""
    db = mongo.db
    step, folder = setup(db, tmp_path, name, 11)
    app = Application(db.orders, 11)
    up_with_crashes(db, app, folder)
    app.enabled = False
    Runner(db, load_folder(folder), RunOptions(batch_size=7)).up()
    assert db.orders.count_documents(OPERATIONS[name].pending(step)) == 0
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
    assert db.orders.count_documents(OPERATIONS[name].pending(step)) == 0
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
    """Every call mongopat makes is preceded by three new old-shape documents, more than it migrates per call:
    each pass is bounded; what is left is counted, and the next up takes it."""
    db = mongo.db
    step, folder = setup(db, tmp_path, "computed", 14)
    rng = random.Random(3)

    class Flood(Application):
        def act(self) -> None:
            if self.enabled:
                for _ in range(3):
                    self.next_id += 1
                    self.collection.insert_one(order(self.next_id, rng))

    app = Flood(db.orders, 14)
    [result] = Runner(InterleavingDatabase(db, app), load_folder(folder), RunOptions(batch_size=7)).up()
    assert result["state"] == "applied"
    stats = db.mongopat_changelog.find_one({"_id": "0001_online"})["steps"][0]["stats"]
    assert stats["pending_left"] > 0
    app.enabled = False
    Runner(db, load_folder(folder), RunOptions(batch_size=7)).up()
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
