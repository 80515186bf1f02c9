"""An application writing while mongopat migrates: random writes, each recorded once MongoDB acknowledged
it, a database wrapper that lets it write before each of mongopat's calls (or a thread that writes all the
while), and the checks that every recorded write is still there.

The wrapper interleaves on one thread, so it runs on mongomock as on a server; the writer thread takes the
application's lock around each call, since mongomock is not thread-safe.
"""

from __future__ import annotations

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
    "subset_sorted": {"step": "subset", "field": "items", "keep": 3, "sort": {"price": -1}, "full_collection": "orders_items_full"},
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
    """mongopat_backup, whose aggregations (a step run inside the server: the side documents made from a
    range's backups, the check of what changed since the rewrite) let the application write first."""

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


def spec_of(name: str) -> dict[str, Any]:
    """The step of a case of :data:`STEPS` on ``orders`` (a case names its step type, or is named after it)."""
    return {"step": name, "collection": "orders", **STEPS[name]}


def setup(db: Any, tmp_path: Any, name: str, seed: int) -> tuple[Any, Any]:
    rng = random.Random(seed)
    db.orders.insert_many([order(i, rng) for i in range(40)])
    db.customers.insert_many([{"_id": i, "name": f"c{i}"} for i in range(7)])
    spec = spec_of(name)
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


def writer_cases(names: list[str]) -> list[Any]:
    """Each step for a test whose application writes while mongopat runs; a step the server computes
    itself also forced to the client side, so that both paths are held to the same guarantees."""
    cases = []
    for name in names:
        spec = spec_of(name)
        if OPERATIONS[spec["step"]].server_stages(build_step(spec)) is None:
            cases.append(pytest.param(name, False, id=name))
            continue
        cases.append(pytest.param(name, False, id=f"{name}-in-server"))
        cases.append(pytest.param(name, True, id=f"{name}-client-side"))
    return cases


# Three seeds per step in the suite; MONGOPAT_ONLINE_SEEDS=50 runs more (see the README's Tests section).
SEEDS = range(1, 1 + int(os.environ.get("MONGOPAT_ONLINE_SEEDS", "3")))


class Crash(Exception):
    """The run dying at that moment (raised by a fault hook)."""


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


def up_and_down_while_writing(
    db: Any, target: Any, app: Application, folder: Any, step: Any, options: RunOptions, recorded: Any
) -> None:
    """``up`` while ``app`` writes on its own thread, a last ``up`` once it stops, then ``down`` to base
    while it writes again: every acknowledged write kept at each end, nothing left in the new shape.
    ``recorded`` checks the step's changelog record after ``up``."""
    with_writer_thread(app, lambda: Runner(target, load_folder(folder), options).up())
    app.enabled = False
    Runner(db, load_folder(folder), options).up()
    recorded(db.mongopat_changelog.find_one({"_id": "0001_online"})["steps"][0])
    assert db.orders.count_documents(OPERATIONS[step.name].pending(step)) == 0
    assert Runner(db, load_folder(folder), options).verify() == {"0001_online": []}
    check_writes_kept(db, app, step)
    app.enabled = True
    with_writer_thread(app, lambda: Runner(target, load_folder(folder), options).down("base"))
    app.enabled = False
    check_writes_kept(db, app, step)
    for doc in db.orders.find():
        assert migrated_fields_gone(step, doc), f"{doc['_id']} still in the new shape after down: {doc}"
