"""Document steps a server computes itself (``server/in_server_steps.py``): the same documents as the client-side
transform, byte for byte, a ``down`` that restores them, resumption after a crash, and the cases that stay
on the client side. The races with an application are in ``test_online.py`` (the same harness drives both
paths: on the server lane these steps run inside the server)."""

from __future__ import annotations

import contextlib
import datetime
import random
import re
import threading
from types import SimpleNamespace
from typing import Any

import bson
import pymongo
import pytest
from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument

from mongopat.errors import OperationFailed
from mongopat.migrate.context_sources import DatabaseDocuments
from mongopat.migrate.operations import OPERATIONS, transform
from mongopat.migrate.runner import RunOptions
from mongopat.migrate.script import load_folder, render
from mongopat.migrate.server import command_lists, restore_in_server, sharding, stretches, unset_in_server
from mongopat.migrate.server.document_steps import DocumentSteps
from mongopat.migrate.server.in_server_steps import InServerSteps, server_pending
from mongopat.migrate.server.runner import Runner
from mongopat.migrate.steps import build_step
from tests.support.application import BackupCollection

STEPS: dict[str, dict[str, Any]] = {
    "set_field": {"field": "flag", "value": {"on": True, "since": 3}},
    "set_field_missing": {"field": "status", "value": "new", "only_missing": True},
    "set_field_text": {"field": "status", "value": "b"},  # over the "a"s: their originals have one
    "unset_field": {"field": "legacy"},
    "rename_field": {"from": "note", "to": "remark"},
    "rename_onto_existing": {"from": "note", "to": "status"},
    "schema_versioning": {"field": "v", "default_version": 2, "rules": [{"when_has": "legacy", "version": 1}]},
    "polymorphic": {"type_field": "kind", "rules": [{"when_missing": "note", "type": "bare"}], "default": None},
    "polymorphic_default": {"type_field": "kind", "rules": [{"when_has": "fee", "type": "paid"}], "default": "x"},
    "approximation": {"field": "likes", "factor": 10},
    "document_versioning": {"history_collection": "items_history", "version_field": "rev"},
    "computed": {"field": "total", "expression": "sum(lines.price * lines.qty)"},
    "computed_arithmetic": {"field": "t", "expression": "(price + fee) * qty / 4 - fee"},
    "computed_average": {"field": "t", "expression": "avg(lines.price / lines.qty + fee)"},
    "computed_maximum": {"field": "t", "expression": "max(lines.price)"},
    "computed_minimum": {"field": "t", "expression": "min(lines.qty - lines.price)"},
    "computed_count": {"field": "n", "expression": "count(lines)"},
    "computed_count_values": {"field": "n", "expression": "count(lines.price * 2)"},
    # Nested paths, read and written as the Python transforms do: never through an array (meta is a
    # sub-document, an array of them, a number, null or missing).
    "set_field_nested": {"field": "meta.seen.by", "value": "x"},
    "set_field_nested_missing": {"field": "meta.b", "value": 0, "only_missing": True},
    "unset_field_nested": {"field": "meta.b"},
    "rename_field_nested": {"from": "meta.b", "to": "meta.c.d"},
    "rename_field_out": {"from": "meta.b", "to": "b"},
    "rename_field_inside": {"from": "meta.b", "to": "meta.e"},
    "computed_nested": {"field": "meta.t", "expression": "price * qty"},
    "attribute": {"fields": ["price", "fee", "legacy", "lines"], "into": "attrs"},
    "attribute_into_existing": {"fields": ["fee", "qty"], "into": "note"},
    "map_to_array": {"field": "meta", "layout": "pair", "key_field": "name", "value_field": "value"},
    "map_to_array_nested": {"field": "meta.b", "layout": "pair"},
    "polymorphic_nested": {"type_field": "kind", "rules": [{"when_has": "meta.b", "type": "b"}], "default": None},
    # Nested version, type and revision fields (meta: a sub-document, an array, a number, null or missing:
    # a prefix that is no document is replaced by one, as set_path does).
    "schema_versioning_nested": {
        "field": "meta.v",
        "default_version": 2,
        "rules": [{"when_has": "meta.b", "version": 1}],
    },
    "polymorphic_nested_type": {
        "type_field": "meta.kind",
        "rules": [{"when_has": "meta.b", "type": "b"}, {"when_missing": "legacy", "type": "new"}],
        "default": None,
    },
    "document_versioning_nested": {"history_collection": "items_history", "version_field": "meta.rev"},
    # A nested counter (meta.b: a number, a document, or under an array or a number).
    "approximation_nested": {"field": "meta.b", "factor": 10},
    # A nested list (meta.z: a list of documents and other values, a number, or under an array).
    "subset_nested": {"field": "meta.z", "keep": 2, "full_collection": "items_full"},
    "subset_sorted_nested_field": {"field": "meta.z", "keep": 1, "sort": {"p": -1}, "full_collection": "items_full"},
    # lines is a list, a sub-document or missing; an element is a document or a number.
    "subset": {"field": "lines", "keep": 2, "full_collection": "items_full"},
    # qty is a number, a non-document element none: in the server; price mixes kinds: mostly declined.
    "subset_sorted": {"field": "lines", "keep": 2, "sort": {"qty": -1}, "full_collection": "items_full"},
    "subset_sorted_mixed": {
        "field": "lines",
        "keep": 3,
        "sort": {"price": 1, "qty": 1},
        "full_collection": "items_full",
    },
    "outlier": {"field": "lines", "threshold": 2, "overflow_collection": "items_overflow"},
    # A nested sort path: each element's price.v does not exist (price is a number or missing), so every
    # element reads None and ties keep the stored order, on both paths.
    "subset_sorted_nested": {"field": "lines", "keep": 2, "sort": {"price.v": 1}, "full_collection": "items_full"},
    # owner is a number of each BSON type, a string, an ObjectId, a date, a boolean, NaN, Decimal128, a
    # document, an array, null or missing; some reference no owner (OWNERS).
    "extended_reference": {"from": "owners", "local": "owner", "fields": ["name", "tier"], "as": "ownedBy"},
    # code is not unique among owners: 1 and 1.0 both, the later found wins (as in Python's dict).
    "extended_reference_code": {
        "from": "owners",
        "local": "owner",
        "foreign": "code",
        "fields": ["name", "missing"],
        "as": "ownedBy",
    },
    "extended_reference_nested": {
        "from": "owners",
        "local": "meta.b",
        "fields": ["name", "tier"],
        "as": "note.owner",
    },
    # parent is an earlier node (an int, a long or a double), one that does not exist, a boolean, a date,
    # null or missing: chains through a double or to a date are the client side's.
    "tree": {"parent_field": "parent"},
    "tree_named": {"parent_field": "parent", "ancestors_field": "up", "path_field": "note"},
    # Nested names: the parent read one level down, the ancestors and the path written into a sub-document
    # (note: a string, null or a document, replaced or kept).
    "tree_nested": {
        "parent_field": "lineage.node.parent",
        "ancestors_field": "note.tree.up",
        "path_field": "note.path",
    },
    # The items of the same owner aggregated (owner: every kind of value, those the server cannot group
    # as Python does left to the client side): numbers of every type with strings, booleans and nulls
    # among them, conditions on a missing field, on true beside 1 and on a document.
    "pre_aggregation": {
        "from": "items",
        "local": "owner",
        "foreign": "owner",
        "compute": {
            "n": {"count": True},
            "total": {"sum": "price"},
            "mean": {"avg": "fee"},
            "low": {"min": "price"},
            "high": {"max": "likes"},
            "paid": {"count": {"status": "a", "likes": 2}},
        },
        "into": "stats",
    },
    # Owners aggregated by code: 1 and 1.0 both, true, a document and an array among the codes.
    "pre_aggregation_owners": {
        "from": "owners",
        "local": "owner",
        "foreign": "code",
        "compute": {"n": {"count": True}, "tiers": {"sum": "tier"}, "top": {"max": "tier"}},
        "into": "stats",
    },
    # A nested key (meta.b: a number, a document, or under an array or a number) and nested aggregates
    # (note: a string, null or a document, so that its prefix is replaced or kept).
    "pre_aggregation_nested_key": {
        "from": "items",
        "local": "meta.b",
        "foreign": "owner",
        "compute": {"n": {"count": True}, "t": {"sum": "price"}},
        "into": "note.stats",
    },
    # A missing note is not null.
    "pre_aggregation_null": {
        "from": "items",
        "local": "owner",
        "foreign": "owner",
        "compute": {"blank": {"count": {"note": None}}, "n": {"count": True}},
        "into": "stats",
    },
    "pre_aggregation_nested": {
        "from": "items",
        "local": "owner",
        "foreign": "owner",
        "compute": {
            "b": {"sum": "meta.b"},
            "mean": {"avg": "meta.b"},
            "deep": {"count": {"note": {"deep": [1, {"x": 2}]}}},
            "one": {"count": {"qty": True}},
            # meta.b read through sub-documents only: meta a document, an array of them, a number...
            "b1": {"count": {"meta.b": 1}},
        },
        "into": "stats",
    },
}
STEP_TYPE = {"set_field_missing": "set_field", "set_field_text": "set_field", "rename_onto_existing": "rename_field",
             "polymorphic_default": "polymorphic", "set_field_nested": "set_field",
             "set_field_nested_missing": "set_field", "unset_field_nested": "unset_field",
             "rename_field_nested": "rename_field", "rename_field_out": "rename_field", "rename_field_inside": "rename_field",
             "polymorphic_nested": "polymorphic", "attribute_into_existing": "attribute",
             "schema_versioning_nested": "schema_versioning", "polymorphic_nested_type": "polymorphic",
             "document_versioning_nested": "document_versioning", "subset_nested": "subset", "approximation_nested": "approximation",
             "subset_sorted_nested_field": "subset",
             "map_to_array_nested": "map_to_array", "subset_sorted": "subset", "subset_sorted_mixed": "subset", "subset_sorted_nested": "subset",
             "extended_reference_code": "extended_reference", "tree_named": "tree", "tree_nested": "tree",
             "pre_aggregation_nested": "pre_aggregation", "pre_aggregation_null": "pre_aggregation",
             "pre_aggregation_owners": "pre_aggregation", "pre_aggregation_nested_key": "pre_aggregation",
             "extended_reference_nested": "extended_reference", **{f"computed_{c}": "computed" for c in
             ("arithmetic", "average", "maximum", "minimum", "count", "count_values", "nested")}}  # fmt: skip
# Numbers of every BSON type and the values that are none: what computed's arithmetic meets in real data.
NUMBERS = [3, 2.5, 0.1, 0.2, 0.3, -0.0, bson.Int64(7), bson.Int64(2**62), 2**31 - 1, 1e308,
           bson.Decimal128("1.10"), bson.Decimal128("-3E+2"), bson.Decimal128("NaN"), float("nan"),
           float("inf"), None, "x", True, [1, 2], {"n": 1}]  # fmt: skip


OWNER_ID = bson.ObjectId("65a000000000000000000001")
WHEN = datetime.datetime(2024, 5, 1, 12, 30)
OWNER_VALUES = [0, 1, 2.0, bson.Int64(3), 4, 99, "o1", "O1", OWNER_ID, WHEN, True, float("nan"), bson.Decimal128("1"),
                {"k": 1}, [1, 2], None]  # fmt: skip
# Referenced documents: numbers, a string, an ObjectId, a date, a document and an array as _id; a name that
# looks like a field path; one without a name; codes that repeat (1 and 1.0).
OWNERS = [
    {"_id": 0, "name": "zero", "tier": 1, "code": 1},
    {"_id": 1, "name": "$one", "tier": {"a": [1, {"b": None}]}, "code": 1.0},
    {"_id": 2, "tier": 2, "code": "o1"},
    {"_id": 3, "name": "three", "code": 3},
    {"_id": "o1", "name": "oh", "tier": 0.5, "code": OWNER_ID},
    {"_id": OWNER_ID, "name": "oid", "code": True},
    {"_id": WHEN, "name": "dated", "tier": None, "code": WHEN},
    {"_id": {"k": 1}, "name": "doc", "code": {"k": 1}},
    {"_id": bson.Decimal128("7"), "name": "decimal", "code": [1, 2]},
]


def parents(i: int) -> list[Any]:
    """What a node's parent may be: an earlier node (no cycle) by an int, a long or a double; a node that
    does not exist (a number, a string, an ObjectId); a boolean, a date, null or missing."""
    earlier = [i // 2, i - 1, i - 1, bson.Int64(i // 3), float(i // 2)] if i else []
    return [*earlier, 999, "o1", OWNER_ID, True, WHEN, None, "missing", "missing"]


def is_nan(value: Any) -> bool:
    if isinstance(value, bson.Decimal128):
        return value.to_decimal().is_nan()
    return isinstance(value, float) and value != value


def documents(count: int, seed: int = 1, nan: bool = True) -> list[dict[str, Any]]:
    """Documents whose fields come and go, with values of every kind a transform may meet (``nan``: NaN
    among the line items' numbers too)."""
    numbers = NUMBERS if nan else [n for n in NUMBERS if not is_nan(n)]
    rng = random.Random(seed)
    found = []
    for i in range(count):
        doc: dict[str, Any] = {"_id": i}
        for name, make in (
            ("status", lambda: rng.choice(["a", "b"])),
            ("price", lambda: rng.choice([3, 2.5, bson.Int64(7), None, "x", True, bson.Decimal128("1.10")])),
            ("qty", lambda: rng.choice([1, 2, 0])),
            ("fee", lambda: rng.choice([0, 4, 1.5])),
            ("note", lambda: rng.choice(["n", None, {"deep": [1, {"x": 2}]}])),
            ("legacy", lambda: 1),
            ("likes", lambda: rng.choice([5, "many", None, 2.0])),
        ):
            if rng.random() < 0.75:
                doc[name] = make()
        lines = random.Random(seed * 100_003 + i)  # apart from rng: the fields above stay what they were
        shape = lines.random()
        if shape < 0.7:
            doc["lines"] = [
                {"price": lines.choice(numbers), "qty": lines.choice(numbers[:12])} if lines.random() < 0.9 else 5
                for _ in range(lines.randrange(5))
            ]
        elif shape < 0.85:
            doc["lines"] = {"price": lines.choice(numbers), "qty": lines.choice(numbers)}
        meta = random.Random(seed * 7_919 + i).choice(
            [
                {"b": 1, "z": [2]},
                {"z": 1},
                {"b": {"q": None}, "c": 5},
                [{"b": 1}],
                5,
                None,
                "missing",
                {"z": [{"p": 1}, 3, {"p": 2}, [4]], "b": 2},
            ]
        )
        if meta != "missing":
            doc["meta"] = meta
        owner = random.Random(seed * 31_337 + i).choice([*OWNER_VALUES, "missing"])
        if owner != "missing" and (nan or not is_nan(owner)):
            doc["owner"] = owner
        parent = random.Random(seed * 65_537 + i).choice(parents(i))
        if parent != "missing":
            doc["parent"] = parent
        # The same parent one level down, or under an array (where Python reads none), or no document.
        doc["lineage"] = [{"node": {"parent": parent}}, {"node": [{"parent": parent}]}, {"node": 5}, {}][i % 7 % 4]
        if parent == "missing" and i % 7 % 4 == 0:
            doc["lineage"] = {"node": {}}
        found.append(doc)
    return found


def migration(tmp_path: Any, case: str) -> Any:
    folder = tmp_path / case
    folder.mkdir()
    spec = {"step": STEP_TYPE.get(case, case), "collection": "items", **STEPS[case]}
    (folder / "0001_step.yaml").write_text(render("0001_step", spec["step"], [spec], "test"))
    return folder


def raw_documents(db: Any, name: str) -> dict[Any, bytes]:
    raw = db[name].with_options(codec_options=CodecOptions(document_class=RawBSONDocument))
    return {bson.encode({"_id": bson.decode(d.raw)["_id"]}): d.raw for d in raw.find()}  # ids of any type


def step_state(db: Any) -> dict[str, Any]:
    return db.mongopat_changelog.find_one({"_id": "0001_step"})["steps"][0]


# The data meets SecantusDB's Decimal128 $subtract, which keeps 28 digits (test_conformance.py).
SUBTRACT_28 = pytest.mark.diverges("secantusdb", "$subtract [Decimal128('1.10'), Decimal128('1E+308')]: 28 digits")


# SecantusDB compares a document or array holding NaN as unequal to itself (test_conformance.py): the
# client side's compare-and-swap, and the in-server check of what up wrote, miss those documents.
NAN_IN_DOCUMENTS = pytest.mark.diverges("secantusdb", "$eq of two equal documents holding NaN: false")


# SecantusDB reads a field missing from a variable's document as null (test_conformance.py): the server's
# count of the documents whose note is null takes those without one too.
MISSING_IS_NULL = pytest.mark.diverges("secantusdb", "$eq of a variable's missing field and null: true")


@pytest.mark.server_only("the server computes the transform")
@pytest.mark.parametrize(
    "case", [pytest.param(c, marks=MISSING_IS_NULL) if c == "pre_aggregation_null" else c for c in sorted(STEPS)]
)
def test_the_server_writes_the_bytes_the_client_side_transform_writes(mongo, tmp_path, case):
    client_db, server_db = mongo.client[mongo.db_name + "_c"], mongo.db
    try:
        for db in (client_db, server_db):
            db.items.insert_many(documents(60, nan=False))
            db.owners.insert_many(OWNERS)
        folder = migration(tmp_path, case)
        before = raw_documents(server_db, "items")
        Runner(client_db, load_folder(folder), RunOptions(batch_size=7, client_side=True)).up()
        Runner(server_db, load_folder(folder), RunOptions(batch_size=7)).up()
        assert step_state(server_db)["in_server"] is True
        assert step_state(client_db)["client_side"] == "--client-side"
        assert raw_documents(server_db, "items") == raw_documents(client_db, "items") != before
        assert step_state(server_db)["stats"].get("conflicts", 0) == 0  # nothing raced: every original kept
        created = [name for name in client_db.list_collection_names() if name.startswith("items_")]
        for name in created:  # side documents (the first revisions), byte for byte too
            assert raw_documents(server_db, name) == raw_documents(client_db, name) != {}
        assert Runner(server_db, load_folder(folder)).verify() == {"0001_step": []}
        Runner(server_db, load_folder(folder), RunOptions(batch_size=7)).down("base")
        assert raw_documents(server_db, "items") == before  # every document left alone: its bytes back
        assert server_db.mongopat_backup.count_documents({}) == 0
        assert not set(created) & set(server_db.list_collection_names())
    finally:
        mongo.client.drop_database(mongo.db_name + "_c")


NAN_LEFT_TO_THE_CLIENT_SIDE = dict.fromkeys(
    [
        "subset_sorted_mixed",
        "tree",
        "tree_named",
        *(f"pre_aggregation{case}" for case in ("", "_nested", "_null", "_owners", "_nested_key")),
    ],  # fmt: skip
    NAN_IN_DOCUMENTS,
)


@pytest.mark.server_only("the server computes the transform")
@pytest.mark.parametrize(
    "case",
    [
        # subset_sorted_mixed: the lists holding NaN are declined, and the client side's compare-and-swap
        # never matches a document holding NaN in an array on the test server.
        # tree: the documents whose chain the server leaves to the client side hold NaN elsewhere.
        # pre_aggregation: a NaN owner is left to the client side.
        pytest.param(c, marks=NAN_LEFT_TO_THE_CLIENT_SIDE.get(c, SUBTRACT_28))
        if c in ("computed_minimum", *NAN_LEFT_TO_THE_CLIENT_SIDE)
        else c
        for c in sorted(STEPS)
    ],
)
def test_documents_holding_nan_get_the_bytes_the_python_transform_gives(mongo, tmp_path, case):
    """NaN and infinities inside the line items, where computed's arithmetic meets them: compared with the
    Python transform itself (the client side's compare-and-swap is what the test server gets wrong)."""
    db = mongo.db
    db.items.insert_many(documents(60))
    db.owners.insert_many(OWNERS)
    folder = migration(tmp_path, case)
    step = load_folder(folder)[0].steps[0]
    operation = OPERATIONS[step.name]
    expected = {}
    for key, raw in raw_documents(db, "items").items():
        doc = bson.decode(raw)  # a document the step leaves alone keeps its bytes
        ctx = operation.context(step, [doc], DatabaseDocuments(db))
        expected[key] = bson.encode(transform(doc, step, ctx).document) if operation.is_pending(doc, step) else raw
    Runner(db, load_folder(folder), RunOptions(batch_size=7)).up()
    assert step_state(db)["in_server"] is True
    assert raw_documents(db, "items") == expected


@pytest.mark.server_only("the server computes the transform")
@NAN_IN_DOCUMENTS
def test_down_gives_documents_holding_nan_their_bytes_back(mongo, tmp_path):
    db = mongo.db
    db.items.insert_many(documents(60))
    folder = migration(tmp_path, "set_field")
    before = raw_documents(db, "items")
    Runner(db, load_folder(folder), RunOptions(batch_size=7)).up()
    Runner(db, load_folder(folder), RunOptions(batch_size=7)).down("base")
    assert raw_documents(db, "items") == before


@pytest.mark.server_only("the server computes the transform")
def test_down_keeps_what_the_application_changed_after_an_up_inside_the_server(mongo, tmp_path):
    db = mongo.db
    db.items.insert_many(documents(30, nan=False))
    folder = migration(tmp_path, "rename_field")
    Runner(db, load_folder(folder), RunOptions(batch_size=4)).up()
    untouched = raw_documents(db, "items")
    changed = [d["_id"] for d in db.items.find({"remark": {"$exists": True}}, {"_id": 1}).limit(3)]
    db.items.update_many({"_id": {"$in": changed}}, {"$set": {"status": "app"}})
    Runner(db, load_folder(folder), RunOptions(batch_size=4)).down("base")
    for doc in db.items.find({"_id": {"$in": changed}}):
        assert doc["status"] == "app" and "note" in doc and "remark" not in doc
    assert not db.items.count_documents({"remark": {"$exists": True}})
    assert untouched.keys() == raw_documents(db, "items").keys()


UNSET_DOWN = ["computed", "extended_reference", "tree", "pre_aggregation_owners", "document_versioning",
              "schema_versioning", "polymorphic_default", "set_field_missing", "set_field_text"]  # fmt: skip


@pytest.mark.server_only("the server computes the transform")
@pytest.mark.parametrize("case", UNSET_DOWN)
def test_down_inside_the_server_writes_the_client_sides_bytes_and_moves_only_ids(mongo, tmp_path, monkeypatch, case):
    """After an up inside the server, a step whose inverse takes out the fields it added reverts inside the
    server (``unset_in_server.py``): the same bytes as the client side's ``down`` on a twin database where
    the application did the same, documents left alone get their original bytes, and no backup goes to
    the client side, which reads none."""
    handed = handed_to_the_client_side(monkeypatch)
    with twin_databases(mongo, tmp_path, case) as targets:
        results = []
        for target, client_side, folder, before in targets:
            Runner(target, load_folder(folder), RunOptions(batch_size=8)).up()
            assert step_state(target)["in_server"]
            added = OPERATIONS[STEP_TYPE.get(case, case)].server_inverse(load_folder(folder)[0].steps[0]).fields
            # Documents whose backups are the server's to revert: their originals lacked the field.
            theirs = {"original": {"$type": "object"}, f"original.{added[0]}": {"$exists": False}}
            changed = [b["_id"]["id"] for b in target.mongopat_backup.find(theirs).sort("_id", 1).limit(6)]
            target.items.update_many({"_id": {"$in": changed[:3]}}, {"$set": {"note": "app"}})  # another field
            target.items.update_many({"_id": {"$in": changed[3:5]}}, {"$set": {added[0]: "app"}})  # its field
            target.items.delete_one({"_id": changed[5]})
            target.items.insert_one({"_id": 1000, added[0]: "app's own"})  # in the new shape, no backup
            handed.clear()
            kept = target.mongopat_backup.count_documents({})
            # Those the client side made, of documents the server left it (a reference of a type it declines, a
            # chain it does not walk as Python does): the client side's to revert.
            made_on_the_client_side = target.mongopat_backup.count_documents({"raw": {"$exists": True}})
            Runner(target, load_folder(folder), RunOptions(batch_size=8, client_side=client_side)).down("base")
            results.append(raw_documents(target, "items"))
            # Those whose original had the field (set_field over a value), left alone, get it back inside the
            # server too (restore_in_server.py).
            assert len(handed) == (kept if client_side else made_on_the_client_side)
            assert made_on_the_client_side < kept  # the server took some
            touched = {bson.encode({"_id": ident}) for ident in changed}
            left_alone = {key: value for key, value in before.items() if key not in touched}
            assert {key: results[-1][key] for key in left_alone} == left_alone
            assert target.mongopat_backup.count_documents({}) == 0
        assert results[0] == results[1]


# Steps whose down needs the original (or, for set_field over a value, the original had the field):
# restore_in_server.py gives the documents left alone theirs inside the server.
RESTORE_DOWN = ["set_field", "set_field_text", "unset_field", "rename_field", "rename_onto_existing", "approximation",
                "attribute", "map_to_array", "subset", "outlier", "unset_field_nested", "rename_field_nested",
                "set_field_nested", "approximation_nested", "map_to_array_nested", "subset_nested", "rename_field_inside"]  # fmt: skip


@pytest.mark.server_only("the server computes the transform")
@pytest.mark.parametrize("case", RESTORE_DOWN)
def test_down_inside_the_server_restores_the_originals_of_documents_left_alone(mongo, tmp_path, monkeypatch, case):
    """After an up inside the server, the documents left alone get their originals back inside the server
    (``restore_in_server.py``); those the application changed or deleted go to the client side's down,
    with the backups the client side made. The bytes are those of the client side's down on a twin
    database where the application did the same."""
    handed = handed_to_the_client_side(monkeypatch)
    with twin_databases(mongo, tmp_path, case) as targets:
        results = []
        for target, client_side, folder, before in targets:
            step = load_folder(folder)[0].steps[0]
            Runner(target, load_folder(folder), RunOptions(batch_size=8)).up()
            assert step_state(target)["in_server"]
            # Documents whose backups are this module's: made inside the server, and not the unsetting's.
            theirs: dict[str, Any] = {"original": {"$type": "object"}, "raced": {"$ne": True}}
            if (inverse := OPERATIONS[step.name].server_inverse(step)) is not None:
                theirs[f"original.{inverse.fields[0]}"] = {"$exists": True}
            changed = [b["_id"]["id"] for b in target.mongopat_backup.find(theirs).sort("_id", 1).limit(4)]
            assert len(changed) == 4
            target.items.update_many({"_id": {"$in": changed[:3]}}, {"$set": {"qty": "app"}})
            target.items.delete_one({"_id": changed[3]})
            target.items.insert_one({"_id": 1000, "qty": "app's own"})  # in the old shape, no backup
            handed.clear()
            made_on_the_client_side = [b["_id"]["id"] for b in target.mongopat_backup.find({"raw": {"$exists": True}})]
            Runner(target, load_folder(folder), RunOptions(batch_size=8, client_side=client_side)).down("base")
            results.append(raw_documents(target, "items"))
            if not client_side:
                assert sorted(handed) == sorted(made_on_the_client_side + changed)
            touched = {bson.encode({"_id": ident}) for ident in changed}
            left_alone = {key: value for key, value in before.items() if key not in touched}
            assert {key: results[-1][key] for key in left_alone} == left_alone
            assert target.mongopat_backup.count_documents({}) == 0
            assert not target.items.count_documents({"__mongopat_original": {"$exists": True}})
        assert results[0] == results[1]


@pytest.mark.server_only("the server computes the transform")
def test_a_restore_inside_the_server_sends_patches_holding_dollar_strings_as_values(mongo, tmp_path, monkeypatch):
    """An original's ``"$price"`` or DBRef is a value, not an expression, in the restore's let variables, and
    field names with a dollar or a dot come back where they were."""
    db = mongo.db
    db.items.insert_many(
        [
            {"_id": i, "$odd": 1, "note": "$price", "a.b": 2, "ref": bson.DBRef("owners", i), "tags": ["$a", {"$b": 1}]}
            for i in range(12)
        ]
    )
    before = raw_documents(db, "items")
    folder = migration(tmp_path, "rename_field")
    Runner(db, load_folder(folder), RunOptions(batch_size=5)).up()
    assert step_state(db)["in_server"] and db.mongopat_backup.count_documents({"original": {"$type": "object"}})
    handed = handed_to_the_client_side(monkeypatch)
    Runner(db, load_folder(folder), RunOptions(batch_size=5)).down("base")
    assert raw_documents(db, "items") == before
    assert handed == []


GROUPS = [
    # (rows of the patches' aggregation, GROUP_IDS, the groups of _ids sharing a patch)
    ([{"i": 1, "q": "A"}, {"i": 2}, {"i": 3}], 9, [("A", [1, 2, 3])]),
    ([{"i": 1, "q": "A"}, {"i": 2, "q": "B"}, {"i": 3, "s": 2}, {"i": 4, "s": 2}], 9, [("A", [1, 3]), ("B", [2, 4])]),
    ([{"i": 1, "q": "A"}, {"i": 2, "q": None}, {"i": 3, "s": 2}, {"i": 4, "q": "A"}], 9, [("A", [1, 3]), ("A", [4])]),
    ([{"i": 1, "q": None}, {"i": 2, "q": None}], 9, []),
    (
        [{"i": 1, "q": "A"}, {"i": 2}, {"i": 3}, {"i": 4}, {"i": 5, "s": 4}],
        2,
        [("A", [1, 2]), ("A", [3, 4]), ("A", [5])],
    ),
]


@pytest.mark.parametrize(("rows", "group_ids", "expected"), GROUPS)
def test_rows_naming_a_patch_before_them_join_its_group(monkeypatch, rows, group_ids, expected):
    monkeypatch.setattr(restore_in_server, "GROUP_IDS", group_ids)
    assert restore_in_server._groups(rows) == expected


PACKED = [
    # (rows of a reply: _id and the fields a run keeps, the bytes of _ids a run holds at most, runs' lengths)
    ([{"i": n} for n in range(6)], 4 * 2**20, [6]),
    ([{"i": 1, "q": "A"}, {"i": 2}, {"i": 3, "q": None}, {"i": 4}, {"i": 5, "s": 2}, {"i": 6}], 4 * 2**20, [2, 2, 2]),
    ([{"i": 1, "q": "A"}, {"i": 2, "q": "B"}, {"i": 3, "s": 2}], 4 * 2**20, [1, 1, 1]),
    # {i: <ObjectId>} is 20 bytes: a run of 2 at most, cut again where a row begins one
    ([{"i": bson.ObjectId(), **({"q": "A"} if n == 3 else {})} for n in range(7)], 40, [1, 2, 2, 2]),
    ([{"i": f"{n:03}", "q": {"v": n, "w": [n]}} for n in range(3)], 4 * 2**20, [1, 1, 1]),
]


@pytest.mark.server_only("$setWindowFields: the test double runs none")
@pytest.mark.parametrize(("rows", "limit", "runs"), PACKED)
def test_rows_packed_into_runs_come_back_as_they_were(mongo, rows, limit, runs):
    """A reply's rows packed into runs (their _ids in one array, the first row's fields kept) are the same
    rows, in their order, once unpacked; a run ends where a row begins one and after ``limit`` bytes."""
    mongo.db.rows.insert_many([{"_id": n, **row} for n, row in enumerate(rows)])
    starts = restore_in_server.OWN_OR_NAMED
    stages = [{"$project": {"_id": 0}}, *command_lists.packed_rows("i", starts, {"q": "$q", "s": "$s"}, limit)]
    packed = list(mongo.db.rows.aggregate(stages))
    assert [len(run["i"]) if isinstance(run["i"], list) else 1 for run in packed] == runs
    assert command_lists.unpacked(packed) == rows


@pytest.mark.server_only("the server computes the transform")
@pytest.mark.parametrize(
    ("case", "patches_sent"), [("rename_field", [2, 1, 1]), ("set_field", [1, 1, 1]), ("attribute", [1, 1, 1])]
)
def test_a_restore_inside_the_server_sends_a_patch_once_for_the_documents_sharing_it(
    mongo, tmp_path, monkeypatch, case, patches_sent
):
    """Documents whose patches hold no value (a field added, or renamed or moved into the pairs of an
    attribute array: its value is in the document) and are alike travel as their ``_id``s and one patch;
    the sixth document, whose note has another place, has its own, and the documents after it share the
    first five's again (the attribute step leaves the sixth alone: no backup)."""
    db = mongo.db
    db.items.insert_many(
        [{"_id": i, "status": "a", "note": f"n{i}", "price": i * 1.5, "qty": i, "fee": bson.Int64(i % 3)}
         if i != 5 else {"_id": i, "note": "x", "qty": i} for i in range(30)]
    )  # fmt: skip
    before = raw_documents(db, "items")
    folder = migration(tmp_path, case)
    Runner(db, load_folder(folder), RunOptions(batch_size=10)).up()
    assert step_state(db)["in_server"]
    sent: list[int] = []
    update_many = pymongo.collection.Collection.update_many

    def recording(self: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("let") and "patches" in kwargs["let"]:
            sent.append(len(kwargs["let"]["patches"]["$literal"]))
        return update_many(self, *args, **kwargs)

    monkeypatch.setattr(pymongo.collection.Collection, "update_many", recording)
    handed = handed_to_the_client_side(monkeypatch)
    Runner(db, load_folder(folder), RunOptions(batch_size=10)).down("base")
    assert raw_documents(db, "items") == before and handed == []
    assert sent == patches_sent


MERGE_CASES = {
    "merge": {"field": "rooms", "layout": "merge"},
    "key_in_value": {"field": "rooms", "layout": "merge", "key_in_value": True},
    "nested": {"field": "home.rooms", "layout": "merge", "key_field": "number"},
}


def nested_rooms(count: int) -> list[dict[str, Any]]:
    """Documents whose ``rooms.a`` holds the key ``old`` second, or (every third) first."""
    return [{"_id": i, "floor": i % 3, "rooms": {"a": {"old": i, "p": 1} if i % 3 == 0 else {"p": 1, "old": [i], "q": 2}}}
            for i in range(count)]  # fmt: skip


def coded(values: list[Any]) -> list[dict[str, Any]]:
    """40 documents holding ``values`` in turn, as ``code`` and as ``rooms.a.old`` (second in ``rooms.a``)."""
    return [{"_id": i, "floor": i % 3, "rooms": {"a": {"p": 1, "old": values[i % len(values)]}},
             "code": values[i % len(values)]} for i in range(40)]  # fmt: skip


# Values $eq takes for one another: shared only when their types are the same and they are no double or decimal.
ONE = [1, 1.0, bson.Int64(1), "1", -0.0, 1, 1.0, bson.Int64(1), "1", 0.0]
ONE_SENT = [1, 1.0, bson.Int64(1), "1", -0.0, 1.0, 0.0]
WHEN = datetime.datetime(2026, 1, 2, 3, 4, 5, 6000)
DECIMALS = [bson.Decimal128("1.0"), bson.Decimal128("1.00"), True, None, WHEN] * 2
DECIMALS_SENT = [*DECIMALS[:2], True, None, WHEN, *DECIMALS[:2]]

NAMED_PATCHES = {
    # a step, its documents, the patches each update sends (documents sharing one), their entries
    "pair": ({"field": "rooms", "layout": "pair"}, lambda: rooms(40, False), 1, [{"i": 2, "k": "rooms", "u": 0}]),
    "merge": (MERGE_CASES["merge"], lambda: rooms(40, False), 1, [{"i": 2, "k": "rooms", "u": 0}]),
    "key_in_value": (MERGE_CASES["key_in_value"], lambda: rooms(40, True), 1, [{"i": 2, "k": "rooms", "u": 0}]),
    "rename nested": (
        {"step": "rename_field", "from": "rooms.a.old", "to": "rooms.a.new"},
        lambda: nested_rooms(40),
        2,
        [{"i": 2, "k": "rooms", "u": 0}, {"i": 2, "k": "rooms", "u": 1}],
    ),
    # A key the originals lacked: taken out again, nothing held, so shared.
    "set nested": (
        {"step": "set_field", "field": "rooms.a.new", "value": 1},
        lambda: nested_rooms(40),
        1,
        [{"i": 2, "k": "rooms", "u": -1}],
    ),  # fmt: skip
    # A key taken out: put back with each original's own value, held by its own patch.
    "unset nested": (
        {"step": "unset_field", "field": "rooms.a.old"},
        lambda: nested_rooms(40),
        10,
        [{"i": 2, "k": "rooms", "u": int(i % 3 != 0), "w": i if i % 3 == 0 else [i]} for i in range(40)],
    ),  # fmt: skip
    # A value taken out that documents hold alike (a code): one patch holds it for all of them.
    "unset alike": ({"step": "unset_field", "field": "code"}, lambda: coded(["V020"]), 1,
                    [{"i": 3, "k": "code", "v": "V020"}]),
    "unset nested alike": ({"step": "unset_field", "field": "rooms.a.old"}, lambda: coded(["1", "5", "9", "1", "5"]),
                           3, [{"i": 2, "k": "rooms", "u": 1, "w": code} for code in ("1", "5", "9")]),
    "unset numbers": ({"step": "unset_field", "field": "code"}, lambda: coded(ONE), 7,
                      [{"i": 3, "k": "code", "v": value} for value in ONE_SENT]),
    "unset nested numbers": ({"step": "unset_field", "field": "rooms.a.old"}, lambda: coded(ONE), 7,
                             [{"i": 2, "k": "rooms", "u": 1, "w": value} for value in ONE_SENT]),
    "unset decimals": ({"step": "unset_field", "field": "code"}, lambda: coded(DECIMALS), 7,
                       [{"i": 3, "k": "code", "v": value} for value in DECIMALS_SENT]),
}  # fmt: skip


@pytest.mark.server_only("the server computes the transform")
@pytest.mark.parametrize("case", sorted(NAMED_PATCHES))
def test_a_restore_inside_the_server_names_a_value_the_step_rewrote_losing_nothing(mongo, tmp_path, monkeypatch, case):
    """The original's map is the array ``up`` made of it made a map again, a sub-document with a key
    renamed is the old key again at its place (``server_unmade``): every patch names the value instead of
    holding it, so the documents of a range share one for each place; the bytes come back, and no document
    goes to the client side."""
    params, make, per_update, entries = NAMED_PATCHES[case]
    db = mongo.db
    db.items.insert_many(make())
    before = raw_documents(db, "items")
    folder = map_migration(tmp_path, params)
    Runner(db, load_folder(folder), RunOptions(batch_size=10)).up()
    assert step_state(db)["in_server"] and db.mongopat_backup.count_documents({"original.rooms": {"$type": "object"}})
    sent: list[Any] = []
    update_many = pymongo.collection.Collection.update_many

    def recording(self: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("let") and "patches" in kwargs["let"]:
            sent.append([bson.decode(patch.raw) for patch in kwargs["let"]["patches"]["$literal"]])
        return update_many(self, *args, **kwargs)

    monkeypatch.setattr(pymongo.collection.Collection, "update_many", recording)
    handed = handed_to_the_client_side(monkeypatch)
    Runner(db, load_folder(folder), RunOptions(batch_size=10)).down("base")
    assert raw_documents(db, "items") == before and handed == []
    assert [len(patches) for patches in sent] == [per_update] * 4
    # Each entry, as many times as the documents sharing it are 40 (one patch per group for each update).
    sent_entries = [entry for patches in sent for patch in patches for entry in patch["p"]]
    assert sorted(map(repr, sent_entries)) == sorted(map(repr, entries * (len(sent_entries) // len(entries))))


PAIR = {"step": "map_to_array", "field": "rooms", "layout": "pair", "key_field": "name", "value_field": "value"}
MERGE = {"step": "map_to_array", "field": "rooms", "layout": "merge"}
RENAME = {"step": "rename_field", "from": "rooms.a.old", "to": "rooms.a.new"}
UNSET = {"step": "unset_field", "field": "rooms.a.old"}
SET = {"step": "set_field", "field": "rooms.a.old", "value": 9}
NOT_OK = {"ok": False, "v": None}
UNMADE = [
    # (a step, its field's value in a document, the place, what server_unmade makes of them)
    (PAIR, [{"name": "a", "value": 1}, {"value": [2], "name": "b"}], 0, {"ok": True, "v": {"a": 1, "b": [2]}}),
    (PAIR, [], 0, {"ok": True, "v": {}}),
    (PAIR, [{"name": 1, "value": 1}], 0, NOT_OK),  # a key no string
    (PAIR, [{"name": "a"}], 0, NOT_OK),  # no value
    (PAIR, [{"name": "a\x00b", "value": 1}], 0, NOT_OK),  # no field name holds a NUL
    (PAIR, [{"name": "a", "value": 1}, 7], 0, NOT_OK),
    (PAIR, {"a": 1}, 0, NOT_OK),  # not an array (a map the step did not take)
    (PAIR, "text", 0, NOT_OK),
    (MERGE, [{"k": "a", "beds": 1}], 0, {"ok": True, "v": {"a": {"beds": 1}}}),
    (MERGE, [{"beds": 1}], 0, NOT_OK),
    ({**MERGE, "key_in_value": True}, [{"k": "a"}], 0, {"ok": True, "v": {"a": {"k": "a"}}}),
    # The renamed key back at its place among its neighbours, the levels above as they were.
    (
        RENAME,
        {"x": 1, "a": {"p": 1, "q": 2, "new": [3]}, "y": 2},
        1,
        {"ok": True, "v": {"x": 1, "a": {"p": 1, "old": [3], "q": 2}, "y": 2}},
    ),
    (RENAME, {"a": {"p": 1, "new": 3}}, 0, {"ok": True, "v": {"a": {"old": 3, "p": 1}}}),
    (RENAME, {"a": {"p": 1, "new": 3}}, 1, {"ok": True, "v": {"a": {"p": 1, "old": 3}}}),
    (RENAME, {"a": {"p": 1, "new": 3}}, 2, NOT_OK),  # past its neighbours
    (RENAME, {"a": {"p": 1, "new": 3}}, -1, NOT_OK),
    (RENAME, {"a": {"p": 1}}, 0, NOT_OK),  # no new key
    (RENAME, {"a": {"old": 1, "new": 3}}, 0, NOT_OK),  # the old key there too
    (RENAME, {"a": [{"new": 3}]}, 0, NOT_OK),  # no sub-document on the way
    (RENAME, {"a": 5}, 0, NOT_OK),
    (RENAME, 5, 0, NOT_OK),
    # A key one nested path names, taken out and, at a place, put back holding the original's value.
    (UNSET, {"x": 1, "a": {"p": 1, "q": 2}}, 1, {"ok": True, "v": {"x": 1, "a": {"p": 1, "old": [5], "q": 2}}}),
    (UNSET, {"a": {"p": 1}}, 0, {"ok": True, "v": {"a": {"old": [5], "p": 1}}}),
    (UNSET, {"a": {}}, 0, {"ok": True, "v": {"a": {"old": [5]}}}),
    (UNSET, {"a": {"p": 1}}, 2, NOT_OK),  # past its neighbours
    (UNSET, {"a": 5}, 0, NOT_OK),
    (SET, {"a": {"old": 9, "p": 1}}, -1, {"ok": True, "v": {"a": {"p": 1}}}),  # the original had none
    (SET, {"a": {"p": 1, "old": 9}}, 0, {"ok": True, "v": {"a": {"old": [5], "p": 1}}}),  # another value
]


@pytest.mark.server_only("the server computes the transform")
@pytest.mark.parametrize(("spec", "value", "at", "expected"), UNMADE)
def test_a_rewritten_value_is_made_again_only_of_what_the_step_could_have_made(mongo, spec, value, at, expected):
    """``server_unmade``: the original's value made again of the value a step rewrote (``map_to_array``'s
    map of its array; ``rename_field``'s sub-document with the old key at its place), or not ``ok`` for a
    value ``$arrayToObject`` would fail on (MongoDB's errors for a key that is no string, or a pair without
    a value) or the step's stages could not have made: ``down`` inside the server then leaves that
    document to the client side."""
    step = build_step({"collection": "items", **spec})
    unmade = OPERATIONS[spec["step"]].server_unmade(step)["rooms"]
    mongo.db.items.insert_one({"_id": 1, "rooms": value})
    held = {"v": [5]}  # the original's value where a step needs one (a nested path's)
    made = {"$let": {"vars": {"wv": "$rooms", "at": at, "held": held}, "in": unmade.made}}
    [found] = mongo.db.items.aggregate([{"$project": {"_id": 0, "made": made}}])
    assert bson.encode(found["made"]) == bson.encode(expected)  # in field order


PLACES = [
    # (a step, the original's value of its top-level field, the place and the value read off it)
    (RENAME, {"a": {"p": 1, "old": 2}}, {"at": 1}),
    (RENAME, {"x": 0, "a": {"old": 2, "p": 1}}, {"at": 0}),
    (RENAME, {"a": {"p": 1}}, {"at": -1}),
    (RENAME, {"a": [{"old": 1}]}, {"at": -1}),
    (RENAME, "text", {"at": -1}),
    (UNSET, {"a": {"p": 1, "old": [2]}}, {"at": 1, "held": [2]}),
    (UNSET, {"a": {"old": None}}, {"at": 0, "held": None}),
    (SET, {"a": {"p": 1}}, {"at": -1}),  # none: nothing held
    (SET, {"a": [{"old": 1}]}, {"at": -1}),  # never read through an array
    (SET, [{"a": {"old": 1}}], {"at": -1}),
]


@pytest.mark.server_only("the server computes the transform")
@pytest.mark.parametrize(("spec", "original", "expected"), PLACES)
def test_a_key_s_place_and_value_are_read_from_the_original(mongo, spec, original, expected):
    step = build_step({"collection": "items", **spec})
    unmade = OPERATIONS[spec["step"]].server_unmade(step)["rooms"]
    # The value held is read at the place read.
    held = {"held": {"$let": {"vars": {"at": unmade.place}, "in": unmade.held}}} if unmade.held is not None else {}
    mongo.db.items.insert_one({"_id": 1, "rooms": original})
    read = {"at": unmade.place, **held}
    projected = {name: {"$let": {"vars": {"wv": "$rooms"}, "in": expression}} for name, expression in read.items()}
    [found] = mongo.db.items.aggregate([{"$project": {"_id": 0, **projected}}])
    assert found == expected


@pytest.mark.parametrize(
    ("spec", "taken"),
    [
        (RENAME, True),
        ({"step": "rename_field", "from": "rooms.old", "to": "rooms.new"}, True),
        ({"step": "rename_field", "from": "rooms.a.old", "to": "rooms.b.new"}, False),  # another sub-document
        ({"step": "rename_field", "from": "rooms.old", "to": "new"}, False),
        ({"step": "rename_field", "from": "old", "to": "new"}, False),  # a rename's own {i, k, r}
        (PAIR, True),
        ({**PAIR, "field": "home.rooms"}, False),
        (UNSET, True),
        (SET, True),
        ({"step": "computed", "field": "rooms.t", "expression": "price * qty"}, True),
        ({"step": "unset_field", "field": "rooms"}, False),  # a top-level field: the patch holds its value
        ({"step": "approximation", "field": "rooms.views", "factor": 10}, False),  # two paths
    ],
)
def test_steps_make_again_only_the_top_level_fields_they_rewrite_in_place(spec, taken):
    step = build_step({"collection": "items", **spec})
    assert bool(OPERATIONS[spec["step"]].server_unmade(step)) is taken


@pytest.mark.server_only("the server computes the transform")
@pytest.mark.parametrize(
    ("case", "change"),
    [
        ("rename_field", {"$unset": "remark"}),
        ("attribute", {"$set": {"attrs": []}}),
        # An array no map makes (a key that is no string; a pair without its value), and one a map makes.
        ("map_to_array", {"$set": {"meta": [{"name": 1, "value": 2}]}}),
        ("map_to_array", {"$set": {"meta": [{"name": "z"}]}}),
        ("map_to_array", {"$set": {"meta": [{"name": "z", "value": [9]}, {"value": 1, "name": "y"}]}}),
        # The renamed key taken away; the old one back beside it.
        ("rename_field_inside", {"$unset": "meta.e"}),
        ("rename_field_inside", {"$set": {"meta.b": 7}}),
        # A nested key's sub-document made no document; the key unset written back; the key set taken away.
        ("unset_field_nested", {"$set": {"meta": 5}}),
        ("unset_field_nested", {"$set": {"meta.b": "app"}}),
        ("set_field_nested", {"$unset": "meta.seen"}),
        # A value taken out that the documents held alike (one patch for all of them), written back.
        ("unset_field", {"$set": {"legacy": 2}}),
        ("unset_field", {"$set": {"legacy": bson.Int64(1)}}),
    ],
)
def test_a_value_a_patch_names_taken_away_between_its_read_and_the_restore_leaves_the_document_as_it_is(
    mongo, tmp_path, case, change
):
    """The application takes away the field (or the pair) a patch names its original's value by, after the
    patches were read and before the update: the update leaves those documents (no error: the value is not
    there to rebuild the original from), and the client side's ``down`` gives them what it gives them on a
    twin database where the application wrote before ``down``."""
    with twin_databases(mongo, tmp_path, case) as targets:
        results = []
        for target, before_down, folder, _before in targets:
            Runner(target, load_folder(folder), RunOptions(batch_size=8)).up()
            theirs = {"original": {"$type": "object"}, "raced": {"$ne": True}}
            changed = [b["_id"]["id"] for b in target.mongopat_backup.find(theirs).sort("_id", 1).limit(3)]

            def app(target: Any = target, changed: list[Any] = changed) -> None:
                target.items.update_many({"_id": {"$in": changed}}, change)

            if before_down:
                app()
                database = target
            else:
                database = WithCollection(target, "items", BeforeFirst(target.items, "update_many", app))
            try:
                Runner(database, load_folder(folder), RunOptions(batch_size=8)).down("base")
                failed = None
            except OperationFailed as error:
                failed = str(error)
            results.append((raw_documents(target, "items"), failed))
            assert not target.items.count_documents({"__mongopat_original": {"$exists": True}})
        assert results[0] == results[1]


class BeforeFirst:
    """A collection running ``action`` once, before the first call of ``method`` (the application writing
    between two of mongopat's commands)."""

    def __init__(self, collection: Any, method: str, action: Any) -> None:
        self._collection, self.method, self.action, self.name = collection, method, action, collection.name

    def __getattr__(self, attribute: str) -> Any:
        found = getattr(self._collection, attribute)
        if attribute != self.method or self.action is None:
            return found

        def call(*args: Any, **kwargs: Any) -> Any:
            action, self.action = self.action, None
            action()
            return found(*args, **kwargs)

        return call


# Where a down inside the server is killed: the unsetting's commands (computed, document_versioning) and
# the restoring's (rename_field, subset).
DOWN_KILLS = [
    *(
        (case, *point)
        for case in ("computed", "document_versioning")
        for point in (
            ("mongopat_backup", "aggregate", 2, False),  # the first range reverted, the second's ids not read
            ("items", "update_many", 1, True),  # the first range's fields taken out, its backups kept
            ("mongopat_backup", "delete_many", 2, False),  # the same, in the second range
        )
    ),
    *(
        (case, *point)
        for case in ("rename_field", "subset")
        for point in (
            ("items", "update_many", 1, True),  # the first range restored and marked, the marks not taken out
            ("mongopat_backup", "aggregate", 1, False),  # the same, those not restored not yet read
            ("items", "update_many", 2, True),  # the marks taken out, the range's backups kept
            ("mongopat_backup", "delete_many", 2, False),  # the same, in the second range
        )
    ),
]


@pytest.mark.server_only("the server computes the transform")
@pytest.mark.parametrize(("case", "collection", "method", "crash_at", "after"), DOWN_KILLS)
def test_a_down_inside_the_server_killed_anywhere_gives_the_original_bytes_when_run_again(
    mongo, tmp_path, case, collection, method, crash_at, after
):
    db = mongo.db
    db.items.insert_many(documents(40, seed=5, nan=False))
    before = raw_documents(db, "items")
    folder = migration(tmp_path, case)
    Runner(db, load_folder(folder), RunOptions(batch_size=8)).up()
    with pytest.raises(RuntimeError, match="killed inside a batch"):
        Runner(
            WithCollection(db, collection, Crashing(db[collection], method, crash_at, after)),
            load_folder(folder),
            RunOptions(batch_size=8),
        ).down("base")
    assert db.mongopat_backup.count_documents({}) and raw_documents(db, "items") != before  # half done
    assert Runner(db, load_folder(folder), RunOptions(batch_size=8)).down("base") == ["0001_step"]
    assert raw_documents(db, "items") == before
    assert db.mongopat_backup.count_documents({}) == 0


@pytest.mark.server_only("the server computes the transform")
@pytest.mark.parametrize("case", ["polymorphic_default", "document_versioning"])
def test_a_run_stopped_after_any_batch_resumes_to_the_same_bytes(mongo, tmp_path, case):
    reference_db, db = mongo.client[mongo.db_name + "_r"], mongo.db
    try:
        for target in (reference_db, db):
            target.items.insert_many(documents(50, seed=4))
        folder = migration(tmp_path, case)
        Runner(reference_db, load_folder(folder), RunOptions(batch_size=6)).up()
        for stop_at in (6, 18, 30):

            def crash(_migration: str, _index: int, done: int, stop_at: int = stop_at) -> None:
                if done >= stop_at:
                    raise RuntimeError("injected crash")

            with pytest.raises(RuntimeError, match="injected crash"):
                Runner(db, load_folder(folder), RunOptions(batch_size=6, on_batch=crash)).up()
            assert step_state(db)["in_server"] is True
        Runner(db, load_folder(folder), RunOptions(batch_size=6)).up()
        for name in ("items", "items_history"):
            assert raw_documents(db, name) == raw_documents(reference_db, name)
        assert Runner(db, load_folder(folder)).verify() == {"0001_step": []}
    finally:
        mongo.client.drop_database(mongo.db_name + "_r")


def handed_to_the_client_side(monkeypatch: Any) -> list[Any]:
    """The ``_id``s of the documents whose backups ``down`` hands to the client side's revert, as it does."""
    handed: list[Any] = []
    revert_documents = DocumentSteps._revert_documents

    def recording(self: DocumentSteps, step: Any, backups: list[dict[str, Any]], state: Any) -> list[Any]:
        handed.extend(backup["_id"]["id"] for backup in backups)
        return revert_documents(self, step, backups, state)

    monkeypatch.setattr(DocumentSteps, "_revert_documents", recording)
    return handed


@contextlib.contextmanager
def twin_databases(mongo: Any, tmp_path: Any, case: str) -> Any:
    """A twin of the test's database, whose run takes the client side, then the test's own: each with the
    same items (and owners), with ``case``'s migration folder and the items' bytes before it."""

    def prepared(target: Any, client_side: bool) -> tuple[Any, bool, Any, dict[Any, bytes]]:
        (tmp_path / target.name).mkdir()
        target.items.insert_many(documents(50, seed=4, nan=False))
        target.owners.insert_many(OWNERS)
        return target, client_side, migration(tmp_path / target.name, case), raw_documents(target, "items")

    twin = mongo.client[mongo.db_name + "_c"]
    try:
        yield (prepared(target, client_side) for target, client_side in ((twin, True), (mongo.db, False)))
    finally:
        mongo.client.drop_database(twin.name)


class Crashing:
    """A collection whose ``crash_at``-th call of ``method`` kills the run (``after``: once it is done)."""

    def __init__(self, collection: Any, method: str, crash_at: int, after: bool = False) -> None:
        self._collection, self.method, self.crash_at, self.calls = collection, method, crash_at, 0
        self.after, self.name = after, collection.name
        self.counting = threading.Lock()  # calls from several threads (a shard's stretches each)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._collection, name)
        if name != self.method:
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            with self.counting:
                self.calls += 1
                killed = self.calls == self.crash_at
            if killed and not self.after:
                raise RuntimeError("killed inside a batch")
            result = attribute(*args, **kwargs)
            if killed:
                raise RuntimeError("killed inside a batch")
            return result

        return call


def killed_up(db: Any, folder: Any, crashing: Crashing, **options: Any) -> None:
    """``up`` with ``crashing`` in place of its collection, killed by it."""
    with pytest.raises(RuntimeError, match="killed inside a batch"):
        Runner(WithCollection(db, crashing.name, crashing), load_folder(folder), RunOptions(**options)).up()


def resumed_like_the_reference(db: Any, reference_db: Any, folder: Any, batch_size: int) -> None:
    """After a killed run: the next ``up`` ends with the reference's documents and side documents, no
    original left in a document, every backup kept, and ``down`` gives both the same bytes again."""
    Runner(db, load_folder(folder), RunOptions(batch_size=batch_size)).up()
    created = [name for name in reference_db.list_collection_names() if name.startswith("items_")]
    for name in ("items", *created):
        assert raw_documents(db, name) == raw_documents(reference_db, name)
    assert db.items.count_documents({"__mongopat_original": {"$exists": True}}) == 0
    assert Runner(db, load_folder(folder)).verify() == {"0001_step": []}
    before = raw_documents(reference_db, "items")
    Runner(reference_db, load_folder(folder), RunOptions(batch_size=batch_size)).down("base")
    Runner(db, load_folder(folder), RunOptions(batch_size=batch_size)).down("base")
    assert raw_documents(db, "items") == raw_documents(reference_db, "items") != before


@pytest.mark.server_only("the server computes the transform")
@pytest.mark.parametrize(
    "case", ["document_versioning", "subset", "outlier", "extended_reference", "tree", "pre_aggregation_owners"]
)
@pytest.mark.parametrize(
    ("collection", "method", "crash_at"),
    [
        ("mongopat_backup", "aggregate", 1),  # before the first range's side documents
        ("mongopat_backup", "aggregate", 2),  # before its check
        ("mongopat_backup", "aggregate", 4),  # inside the second range
        ("items", "aggregate", 1),  # rewritten, originals in the documents, no backup yet
        ("items", "aggregate", 2),  # the same, in the second range
        ("items", "update_many", 2),  # backed up, originals not released yet
    ],
)
def test_a_run_killed_inside_a_batch_resumes_to_the_same_bytes(mongo, tmp_path, case, collection, method, crash_at):
    """Killed anywhere inside a range (between its rewrite, backups, side documents, release and check),
    the next up settles the range first and ends with the same documents and side documents, no original
    left in a document and every backup kept."""
    reference_db, db = mongo.client[mongo.db_name + "_r"], mongo.db
    try:
        for target in (reference_db, db):
            target.items.insert_many(documents(60, seed=6, nan=False))
            target.owners.insert_many(OWNERS)
        folder = migration(tmp_path, case)
        Runner(reference_db, load_folder(folder), RunOptions(batch_size=8)).up()
        killed_up(db, folder, Crashing(db[collection], method, crash_at), batch_size=8)
        resumed_like_the_reference(db, reference_db, folder, 8)
    finally:
        mongo.client.drop_database(mongo.db_name + "_r")


@pytest.mark.server_only("the server computes the transform")
@pytest.mark.parametrize("case", ["computed", "subset", "extended_reference", "document_versioning"])
@pytest.mark.parametrize(
    ("crash_at", "after", "workers"),
    [
        (1, True, None),  # the first range rewritten, its originals in the documents, no backup yet
        (2, False, None),  # the first range backed up (side documents made), originals not released
        (3, True, None),  # the first range settled, the second rewritten
        (1, True, 2),  # two stretches: one range rewritten, the other stretch's stopped after its own
    ],
)
def test_down_after_a_run_killed_inside_a_batch_gives_the_original_bytes(
    mongo, tmp_path, case, crash_at, after, workers
):
    """A run killed while documents hold their originals, then ``down`` (no ``up`` between): those
    documents are settled first, so every document gets its original bytes back, none keeps mongopat's
    field, and no backup or side document is left."""
    db = mongo.db
    db.items.insert_many(documents(60, seed=6, nan=False))
    db.owners.insert_many(OWNERS)
    before = raw_documents(db, "items")
    folder = migration(tmp_path, case)
    # The rewrites and the releases are the items' update_many calls, one after the other.
    killed_up(db, folder, Crashing(db.items, "update_many", crash_at, after), batch_size=8, workers=workers)
    assert db.items.count_documents({"__mongopat_original": {"$exists": True}}) > 0
    assert Runner(db, load_folder(folder), RunOptions(batch_size=8)).down("base") == ["0001_step"]
    assert raw_documents(db, "items") == before
    assert db.mongopat_backup.count_documents({}) == 0
    assert not [name for name in db.list_collection_names() if name.startswith("items_")]


@pytest.mark.server_only("the server computes the transform")
@pytest.mark.parametrize(
    ("case", "written", "change"),
    [
        # A copy of owner 3's name, changed.
        ("extended_reference", {"ownedBy.name": "three"}, ({"_id": 3}, {"$set": {"name": "renamed"}})),
        # The sum of the tiers of the owners coded 1 (owners 0 and 1: 1 and 1.0), one of them changed.
        ("pre_aggregation_owners", {"owner": 1, "stats.tiers": 1}, ({"_id": 0}, {"$set": {"tier": 5}})),
    ],
)
def test_a_referenced_document_changed_before_a_killed_range_settles_is_marked_raced(
    mongo, tmp_path, case, written, change
):
    """extended_reference and pre_aggregation read the range's referenced (related) documents again when
    they settle a range a killed run rewrote: one changed meanwhile makes ``after`` differ from what the
    rewrite wrote, so the backups of the documents it belongs to are marked raced, and ``down`` takes the
    copy (the aggregates) out, the step's inverse, rather than trusting it."""
    db = mongo.db
    db.items.insert_many(documents(40, seed=6, nan=False))
    db.owners.insert_many(OWNERS)
    before = raw_documents(db, "items")
    folder = migration(tmp_path, case)
    # The items collection's 2nd aggregation is the first range's backup (the 1st reads its keys).
    killed_up(db, folder, Crashing(db.items, "aggregate", 2), batch_size=40)
    count = db.items.count_documents(written)
    assert count and db.items.count_documents({"__mongopat_original": {"$exists": True}}) > 0
    db.owners.update_one(*change)
    Runner(db, load_folder(folder), RunOptions(batch_size=40)).up()
    assert step_state(db)["stats"]["conflicts"] == count  # what the rewrite wrote is kept, and marked
    assert db.items.count_documents(written) == count
    assert Runner(db, load_folder(folder)).verify() == {"0001_step": []}
    Runner(db, load_folder(folder), RunOptions(batch_size=40)).down("base")
    assert raw_documents(db, "items") == before


@pytest.mark.server_only("the server computes the transform")
def test_a_parent_moved_before_a_killed_range_settles_marks_its_descendants_raced(mongo, tmp_path):
    """tree reads the chains again (``$graphLookup``) when it settles a range a killed run rewrote: a node
    moved meanwhile makes ``after`` differ for the documents below it, whose backups are marked raced, and
    ``down`` takes their ancestors out (the step's inverse) rather than trusting them."""
    db = mongo.db
    db.items.insert_many([{"_id": i, "parent": i - 1 if i else None, "n": i} for i in range(12)])
    before = raw_documents(db, "items")
    folder = migration(tmp_path, "tree")
    # The items collection's 2nd aggregation is the first range's backup (the 1st reads its parents).
    killed_up(db, folder, Crashing(db.items, "aggregate", 2), batch_size=40)
    assert db.items.count_documents({"__mongopat_original": {"$exists": True}}) == 12
    db.items.update_one({"_id": 5}, {"$set": {"parent": None}})  # node 5 becomes a root
    Runner(db, load_folder(folder), RunOptions(batch_size=40)).up()
    assert step_state(db)["stats"]["conflicts"] == 7  # node 5 itself and the 6 below it
    assert db.items.find_one({"_id": 11})["path"] == "/0/1/2/3/4/5/6/7/8/9/10/11/"  # as the rewrite wrote it
    assert Runner(db, load_folder(folder)).verify() == {"0001_step": []}
    Runner(db, load_folder(folder), RunOptions(batch_size=40)).down("base")
    after_down = raw_documents(db, "items")
    moved = bson.encode({"_id": 5})
    assert {k: v for k, v in after_down.items() if k != moved} == {k: v for k, v in before.items() if k != moved}
    assert bson.decode(after_down[moved]) == {"_id": 5, "parent": None, "n": 5}  # the application's move kept


@pytest.mark.server_only("the server computes the transform")
def test_tree_takes_the_chains_it_walks_as_python_and_leaves_the_rest_to_the_client_side(mongo, tmp_path):
    """A chain through a double (Python prints ``2.0``), to a date or a boolean, or into a cycle is the
    client side's: the server rewrites every other node, and a cycle fails the run as the client side fails
    it, after the server has migrated the nodes outside it."""
    db = mongo.db
    nodes: list[dict[str, Any]] = [{"_id": i, "parent": i - 1 if i else None} for i in range(10)]
    nodes += [
        {"_id": 20, "parent": 2.0},  # a double: declined
        {"_id": 21, "parent": 20},  # an int, through a node whose parent is a double: not walked
        {"_id": 22, "parent": WHEN},
        {"_id": 23, "parent": True},
        {"_id": 24, "parent": bson.Int64(3)},  # a long: walked
        {"_id": 25, "parent": "nowhere"},  # a parent that does not exist ends the chain
        {"_id": 26},
    ]
    db.items.insert_many(nodes)
    folder = migration(tmp_path, "tree")
    Runner(db, load_folder(folder), RunOptions(batch_size=5)).up()
    assert step_state(db)["in_server"] is True
    by_the_server = {b["_id"]["id"] for b in db.mongopat_backup.find({"run": {"$exists": True}})}
    assert by_the_server == {*range(10), 24, 25, 26}
    found = {d["_id"]: d for d in db.items.find()}
    assert found[21]["path"] == "/0/1/2.0/20/21/" and found[23]["ancestors"] == [True]
    assert found[24]["ancestors"] == [0, 1, 2, 3] and found[25]["path"] == "/nowhere/25/"
    assert step_state(db)["stats"]["pending_left"] == 0

    db.items.insert_many([{"_id": 100, "parent": 101}, {"_id": 101, "parent": 100}, {"_id": 102, "parent": 3}])
    db.mongopat_changelog.drop()
    db.mongopat_backup.drop()
    with pytest.raises(OperationFailed, match="cycle in the tree through 10"):
        Runner(db, load_folder(folder), RunOptions(batch_size=5)).up()
    assert db.items.find_one({"_id": 102})["ancestors"] == [0, 1, 2, 3]
    assert db.items.count_documents({"ancestors": {"$exists": False}}) == 2


@pytest.mark.server_only("the server computes the transform")
@pytest.mark.parametrize("case", ["extended_reference", "tree", "pre_aggregation"])
def test_a_range_whose_let_variables_are_too_large_for_one_command_is_halved(mongo, tmp_path, monkeypatch, case):
    """A rewrite carries its range's let variables (extended_reference's copies, tree's ancestors): past
    VARIABLES_LIMIT the range is halved until they fit, and the documents come out as the client side writes
    them."""
    from mongopat.migrate.server import in_server_steps

    client_db, db = mongo.client[mongo.db_name + "_c"], mongo.db
    try:
        for target in (client_db, db):
            target.items.insert_many(documents(60, seed=6, nan=False))
            target.owners.insert_many(OWNERS)
        folder = migration(tmp_path, case)
        Runner(client_db, load_folder(folder), RunOptions(batch_size=40, client_side=True)).up()
        # About two copies, a few nodes, a few owners' aggregates.
        monkeypatch.setattr(in_server_steps, "VARIABLES_LIMIT", 150)
        Runner(db, load_folder(folder), RunOptions(batch_size=40)).up()
        assert step_state(db)["in_server"] is True
        assert raw_documents(db, "items") == raw_documents(client_db, "items")
        assert len(db.mongopat_backup.distinct("run")) > 60 // 40 + 1  # ranges of a few documents each
    finally:
        mongo.client.drop_database(mongo.db_name + "_c")


class FirstRewriteRaced:
    """The application, as test_online's harness sees it: it writes two documents just before the first
    aggregation of the wrapped collection (after the range's rewrite)."""

    lock = contextlib.nullcontext()

    def __init__(self, db: Any, delete: bool = False) -> None:
        self.db, self.delete, self.changed = db, delete, []

    def act(self) -> None:
        if self.changed:
            return
        if self.delete:
            self.db.items.delete_one({"_id": 7})
            self.changed.append(7)
            return
        self.db.items.update_one({"_id": 3}, {"$set": {"status": "app"}})
        self.db.items.update_one({"_id": 5}, {"$inc": {"qty": 100}})
        self.changed.extend([3, 5])


class WithCollection:
    """The database, with ``wrapped`` in the place of its collection ``name``."""

    def __init__(self, db: Any, name: str, wrapped: Any) -> None:
        self._db, self.name_wrapped, self.wrapped = db, name, wrapped

    def __getitem__(self, name: str) -> Any:
        return self.wrapped if name == self.name_wrapped else self._db[name]

    def __getattr__(self, name: str) -> Any:
        return self.wrapped if name == self.name_wrapped else getattr(self._db, name)


def raced(db: Any, app: FirstRewriteRaced) -> WithCollection:
    """The database, whose mongopat_backup lets ``app`` write before each of its aggregations."""
    return WithCollection(db, "mongopat_backup", BackupCollection(db["mongopat_backup"], app))


@pytest.mark.server_only("the server computes the transform")
@pytest.mark.parametrize("moment", ["before its backup", "after its original is released"])
def test_a_document_changed_after_its_rewrite_keeps_the_change_through_down(mongo, tmp_path, moment):
    """The application writes a rewritten document before its backup is taken from the original it holds,
    or once the original is out of it: the backup's ``after`` is what the stages made of the original,
    not the document as it is then, so the backup is marked and down gives the document the step's
    inverse, keeping the application's change."""
    db = mongo.db
    db.items.insert_many(documents(20, nan=False))
    folder = migration(tmp_path, "set_field")
    app = FirstRewriteRaced(db)
    target = (
        WithCollection(db, "items", BackupCollection(db["items"], app))
        if moment == "before its backup"
        else raced(db, app)
    )
    Runner(target, load_folder(folder), RunOptions(batch_size=50)).up()
    assert app.changed == [3, 5]
    assert db.items.count_documents({"__mongopat_original": {"$exists": True}}) == 0
    three, five = db.items.find_one({"_id": 3}), db.items.find_one({"_id": 5})
    assert three["status"] == "app" and three["flag"] == {"on": True, "since": 3}
    assert five["qty"] >= 100 and five["flag"] == {"on": True, "since": 3}
    stats = step_state(db)["stats"]
    assert stats["conflicts"] == 2 and stats["transformed"] == 20 and stats["pending_left"] == 0
    assert db.mongopat_backup.count_documents({"raced": True}) == 2
    left_alone = {k: v for k, v in raw_documents(db, "items").items() if bson.decode(k)["_id"] not in (3, 5)}
    Runner(db, load_folder(folder), RunOptions(batch_size=50)).down("base")
    three, five = db.items.find_one({"_id": 3}), db.items.find_one({"_id": 5})
    assert three["status"] == "app" and "flag" not in three  # the step's value goes, the application's stays
    assert five["qty"] >= 100 and "flag" not in five
    assert db.mongopat_backup.count_documents({}) == 0
    assert left_alone.keys() <= raw_documents(db, "items").keys()


@pytest.mark.server_only("the server computes the transform")
@pytest.mark.parametrize(("moment", "backed_up"), [("before its backup", 19), ("after its backup", 20)])
def test_a_document_deleted_after_its_rewrite_leaves_no_side_document(mongo, tmp_path, moment, backed_up):
    """document_versioning's first revisions are made from the range's backups; a document the
    application deleted after its rewrite has none (deleted before its backup: no backup either)."""
    db = mongo.db
    db.items.insert_many(documents(20))
    folder = migration(tmp_path, "document_versioning")
    app = FirstRewriteRaced(db, delete=True)
    target = (
        WithCollection(db, "items", BackupCollection(db["items"], app))
        if moment == "before its backup"
        else raced(db, app)
    )
    Runner(target, load_folder(folder), RunOptions(batch_size=50)).up()
    assert app.changed == [7] and db.items.find_one({"_id": 7}) is None
    assert sorted(d["_id"]["doc"] for d in db.items_history.find()) == [i for i in range(20) if i != 7]
    stats = step_state(db)["stats"]
    assert stats["deleted_meanwhile"] == 1 and stats["transformed"] == backed_up and stats["pending_left"] == 0


@pytest.mark.server_only("a decision about a server")
@pytest.mark.parametrize(
    ("spec", "why"),
    [
        (
            {
                "step": "pre_aggregation",
                "from": "owners",
                "foreign": "code",
                "compute": {"n": {"sum": "$tier"}},
                "into": "stats",
            },
            "needs Python",
        ),
        ({"step": "set_field", "field": "flag", "value": 1, "mixed_ids": True}, "several BSON types"),
    ],
)
def test_steps_the_server_cannot_compute_run_on_the_client_side(mongo, tmp_path, spec, why):
    db = mongo.db
    db.items.insert_many(documents(10))
    spec = dict(spec)
    if spec.pop("mixed_ids", False):
        db.items.insert_one({"_id": "text", "price": 1})
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "0001_step.yaml").write_text(render("0001_step", spec["step"], [{"collection": "items", **spec}], "t"))
    Runner(db, load_folder(folder), RunOptions(batch_size=4)).up()
    state = step_state(db)
    assert state["in_server"] is False and why in state["client_side"]


# Maps of rooms keyed by their number, as layout merge takes them: documents, one already holding its key
# (key_in_value), an empty one; a field that is no map, or missing, or an array (not pending).
def rooms(count: int, key_in_value: bool) -> list[dict[str, Any]]:
    rng = random.Random(5)
    found: list[dict[str, Any]] = []
    for i in range(count):
        doc: dict[str, Any] = {"_id": i, "floor": i % 3}
        shape = rng.random()
        if shape < 0.7:
            numbers = rng.sample(["101", "102", "201", "a.b", "$x", "é"], rng.randrange(4))
            doc["rooms"] = {n: {**({"k": n} if key_in_value else {}), "beds": rng.choice([1, 2.0, None]),
                                **({"view": {"sea": True}} if rng.random() < 0.3 else {})} for n in numbers}  # fmt: skip
        elif shape < 0.8:
            doc["rooms"] = rng.choice(["none", [{"k": "1"}], 7])
        found.append(doc)
    return found


def map_migration(tmp_path: Any, params: dict[str, Any]) -> Any:
    folder = tmp_path / "map"
    folder.mkdir(exist_ok=True)
    spec = {"step": "map_to_array", "collection": "items", **params}
    (folder / "0001_step.yaml").write_text(render("0001_step", spec["step"], [spec], "test"))
    return folder


@pytest.mark.server_only("the server computes the transform")
@pytest.mark.parametrize("case", sorted(MERGE_CASES))
def test_map_to_array_merge_writes_the_bytes_the_client_side_writes(mongo, tmp_path, case):
    client_db, db = mongo.client[mongo.db_name + "_c"], mongo.db
    params = MERGE_CASES[case]
    documents_ = rooms(60, params.get("key_in_value", False))
    if case == "nested":
        documents_ = [{"_id": d.pop("_id"), "home": d if i % 5 else 3} for i, d in enumerate(documents_)]
    try:
        for target in (client_db, db):
            target.items.insert_many(documents_)
        before = raw_documents(db, "items")
        folder = map_migration(tmp_path, params)
        Runner(client_db, load_folder(folder), RunOptions(batch_size=7, client_side=True)).up()
        Runner(db, load_folder(folder), RunOptions(batch_size=7)).up()
        assert step_state(db)["in_server"] is True
        assert raw_documents(db, "items") == raw_documents(client_db, "items") != before
        assert db.mongopat_backup.count_documents({"run": {"$exists": False}}) == 0  # all the server's
        Runner(db, load_folder(folder), RunOptions(batch_size=7)).down("base")
        assert raw_documents(db, "items") == before
    finally:
        mongo.client.drop_database(mongo.db_name + "_c")


@pytest.mark.server_only("the server computes the transform")
@pytest.mark.parametrize(
    ("params", "refused", "error"),
    [
        (MERGE_CASES["merge"], {"101": {"beds": 1}, "102": 5}, "rooms.102 of document 99 is not a document"),
        (MERGE_CASES["merge"], {"101": {"k": "101"}}, "rooms.101 of document 99 already has a field 'k'"),
        (MERGE_CASES["key_in_value"], {"101": {"k": "102"}}, "rooms.101.k of document 99 is '102', not its key"),
        (MERGE_CASES["key_in_value"], {"101": {"beds": 1}}, "rooms.101.k of document 99 is None, not its key"),
    ],
)
def test_a_map_merge_refuses_is_left_to_the_client_side_which_stops_the_run(mongo, tmp_path, params, refused, error):
    """A value layout merge cannot take stops the run with the client side's error (a server cannot raise
    it), after the server has migrated every other document."""
    db = mongo.db
    db.items.insert_many([*rooms(20, params.get("key_in_value", False)), {"_id": 99, "rooms": refused}])
    with pytest.raises(OperationFailed, match=re.escape(error)):
        Runner(db, load_folder(map_migration(tmp_path, params)), RunOptions(batch_size=6)).up()
    assert step_state(db)["in_server"] is True
    assert db.items.count_documents({"rooms": {"$type": "object", "$not": {"$type": "array"}}}) == 1
    assert isinstance(db.items.find_one({"_id": 99})["rooms"], dict)


def test_the_embedded_engine_takes_every_step_on_the_client_side(mongo, tmp_path):
    db = mongo.db
    db.items.insert_many(documents(10))
    folder = migration(tmp_path, "unset_field")
    Runner(db, load_folder(folder), RunOptions(batch_size=4)).up()
    state = step_state(db)
    if mongo.real:
        assert state["in_server"] is True and state["client_side"] is None
    else:
        assert state["in_server"] is False and state["client_side"] == "the embedded engine runs no $merge"
    assert not db.items.count_documents({"legacy": {"$exists": True}})


class ShardedClient:
    """mongos: the config database (its collections' entry for shop.items) and the server's version."""

    def __init__(self, entry: dict[str, Any] | None, version: tuple[int, ...]) -> None:
        self.entry, self.version = entry, version

    def __getitem__(self, _database: str) -> dict[str, Any]:
        return {"collections": SimpleNamespace(find_one=lambda _query: self.entry)}

    def server_info(self) -> dict[str, Any]:
        return {"versionArray": [*self.version, 0]}


class ShardedDatabase:
    """What mongos answers about one sharded collection: collStats says sharded, config.collections
    holds its key (or nothing, as when the user may not read config)."""

    name = "shop"

    def __init__(self, key: dict[str, Any] | None, sharded: bool = True, version: tuple[int, ...] = (7, 0, 2)) -> None:
        entry = None if key is None else {"_id": "shop.items", "key": key}
        self.sharded = sharded
        self.client = ShardedClient(entry, version)

    def command(self, _name: str, _collection: str) -> dict[str, Any]:
        return {"sharded": self.sharded}


@pytest.mark.parametrize(
    ("spec", "key", "sharded", "why"),
    [
        ({"step": "set_field", "field": "flag", "value": 1}, {"customerId": 1}, True, None),
        ({"step": "computed", "field": "t", "expression": "price * qty"}, {"customerId": 1, "_id": 1}, True, None),
        ({"step": "rename_field", "from": "customerId", "to": "cid"}, {"customerId": 1}, True, "customerId"),
        ({"step": "set_field", "field": "region.code", "value": 1}, {"region": 1}, True, "region"),
        ({"step": "unset_field", "field": "shard"}, {"shard.zone": "hashed"}, True, "shard.zone"),
        ({"step": "set_field", "field": "flag", "value": 1}, None, True, "could not be read"),
        ({"step": "rename_field", "from": "customerId", "to": "cid"}, {"customerId": 1}, False, None),
        (
            {"step": "subset", "field": "lines", "keep": 2, "full_collection": "items_full"},
            {"customerId": 1},
            True,
            None,
        ),
        ({"step": "set_field", "field": "flag", "value": 1}, {"customerId": 1}, (5, 0, 9), "needs MongoDB 5.1"),
    ],
)
def test_a_sharded_collection_stays_in_the_server_unless_the_step_writes_its_shard_key(spec, key, sharded, why):
    """The rewrite updates the collection's own documents (every shard takes its part) and the backups go
    into mongopat's unsharded collection: only a step that writes the shard key goes to the client side."""
    version = sharded if isinstance(sharded, tuple) else (7, 0, 2)
    database = ShardedDatabase(key, bool(sharded), version)
    steps = InServerSteps(SimpleNamespace(db=database))  # what the decision reads of a runner
    found = steps._shard_key_because(build_step({"collection": "items", **spec}))
    assert found is None if why is None else why in found


# A step's side collection, sharded (as mongos would say) on a key: the $merge's on, and the unique index it
# needs made (None: one there already, or none needed).
SHARDED_SIDE = {
    "subset": ({"parentId": 1}, ["parentId", "_id"], "mongopat_merge_on"),
    "outlier": ({"parentId": "hashed", "page": 1}, ["parentId", "page", "_id"], "mongopat_merge_on"),
    "document_versioning": ({"_id": "hashed"}, "_id", None),
    "subset_sorted": ({"parentId": 1}, ["parentId", "_id"], None),  # the application made one already
}


def sharded_as(monkeypatch: Any, side: str, key: dict[str, Any] | None) -> None:
    """mongos's answer about ``side``: sharded on ``key`` (None: its key cannot be read)."""
    unsharded = sharding.sharding

    def answer(db: Any, name: str) -> sharding.Sharding:
        return sharding.Sharding(True, dict(key or {})) if name == side else unsharded(db, name)

    monkeypatch.setattr(sharding, "sharding", answer)


@pytest.mark.server_only("the server computes the transform")
@pytest.mark.parametrize("case", sorted(SHARDED_SIDE))
def test_side_documents_merge_into_a_sharded_collection_on_its_shard_key(mongo, tmp_path, monkeypatch, case):
    """A sharded side collection (made empty beforehand, as sharding needs) takes its $merge on every
    shard-key field and _id, with the unique index MongoDB requires on exactly those fields (the test
    server requires it too): the same documents as the client side's inserts, byte for byte; down empties
    the collection and drops the indexes it did not have."""
    key, on, made = SHARDED_SIDE[case]
    side = STEPS[case].get("full_collection") or STEPS[case].get("overflow_collection") or "items_history"
    client_db, server_db = mongo.client[mongo.db_name + "_c"], mongo.db
    try:
        for db in (client_db, server_db):
            db.items.insert_many(documents(40, nan=False))
        server_db.create_collection(side)
        if made is None and on != "_id":
            server_db[side].create_index([("_id", 1), ("parentId", 1)], unique=True, name="apps")
        had = sorted(index["name"] for index in server_db[side].list_indexes())
        sharded_as(monkeypatch, side, key)
        folder = migration(tmp_path, case)
        before = raw_documents(server_db, "items")
        Runner(client_db, load_folder(folder), RunOptions(batch_size=7, client_side=True)).up()
        [applied] = Runner(server_db, load_folder(folder), RunOptions(batch_size=7)).up()
        state = step_state(server_db)
        assert state["in_server"] is True
        assert state.get("merge_on") == ({side: on} if on != "_id" else None)
        said = f"computed inside the server ({side} sharded, merged on {', '.join(on)})"
        assert any(said in note for note in applied["notes"]) is (on != "_id")
        indexes = {index["name"]: index for index in server_db[side].list_indexes()}
        assert ("mongopat_merge_on" in indexes) is (made is not None)
        if made:
            assert list(indexes[made]["key"]) == on and indexes[made]["unique"]
        assert raw_documents(server_db, "items") == raw_documents(client_db, "items") != before
        assert raw_documents(server_db, side) == raw_documents(client_db, side) != {}
        Runner(server_db, load_folder(folder), RunOptions(batch_size=7)).down("base")
        assert raw_documents(server_db, "items") == before
        assert server_db[side].count_documents({}) == 0
        assert sorted(index["name"] for index in server_db[side].list_indexes()) == had
    finally:
        mongo.client.drop_database(mongo.db_name + "_c")


@pytest.mark.server_only("a decision about a server")
@pytest.mark.parametrize(
    ("key", "why"),
    [
        ({"rating": 1}, "not every side document holds rating"),
        ({"parentId": 1, "price": 1}, "not every side document holds price"),
        (None, "its shard key could not be read"),
    ],
)
def test_a_side_collection_sharded_on_a_field_side_documents_may_lack_keeps_the_step_on_the_client_side(
    mongo, tmp_path, monkeypatch, key, why
):
    """$merge refuses a document missing an on field (or holding null or an array there) in the middle of a
    run; an element's own fields may be missing: the client side's inserts take any shard key."""
    mongo.db.items.insert_many(documents(20, nan=False))
    sharded_as(monkeypatch, "items_full", key)
    Runner(mongo.db, load_folder(migration(tmp_path, "subset")), RunOptions(batch_size=7)).up()
    state = step_state(mongo.db)
    assert state["in_server"] is False and why in state["client_side"]
    assert mongo.db.items_full.count_documents({}) > 0
    assert "mongopat_merge_on" not in {index["name"] for index in mongo.db.items_full.list_indexes()}


@pytest.mark.parametrize(
    ("on", "stage_on"),
    [(("_id",), "_id"), (("parentId", "_id"), ["parentId", "_id"]), (("a", "b", "_id"), ["a", "b", "_id"])],
)
def test_a_merge_target_names_its_on_fields(on, stage_on):
    stage = sharding.MergeTarget("side", on).stage()["$merge"]
    assert stage == {"into": "side", "on": stage_on, "whenMatched": "replace", "whenNotMatched": "insert"}


@pytest.mark.server_only("the server computes the transform")
def test_documents_the_server_cannot_hold_twice_are_the_client_sides(mongo, tmp_path):
    """A document over 7 MiB would not fit in 16 MB beside its original, and one holding mongopat's field
    must not lose it: both are left to a client-side pass after the server's, and down restores all."""
    db = mongo.db
    db.items.insert_many(documents(20, nan=False))
    db.items.insert_one({"_id": 100, "blob": "x" * (7 * 1024 * 1024 + 10)})
    db.items.insert_one({"_id": 101, "__mongopat_original": "the application's"})
    before = raw_documents(db, "items")
    folder = migration(tmp_path, "set_field")
    Runner(db, load_folder(folder), RunOptions(batch_size=8)).up()
    state = step_state(db)
    assert state["in_server"] is True and state["stats"]["pending_left"] == 0
    assert db.items.count_documents({"flag": {"$exists": False}}) == 0
    assert db.items.find_one({"_id": 101})["__mongopat_original"] == "the application's"
    assert Runner(db, load_folder(folder)).verify() == {"0001_step": []}
    Runner(db, load_folder(folder), RunOptions(batch_size=8)).down("base")
    assert raw_documents(db, "items") == before


MISSING = object()  # an element without the sort field
# A kind of list: the values of its sort field, and whether the server leaves such a list to the client
# side (server_order.ordered_differently). Each list holds every value, shuffled, with ties.
SORT_VALUES: dict[str, tuple[list[Any], bool]] = {
    "numbers of every type": ([3, 2.5, bson.Int64(7), 3.0, -1, 0.1, 2**40, -0.0, 0], False),
    "strings": (["b", "a", "é", "B", "", "a", "ab", "\U0001f600"], False),
    "dates": ([datetime.datetime(2020, 1, d) for d in (3, 1, 2, 1)], False),
    "object ids": ([bson.ObjectId(f"{n:024x}") for n in (5, 1, 9, 1)], False),
    "booleans": ([True, False, True], False),
    "numbers with none": ([1, None, 2, MISSING, 1, None], False),
    "only ties": ([4, 4, 4, 4], False),
    "numbers and strings": ([1, "a", 2], True),
    "booleans and numbers": ([True, 1, 0], True),
    "NaN": ([1.0, float("nan"), 2.0], True),
    "Decimal128": ([bson.Decimal128("1.5"), bson.Decimal128("1")], True),
    "documents": ([{"x": 1}, {"x": 0}], True),
    "arrays": ([[1], [0, 2]], True),
    "dates and strings": ([datetime.datetime(2020, 1, 1), "2020"], True),
}


def sort_lists(values: list[Any], seed: int, nested: bool) -> list[list[Any]]:
    """Lists holding every value (each element remembers its place, ``i``), shuffled, some with elements
    that are no document; ``nested``: the value at ``w.t``, and some elements whose ``w`` is no document."""
    rng = random.Random(seed)
    lists = []
    for n in range(8):
        elements: list[Any] = [
            {"i": i, **({} if v is MISSING else {"w": {"t": v}} if nested else {"t": v})}
            for i, v in enumerate(values * 2)
        ]
        rng.shuffle(elements)
        if n % 3 == 0:
            elements.insert(rng.randrange(len(elements) + 1), rng.choice([5, "x", None, [1]]))
        if nested and n % 3 == 1:
            elements.insert(rng.randrange(len(elements) + 1), {"i": 99, "w": rng.choice([5, "x", None, {"u": 1}])})
        lists.append(elements)
    return lists


@pytest.mark.server_only("the server evaluates the expression")
@pytest.mark.parametrize("path", ["t", "w.t"])
@pytest.mark.parametrize("kind", sorted(SORT_VALUES))
def test_subset_sorted_in_the_server_takes_the_lists_both_order_alike(mongo, kind, path):
    """The server's first elements in a sort's order are Python's (stable: ties in stored order, missing
    values last ascending and first descending), for every list it does not leave to the client side; on a
    nested path, an element whose prefix is no document reads as None on both."""
    from mongopat.migrate.operations.server_order import first_in_order, ordered_differently
    from mongopat.migrate.operations.subset import _sorted

    values, declined = SORT_VALUES[kind]
    lists = sort_lists(values, len(kind), nested=path != "t")
    mongo.db.lists.insert_many([{"_id": n, "l": elements} for n, elements in enumerate(lists)])
    for sort in ({path: 1}, {path: -1}, {path: 1, "i": 1}, {path: -1, "i": -1}):
        for keep in (1, 3, 40):
            project = {"first": first_in_order("$l", sort, keep), "declined": ordered_differently("$l", sort)}
            for doc in mongo.db.lists.aggregate([{"$project": project}, {"$sort": {"_id": 1}}]):
                assert doc["declined"] is declined, (sort, lists[doc["_id"]])
                if not declined:
                    expected = _sorted(lists[doc["_id"]], sort)[:keep]
                    assert bson.encode({"l": doc["first"]}) == bson.encode({"l": expected}), (sort, keep)


@pytest.mark.server_only("the server evaluates the expression")
def test_a_nested_sort_path_through_an_array_is_declined_or_read_as_python_reads_it(mongo):
    """An element whose prefix is an array (``w: [{t: 1}]``): MongoDB reads ``w.t`` as an array, which the
    server declines; a server reading it as nothing orders it as Python's None. Either way the first
    elements kept are Python's."""
    from mongopat.migrate.operations.server_order import first_in_order, ordered_differently
    from mongopat.migrate.operations.subset import _sorted

    lists = [[{"i": 0, "w": {"t": 2}}, {"i": 1, "w": [{"t": 9}]}, {"i": 2, "w": {"t": 5}}], [{"i": 0, "w": [{"t": 1}]}]]
    mongo.db.lists.insert_many([{"_id": n, "l": elements} for n, elements in enumerate(lists)])
    for sort in ({"w.t": 1}, {"w.t": -1}):
        project = {"first": first_in_order("$l", sort, 2), "declined": ordered_differently("$l", sort)}
        for doc in mongo.db.lists.aggregate([{"$project": project}, {"$sort": {"_id": 1}}]):
            assert doc["declined"] or doc["first"] == _sorted(lists[doc["_id"]], sort)[:2], (sort, doc)


@pytest.mark.server_only("a decision about a server")
def test_a_sorted_subset_of_a_collection_with_a_default_collation_stays_on_the_client_side(mongo, tmp_path):
    """Its update pipelines would compare strings in the collation's order, not Python's."""
    db = mongo.db
    db.create_collection("items", collation={"locale": "en", "strength": 2})
    db.items.insert_many(documents(10, nan=False))
    folder = migration(tmp_path, "subset_sorted")
    Runner(db, load_folder(folder), RunOptions(batch_size=4)).up()
    state = step_state(db)
    assert state["in_server"] is False and "collation" in state["client_side"]


@pytest.mark.server_only("the server computes the transform")
def test_lists_the_server_declines_are_migrated_on_the_client_side_and_caught_up(mongo, tmp_path):
    """A sorted subset: the lists whose values mix kinds are left pending by the server's pass and taken by
    the client side's, in up and in a later catch-up alike."""
    db = mongo.db
    mixed = [{"price": 2}, {"price": "b"}, {"price": 1}]
    db.items.insert_many([{"_id": i, "lines": [{"price": i}, {"price": i + 1}]} for i in range(10)])
    db.items.insert_one({"_id": 50, "lines": mixed})
    folder = tmp_path / "m"
    folder.mkdir()
    spec = {"step": "subset", "collection": "items", "field": "lines", "keep": 1, "sort": {"price": -1},
            "full_collection": "items_full"}  # fmt: skip
    (folder / "0001_step.yaml").write_text(render("0001_step", "subset", [spec], "t"))
    Runner(db, load_folder(folder), RunOptions(batch_size=4)).up()
    state = step_state(db)
    assert state["in_server"] is True and state["stats"]["pending_left"] == 0
    assert db.items.find_one({"_id": 50})["lines"] == mixed[:1]  # Python keeps the stored order
    assert db.items.find_one({"_id": 3})["lines"] == [{"price": 4}]
    db.items.insert_one({"_id": 60, "lines": mixed})  # written in the old shape since
    Runner(db, load_folder(folder)).up()  # the catch-up of an applied migration
    assert db.items.find_one({"_id": 60}) == {"_id": 60, "lines": mixed[:1], "linesCount": 3}
    assert db.items_full.count_documents({"parentId": {"$in": [50, 60]}}) == 6
    assert Runner(db, load_folder(folder)).verify() == {"0001_step": []}


class ChunksDatabase:
    """mongos, for a collection sharded on ``key`` whose chunks (``min`` and ``shard``) config.chunks holds,
    named by the collection's uuid (MongoDB 5.0 on) or, with ``uuid`` None, by its namespace (before)."""

    name = "shop"

    def __init__(self, key: dict[str, Any], chunks: list[tuple[Any, str]], uuid: Any = "u1") -> None:
        entry = {"_id": "shop.items", "key": key, **({"uuid": uuid} if uuid is not None else {})}
        names = {"uuid": uuid} if uuid is not None else {"ns": "shop.items"}
        rows = [{**names, "min": {"_id": low}, "shard": shard} for low, shard in chunks]
        self.queries: list[dict[str, Any]] = []

        def find(query: dict[str, Any], _projection: Any, sort: Any) -> list[dict[str, Any]]:
            self.queries.append(query)
            either = query.get("$or") or [query]
            return [row for row in rows if any(all(row.get(k) == v for k, v in q.items()) for q in either)]

        config = {"collections": SimpleNamespace(find_one=lambda _query: entry), "chunks": SimpleNamespace(find=find)}
        self.client = type("Client", (), {"__getitem__": lambda _self, _name: config})()

    def command(self, _name: str, _collection: str) -> dict[str, Any]:
        return {"sharded": True}


@pytest.mark.parametrize(
    ("key", "chunks", "uuid", "breaks"),
    [
        # Chunks already in the server's order: a break where the shard changes, none between two of one shard.
        ({"_id": 1}, [(bson.MinKey(), "a"), (10, "a"), (25, "b"), (40, "a")], "u1", ((25, 40), ("a", "b", "a"))),
        ({"_id": 1}, [(bson.MinKey(), "a"), (10, "b"), (25, "b")], None, ((10,), ("a", "b"))),  # before 5.0: by ns
        ({"_id": 1, "day": 1}, [(bson.MinKey(), "a"), ("k", "b")], "u1", (("k",), ("a", "b"))),  # _id first
        ({"_id": 1}, [(bson.MinKey(), "a"), (10, "a")], "u1", ((), ())),  # one shard: one stretch, no break
        ({"_id": "hashed"}, [(bson.MinKey(), "a"), (10, "b")], "u1", ((), ())),  # hashed: every command, every shard
        ({"customerId": 1}, [(bson.MinKey(), "a"), (10, "b")], "u1", ((), ())),  # ranges of _id gain nothing
        ({"_id": 1}, [(bson.MinKey(), "a"), ({"x": 1}, "b")], "u1", ((), ())),  # an _id whose order is not followed
    ],
)
def test_shard_breaks_are_where_a_range_sharded_collections_chunks_pass_to_another_shard(key, chunks, uuid, breaks):
    database = ChunksDatabase(key, chunks, uuid)
    found = sharding.shard_breaks(database, "items")
    assert (found.values, found.shards) == breaks
    bounds = [None, *breaks[0], None]
    assert found.stretches() == [(bounds[n], bounds[n + 1], shard) for n, shard in enumerate(breaks[1])]


@pytest.mark.parametrize(
    ("shards", "workers", "planned", "threads"),
    [
        (("a", "b", "a"), None, 3, 2),  # a stretch between breaks each, a thread per shard
        (("a", "b", "c", "b"), 2, 4, 2),  # --workers caps the threads
        (("a", "b"), 1, 0, 1),  # --workers 1: one pass, its ranges ending where the chunks pass to another shard
        ((), None, 0, 1),  # chunks not read (or on one shard), no --workers: one pass
    ],
)
def test_a_pass_takes_a_thread_per_shard_holding_chunks(shards, workers, planned, threads):
    breaks = sharding.ShardBreaks(tuple(range(10, 10 * len(shards), 10)), shards)
    steps = SimpleNamespace(options=RunOptions(workers=workers))
    found = stretches.planned(steps, None, breaks)  # type: ignore[arg-type]
    assert [(s["low"], s["high"], s["shard"]) for s in found] == breaks.stretches()[: planned or 0]
    assert stretches.threads_for(found, workers) == threads


def test_workers_cut_a_collection_not_sharded_on_id_into_stretches_of_as_many_pending_documents(mongo):
    """--workers N without chunks to follow: N stretches of about as many pending documents (documents
    already in the new shape count for none), none where a stretch would hold fewer than two."""
    db = mongo.db
    db.items.insert_many([{"_id": i, "legacy": 1} for i in range(0, 60, 2)])
    db.items.insert_many([{"_id": i} for i in range(1, 60, 2)])  # in the new shape already
    step = build_step({"step": "unset_field", "collection": "items", **STEPS["unset_field"]})
    run = SimpleNamespace(step=step)
    found = stretches.planned(SimpleNamespace(options=RunOptions(workers=3), db=db), run, sharding.ShardBreaks())
    assert [(s["low"], s["high"], s["shard"]) for s in found] == [
        (None, 20, "part 1"), (20, 40, "part 2"), (40, None, "part 3")
    ]  # fmt: skip
    assert stretches.threads_for(found, 3) == 3
    few = SimpleNamespace(options=RunOptions(workers=16), db=db)
    assert stretches.planned(few, run, sharding.ShardBreaks()) == []  # 30 pending: fewer than 2 a stretch


@pytest.mark.parametrize(
    ("value", "followed"),
    [
        (bson.MinKey(), True),
        (None, True),
        (bson.Decimal128("sNaN"), True),
        ("a", True),
        (bson.ObjectId("000000000000000000000001"), True),
        (False, True),
        (datetime.datetime(2020, 1, 1), True),
        (bson.MaxKey(), True),
        ({"a": 1}, False),
        ([1], False),
        (bson.Binary(b"x", 4), False),
        (bson.Timestamp(1, 1), False),
    ],
)
def test_ranges_follow_chunk_bounds_of_the_types_an_id_commonly_holds(value, followed):
    assert (sharding.followed_order(value) is not None) is followed


@pytest.mark.server_only("the server computes the transform")
@pytest.mark.parametrize("case", ["unset_field", "extended_reference"])
def test_in_server_ranges_end_where_the_chunks_pass_to_another_shard(mongo, tmp_path, monkeypatch, case):
    """A collection sharded on a range of _id (as mongos would say, through config.chunks): no range holds
    documents on both sides of a break, also where nothing is pending just below one, and the result is the
    client side's byte for byte."""
    client_db, server_db = mongo.client[mongo.db_name + "_c"], mongo.db
    breaks = sharding.ShardBreaks((10, 11, 25))
    monkeypatch.setattr(
        sharding, "shard_breaks", lambda db, name: breaks if name == "items" else sharding.ShardBreaks()
    )
    spans: list[tuple[Any, bool, Any]] = []
    settle = InServerSteps._settle

    def recorded(self: Any, run: Any, start: Any, high: Any, *rest: Any) -> int:
        spans.append((start.value, start.has_value, high))
        return settle(self, run, start, high, *rest)

    monkeypatch.setattr(InServerSteps, "_settle", recorded)
    try:
        for db in (client_db, server_db):
            db.items.insert_many([doc for doc in documents(40, nan=False) if not 5 < doc["_id"] < 11])
            db.owners.insert_many(OWNERS)
        folder = migration(tmp_path, case)
        pending = [
            d["_id"]
            for d in server_db.items.find(
                server_pending(build_step({"step": case, "collection": "items", **STEPS[case]}))
            )
        ]
        Runner(client_db, load_folder(folder), RunOptions(batch_size=7, client_side=True)).up()
        spans.clear()
        [applied] = Runner(server_db, load_folder(folder), RunOptions(batch_size=7)).up()
        assert step_state(server_db)["in_server"] is True
        # Each stretch between two breaks in ranges of 7 pending documents (unsharded: every 7th of all).
        stretches: dict[int, list[int]] = {}
        for i in sorted(pending):
            stretches.setdefault(sum(i >= brk for brk in breaks.values), []).append(i)
        ends = [ids[min(n + 6, len(ids) - 1)] for ids in stretches.values() for n in range(0, len(ids), 7)]
        # The first pass (a catch-up pass starts again from the first document).
        first_pass = [high for n, (_last, has_last, high) in enumerate(spans) if n == 0 or has_last][: len(ends)]
        assert first_pass == ends != sorted(pending)[6::7]
        ended = step_state(server_db)["stats"]["ended_at_chunks"]
        assert ended >= len(stretches) - 1
        said = f"step 1 ({case}): {ended} range(s) ended where the collection's chunks pass to another shard"
        assert said in applied["notes"]
        assert raw_documents(server_db, "items") == raw_documents(client_db, "items")
        assert raw_documents(server_db, "items") == raw_documents(client_db, "items")
    finally:
        mongo.client.drop_database(mongo.db_name + "_c")


# Chunks of _id on two shards: [MinKey, 12) and [30, MaxKey) on "a", [12, 30) on "b".
TWO_SHARDS = sharding.ShardBreaks((12, 30), ("a", "b", "a"))


@pytest.mark.server_only("the server computes the transform")
@pytest.mark.parametrize("case", ["unset_field", "extended_reference", "subset"])
@pytest.mark.parametrize(
    ("breaks", "workers", "taken"),
    [
        # Chunks on two shards: a thread each, "a" taking [MinKey, 12) and [30, MaxKey), "b" [12, 30).
        (TWO_SHARDS, None, [[0, 2], [1]]),
        # Unsharded, --workers 3: three stretches of 15 pending documents, a thread each.
        (sharding.ShardBreaks(), 3, [[0], [1], [2]]),
    ],
    ids=["two-shards", "three-workers"],
)
def test_each_stretch_is_taken_by_its_own_thread_at_once(mongo, tmp_path, monkeypatch, case, breaks, workers, taken):
    """The in-server pass over stretches of _id: a thread per shard holding chunks (or per --workers part),
    all at work at the same time (each one's first range waits for the others'), no range crossing a
    stretch, and the result the client side's byte for byte."""
    client_db, server_db = mongo.client[mongo.db_name + "_c"], mongo.db
    monkeypatch.setattr(
        sharding, "shard_breaks", lambda db, name: breaks if name == "items" else sharding.ShardBreaks()
    )
    together = threading.Barrier(len(taken), timeout=30)
    spans: list[tuple[str, Any, bool, bool, Any]] = []
    settle = InServerSteps._settle

    def recorded(self: Any, run: Any, start: Any, high: Any, *rest: Any) -> int:
        name = threading.current_thread().name
        if name == "MainThread":  # the catch-up pass after the stretches
            return settle(self, run, start, high, *rest)
        if not any(span[0] == name for span in spans):
            together.wait()  # a BrokenBarrierError (30 s) unless every other thread is at work too
        spans.append((name, start.value, start.has_value, start.inclusive, high))
        return settle(self, run, start, high, *rest)

    monkeypatch.setattr(InServerSteps, "_settle", recorded)
    try:
        for db in (client_db, server_db):
            db.items.insert_many(documents(45, nan=False))
            db.owners.insert_many(OWNERS)
        folder = migration(tmp_path, case)
        Runner(client_db, load_folder(folder), RunOptions(batch_size=5, client_side=True)).up()
        spans.clear()
        [applied] = Runner(server_db, load_folder(folder), RunOptions(batch_size=5, workers=workers)).up()
        state = step_state(server_db)
        assert state["in_server"] is True and state["stats"]["threads_at_once"] == len(taken)
        assert all(s["done"] for s in state["stretches"])
        bounds = [s["low"] for s in state["stretches"][1:]]
        assert [s["high"] for s in state["stretches"][:-1]] == bounds
        if breaks.values:
            assert [(s["low"], s["high"], s["shard"]) for s in state["stretches"]] == breaks.stretches()

        def stretch_of(value: Any) -> int:
            return sum(value >= bound for bound in bounds)

        for _name, value, has_value, inclusive, high in spans:
            if has_value:  # a range lies in one stretch, begun at its low bound (inclusive) or after a range
                assert stretch_of(value) == stretch_of(high) and inclusive == (value in bounds)
        threads = {span[0] for span in spans}
        by_thread = [sorted({stretch_of(high) for n, _v, _h, _i, high in spans if n == name}) for name in threads]
        assert sorted(by_thread) == taken
        said = f"step 1 ({case}): {len(taken)} thread(s) took stretches of _id at once"
        assert said in " ".join(applied["notes"])
        for name in ["items", *[n for n in client_db.list_collection_names() if n.startswith("items_")]]:
            assert raw_documents(server_db, name) == raw_documents(client_db, name)
        assert Runner(server_db, load_folder(folder)).verify() == {"0001_step": []}
    finally:
        mongo.client.drop_database(mongo.db_name + "_c")


@pytest.mark.server_only("the server computes the transform")
@pytest.mark.parametrize(
    ("collection", "method", "crash_at"),
    [
        ("items", "update_many", 1),  # a first range rewritten in one stretch, nothing settled
        ("items", "update_many", 4),  # ranges of both stretches open, some released
        ("mongopat_backup", "aggregate", 3),  # backups of one stretch's range made, not checked
        ("mongopat_backup", "aggregate", 9),  # further on, both threads at work
    ],
)
@pytest.mark.parametrize("workers", [None, 3], ids=["two-shards", "three-workers"])
def test_a_run_over_stretches_killed_anywhere_resumes_to_the_same_bytes(
    mongo, tmp_path, monkeypatch, collection, method, crash_at, workers
):
    """Killed in one stretch's thread (the others stop after their current range), the next up settles each
    stretch's open range and goes on from each one's checkpoint: the same documents and side documents as
    one pass, no original left in a document, every backup kept, and down back to the same bytes."""
    reference_db, db = mongo.client[mongo.db_name + "_r"], mongo.db
    try:
        for target in (reference_db, db):
            target.items.insert_many(documents(45, seed=6, nan=False))
        folder = migration(tmp_path, "subset")
        Runner(reference_db, load_folder(folder), RunOptions(batch_size=4)).up()
        if workers is None:  # chunks on two shards; else unsharded, cut into --workers stretches
            monkeypatch.setattr(
                sharding, "shard_breaks", lambda db, name: TWO_SHARDS if name == "items" else sharding.ShardBreaks()
            )
        killed_up(db, folder, Crashing(db[collection], method, crash_at), batch_size=4, workers=workers)
        assert len(step_state(db)["stretches"]) == 3
        resumed_like_the_reference(db, reference_db, folder, 4)
        assert all(s["done"] and s["stashed_to"] is None for s in step_state(db)["stretches"])
    finally:
        mongo.client.drop_database(mongo.db_name + "_r")


@pytest.mark.parametrize(
    ("ids", "limit", "lists"),
    [
        ([1, 2, 3], 1000, [[1, 2, 3]]),
        (["a" * 20, "b" * 20, "c" * 20], 70, [["a" * 20, "b" * 20], ["c" * 20]]),
        (["a" * 100, 1], 70, [["a" * 100], [1]]),  # one over the limit goes alone, never dropped
        ([], 70, []),  # nothing to send: no command (a range whose documents all changed)
    ],
)
def test_the_ids_an_update_of_a_down_inside_the_server_names_are_cut_to_fit(monkeypatch, ids, limit, lists):
    monkeypatch.setattr(unset_in_server, "ID_BYTES", limit)
    assert unset_in_server._fitting(ids) == lists


@pytest.mark.parametrize(
    ("outputs", "in_server"), [(["total", "n"], True), (["paid.total"], False), (["$total"], False), ([""], False)]
)
def test_pre_aggregation_outputs_whose_names_are_no_plain_keys_are_computed_on_the_client_side(outputs, in_server):
    """A key's aggregates travel as their values and get their names back by ``$arrayToObject``: an output
    named with a dot or a leading ``$`` (no key of an object the stages make) leaves the step to the client
    side."""
    compute = {name: {"sum": "amount"} for name in outputs}
    spec = {"step": "pre_aggregation", "from": "payments", "local": "_id", "foreign": "orderId", "into": "paid"}
    step = build_step({"collection": "items", **spec, "compute": compute})
    assert (OPERATIONS["pre_aggregation"].server_stages(step) is not None) is in_server
