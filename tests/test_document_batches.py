"""One algorithm for a document step's batches (``mongopat/migrate/document_batches.py``), whatever the
backend: a server on the client side and a dump folder leave the same documents, and both leave a
document already in the new shape as it is."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import bson
import pytest

from mongopat.migrate.document_batches import Change, Version, apply_batch
from mongopat.migrate.dump_folder.runner import DumpRunner
from mongopat.migrate.operations import OPERATIONS, transform
from mongopat.migrate.runner import RunOptions
from mongopat.migrate.script import load_folder
from mongopat.migrate.server.runner import Runner
from mongopat.migrate.steps import build_step
from mongopat.migrate.transform_api import Context, Document
from tests.support.application import BeforeBulkWrite
from tests.support.migrations import STEPS, dataset, write

DOCUMENT_STEPS = sorted(name for name, spec in STEPS.items() if spec["step"] in OPERATIONS)


def shaped_dataset(name: str) -> dict[str, list[Document]]:
    """The test data with every seventh document of the step's collection in the new shape already (as
    the step leaves it, without its side documents: someone else put it in that shape)."""
    step = build_step(STEPS[name])
    data = dataset()
    documents = data[step.collection]
    for position in range(0, len(documents), 7):
        shaped = transform(documents[position], step, Context()).document
        if not OPERATIONS[step.name].is_pending(shaped, step):
            documents[position] = shaped
    return data


def collections_of(read: Any, names: list[str]) -> dict[str, list[bytes]]:
    return {name: sorted(bson.encode(document) for document in read(name)) for name in names}


@pytest.mark.parametrize("name", DOCUMENT_STEPS)
def test_a_server_and_a_dump_folder_leave_the_same_documents(mongo, tmp_path, name):
    step = build_step(STEPS[name])
    data = shaped_dataset(name)
    for collection, documents in data.items():
        mongo.db[collection].insert_many(copy.deepcopy(documents))
    folder = tmp_path / "migrations"
    write(folder, "0001_step", STEPS[name])
    options = RunOptions(batch_size=37, client_side=True)
    Runner(mongo.db, load_folder(folder), options).up()
    dump = tmp_path / "dump"
    dump.mkdir()
    for collection, documents in data.items():
        (dump / f"{collection}.bson").write_bytes(b"".join(bson.encode(d) for d in documents))
    DumpRunner(dump, load_folder(folder), options).up()
    names = [step.collection, *step.created_collections()]
    on_server = collections_of(lambda c: mongo.db[c].find(), names)
    in_folder = collections_of(lambda c: DumpRunner(dump, []).files.read(c), names)
    assert in_folder == on_server
    assert DumpRunner(dump, load_folder(folder), options).verify() == {"0001_step": []}


class Store:
    """A store whose first writes lose to another writer (``losses`` times), as a server's can."""

    def __init__(self, losses: int) -> None:
        self.losses = losses
        self.written: dict[Any, Document] = {}
        self.stored: dict[Any, Document] = {}

    def context(self, step: Any, documents: list[Document]) -> Context:
        return Context()

    def write(self, step: Any, changes: list[Change], replay: bool, stats: dict[str, Any]) -> tuple[int, list[Version]]:
        if self.losses:
            self.losses -= 1
            for version, _result in changes:  # the application changed each document meanwhile
                self.stored[version.document["_id"]] = {**version.document, "app": self.losses}
            return len(changes), [version for version, _result in changes]
        for version, result in changes:
            assert version.document == self.stored[version.document["_id"]]  # transformed from the current one
            self.written[version.document["_id"]] = result.document
        return len(changes), []

    def current(self, step: Any, versions: list[Version], stats: dict[str, Any]) -> list[Version]:
        return [Version(None, self.stored[v.document["_id"]]) for v in versions]


def test_writes_that_lose_are_taken_again_from_the_current_version_a_bounded_number_of_times():
    step = build_step(STEPS["set_field"])
    documents = [{"_id": i, "a": i} for i in range(4)]
    store = Store(losses=2)
    store.stored = {d["_id"]: d for d in documents}
    stats: dict[str, Any] = {}
    apply_batch(store, step, [Version(None, d) for d in documents], stats)
    assert stats == {"conflicts": 8}
    assert [store.written[i] for i in range(4)] == [
        {"_id": i, "a": i, "app": 0, "flags": {"reviewed": False}} for i in range(4)
    ]
    store = Store(losses=99)
    store.stored = {d["_id"]: d for d in documents}
    stats = {}
    apply_batch(store, step, [Version(None, d) for d in documents], stats)
    assert stats["conflicts_unresolved"] == 4 and not store.written  # left in the old shape for a later pass


def test_documents_already_in_the_new_shape_are_not_given_to_the_step(tmp_path: Path):
    step = build_step(STEPS["computed"])
    store = Store(losses=0)
    documents = [{"_id": 1, "items": [{"price": 2, "qty": 3}]}, {"_id": 2, "items": [], "total": 99}]
    store.stored = {d["_id"]: d for d in documents}
    apply_batch(store, step, [Version(None, d) for d in documents], {})
    assert store.written == {1: {"_id": 1, "items": [{"price": 2, "qty": 3}], "total": 6}}


def test_down_leaves_a_document_that_keeps_changing_as_it_is_and_keeps_its_original(mongo, tmp_path):
    """Past the conflict rounds, ``down`` names the document and keeps its original for a later down,
    instead of dropping its backup with the document still in the new shape."""
    from mongopat.errors import OperationFailed
    from tests.support.migrations import load, snapshot

    db = mongo.db
    load(db)
    before = snapshot(db)
    folder = tmp_path / "migrations"
    write(folder, "0001_step", STEPS["set_field"])
    options = RunOptions(batch_size=37, client_side=True)
    Runner(db, load_folder(folder), options).up()
    victim = sorted(d["_id"] for d in db.orders.find({}, {"_id": 1}))[40]
    meddled = []

    def meddle(_operations: list[Any]) -> None:  # the application changes the victim before every write
        db.orders.update_one({"_id": victim}, {"$inc": {"meddled": 1}})
        meddled.append(1)

    with pytest.raises(OperationFailed, match=rf"1 document\(s\) changed by the application .*{victim}"):
        Runner(BeforeBulkWrite(db, "orders", meddle), load_folder(folder), options).down()
    assert db.mongopat_backup.count_documents({}) == 1  # the victim's original, for the next down
    document = db.orders.find_one({"_id": victim})
    assert document["meddled"] == len(meddled) and document["flags"] == {"reviewed": False}
    Runner(db, load_folder(folder), options).down()  # the application stopped: the inverse applies
    document = db.orders.find_one({"_id": victim})
    assert "reviewed" not in document.get("flags", {}) and document["meddled"] == len(meddled)
    assert db.mongopat_backup.count_documents({}) == 0
    db.orders.delete_one({"_id": victim})
    others = bson.encode(db.orders.find_one({"_id": {"$gt": victim}}))
    assert snapshot(db)["orders"] == [raw for raw in before["orders"] if bson.decode(raw)["_id"] != victim]
    assert others in before["orders"]  # every other order has its original bytes
