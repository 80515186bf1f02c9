"""Sub-documents keyed by values (ids, hashes, dates) are one map: one path in the report, the attribute
pattern in recommend, and a map_to_array migration that round-trips exactly."""

import copy
import json
import random
import time
import uuid

import pytest
from bson import ObjectId

from mongopat.analysis.collection import AnalyzeOptions, CollectionAnalysis
from mongopat.analysis.schema import key_form
from mongopat.command import analyze
from mongopat.migrate.operations import transform
from mongopat.migrate.operations.map_to_array import array_to_map
from mongopat.migrate.steps import StepError, build_step
from mongopat.sources import SourceSpec
from tests.support.dumps import write_export
from tests.support.evidence import findings, report_of


def customers(n=500, keys=2000, seed=1, per_doc=4):
    rng = random.Random(seed)
    ids = [uuid.UUID(int=rng.getrandbits(128)).hex for _ in range(keys)]
    docs = []
    for i in range(n):
        details = {}
        for key in rng.sample(ids, rng.randint(0, per_doc)):
            details[key] = {"tier": rng.choice(["gold", "silver"]), "benefits": ["x"], "active": True, "id": key}
        docs.append({"_id": ObjectId(), "name": f"c{i}", "tier_and_details": details})
    return docs


def fields_of(report):
    return {f["path"]: f for f in report["collections"][0]["fields"]}


@pytest.mark.parametrize(
    "key,form",
    [
        ("5f1e2d3c4b5a697887766554", "objectId"),
        ("0f8fad5b-d9cb-469f-a165-70867728950e", "uuid"),
        ("0f8fad5bd9cb469fa16570867728950e", "uuid"),
        ("a3f9c2e1b4d6f8a0c2", "hex"),
        ("12345", "integer"),
        ("2024-05-01", "date"),
        ("20240501", "date"),
        ("screen_size", "name"),
        ("deadbeefcafebabe", "name"),  # letters only: a word as likely as a hash
    ],
)
def test_key_forms(key, form):
    assert key_form(key) == form


def test_ids_as_keys_are_one_map_path(tmp_path):
    docs = customers()
    report = report_of(tmp_path, {"customers": docs})
    fields = fields_of(report)
    assert set(fields) == {
        "_id", "name", "tier_and_details", "tier_and_details.<key>", "tier_and_details.<key>.tier",
        "tier_and_details.<key>.benefits", "tier_and_details.<key>.active", "tier_and_details.<key>.id",
    }  # fmt: skip
    keys = fields["tier_and_details"]["map"]
    distinct = len({k for d in docs for k in d["tier_and_details"]})
    occurrences = sum(len(d["tier_and_details"]) for d in docs)
    assert keys["keys"] == distinct and keys["keys_exact"]
    assert keys["key_forms"] == [{"form": "uuid", "share": 1.0}]
    assert keys["keys_per_document"]["mean"] == round(occurrences / len(docs), 2)
    assert keys["key_in_value"] == "id"
    value = fields["tier_and_details.<key>"]
    assert value["count"] == occurrences
    assert value["presence"] == round(sum(1 for d in docs if d["tier_and_details"]) / len(docs), 4)
    assert fields["tier_and_details.<key>.tier"]["cardinality"]["distinct"] == 2
    assert all(f["map"] is None for path, f in fields.items() if path != "tier_and_details")


def test_ten_thousand_keys_keep_the_report_small_and_the_analysis_fast(tmp_path):
    """10,000 distinct keys: the report stays a handful of paths; time is stated, not asserted against a clock."""
    ids = [uuid.UUID(int=i * 7919 + 1).hex for i in range(10_000)]
    docs = [
        {
            "_id": ObjectId(),
            "tier_and_details": {
                ids[(3 * i + j) % 10_000]: {"tier": j, "id": ids[(3 * i + j) % 10_000]} for j in range(3)
            },
        }
        for i in range(5000)
    ]  # every key used 1.5 times on average, all 10,000 of them
    write_export(tmp_path, "customers", docs)
    started = time.perf_counter()
    report = analyze(SourceSpec(dump=str(tmp_path)))
    elapsed = time.perf_counter() - started
    size = len(json.dumps(report))
    fields = fields_of(report)
    assert len(fields) == 5 and fields["tier_and_details"]["map"]["keys"] == 10_000
    assert size < 40_000, size
    print(f"10,000 keys: {len(docs):,} documents analysed in {elapsed:.2f} s, report {size:,} bytes")


def test_sparse_named_keys_are_a_map_but_a_few_names_are_fields(tmp_path):
    rng = random.Random(2)
    names = [f"user_{rng.choice('abcdefgh')}{i}" for i in range(600)]
    docs = [{"_id": i, "scores": {name: i for name in rng.sample(names, 3)}} for i in range(400)]
    docs += [{"_id": 1000 + i, "specs": {f"spec_{j}": j for j in range(i % 40 + 1)}} for i in range(400)]
    fields = fields_of(report_of(tmp_path, {"things": docs}))
    assert fields["scores"]["map"] is not None and "scores.<key>" in fields
    assert fields["specs"]["map"] is None and "specs.spec_39" in fields  # 40 named fields stay fields


def test_parallel_parts_agree_when_only_one_part_saw_a_map():
    docs = customers(n=300, seed=4)
    options = AnalyzeOptions(workers=1)
    whole = CollectionAnalysis("c", options)
    for doc in copy.deepcopy(docs):
        whole.add(doc, None)
    first, second = CollectionAnalysis("c", options), CollectionAnalysis("c", options)
    tail = [{"_id": ObjectId(), "name": "late", "tier_and_details": {"k1": {"tier": "gold", "id": "k1"}}}]
    for doc in copy.deepcopy(tail):  # few keys: not a map in this part alone
        second.add(doc, None)
    for doc in copy.deepcopy(docs):
        first.add(doc, None)
    first.merge(second)
    first.flush()
    merged = {e["path"]: e for e in first.field_entries()}
    assert merged["tier_and_details"]["map"]["keys"] == whole.field_entries()[2]["map"]["keys"] + 1
    assert merged["tier_and_details.<key>"]["count"] == sum(len(d["tier_and_details"]) for d in docs) + 1
    assert not any(path.startswith("tier_and_details.k1") for path in merged)


def test_recommend_proposes_the_attribute_pattern_for_a_map(tmp_path):
    report = report_of(tmp_path, {"customers": customers()})
    [rec] = findings(report, rule="MP107")
    assert rec.fields == ["tier_and_details"] and rec.evidence["distinct_keys"] > 800
    assert rec.migration == {
        "step": "map_to_array", "collection": "customers", "field": "tier_and_details", "layout": "merge",
        "key_field": "id", "value_field": "v", "key_in_value": True, "index": {"tier_and_details.id": 1},
    }  # fmt: skip
    build_step(rec.migration)


def step(**params):
    return build_step({"step": "map_to_array", "collection": "c", "field": "m", **params})


@pytest.mark.parametrize(
    "params,value,expected",
    [
        ({}, {"a1": {"x": 1}, "b2": {"x": 2}}, [{"k": "a1", "x": 1}, {"k": "b2", "x": 2}]),
        ({"key_field": "id", "key_in_value": True}, {"a1": {"id": "a1", "x": 1}}, [{"id": "a1", "x": 1}]),
        (
            {"layout": "pair"},
            {"2024-01-01": 3, "2024-01-02": {"y": 1}},
            [{"k": "2024-01-01", "v": 3}, {"k": "2024-01-02", "v": {"y": 1}}],
        ),
        ({}, {}, []),
    ],
)
def test_map_to_array_round_trips(params, value, expected):
    document = {"_id": 1, "m": value, "other": 2}
    migrated = transform(document, step(**params)).document
    assert migrated["m"] == expected and migrated["other"] == 2
    restored = array_to_map(copy.deepcopy(migrated), step(**params))
    assert restored == document and list(restored["m"]) == list(value)
    assert transform(migrated, step(**params)).document == migrated  # already converted: left as it is


def test_map_to_array_refuses_what_it_could_not_undo():
    with pytest.raises(ValueError, match="already has a field 'k'"):
        transform({"_id": 1, "m": {"a": {"k": 1}}}, step())
    with pytest.raises(ValueError, match="not its key"):
        transform({"_id": 1, "m": {"a": {"id": "b"}}}, step(key_field="id", key_in_value=True))
    with pytest.raises(ValueError, match="layout 'pair'"):
        transform({"_id": 1, "m": {"a": 3}}, step())
    with pytest.raises(StepError, match="layout"):
        step(layout="zip")


def test_map_migration_up_and_down_on_a_server(mongo, tmp_path):
    from mongopat.migrate.script import load_folder, render
    from mongopat.migrate.server.runner import Runner

    docs = customers(n=120, seed=5)
    mongo.db.customers.insert_many(copy.deepcopy(docs))
    spec = findings(report_of(tmp_path / "dump", {"customers": docs}), rule="MP107")[0].migration
    folder = tmp_path / "migrations"
    folder.mkdir()
    (folder / "0001_map.yaml").write_text(render("0001_map", "map", [spec], "test"))
    runner = Runner(mongo.db, load_folder(folder))
    runner.up()
    stored = mongo.db.customers.find_one({"_id": docs[0]["_id"]})
    assert isinstance(stored["tier_and_details"], list)
    assert [e["id"] for e in stored["tier_and_details"]] == list(docs[0]["tier_and_details"])
    assert runner.verify_migration(load_folder(folder)[0]) == []
    runner.down()
    assert list(mongo.db.customers.find().sort("_id", 1)) == sorted(docs, key=lambda d: d["_id"])


def test_map_migration_round_trips_a_dump_folder_byte_for_byte(tmp_path):
    from mongopat.migrate.dump_folder.runner import DumpRunner
    from mongopat.migrate.script import load_folder, render

    docs = customers(n=150, seed=6)
    path = write_export(tmp_path / "dump", "customers", docs)
    before = path.read_bytes()
    spec = findings(report_of(tmp_path / "dump", {"customers": docs}), rule="MP107")[0].migration
    folder = tmp_path / "migrations"
    folder.mkdir()
    (folder / "0001_map.yaml").write_text(render("0001_map", "map", [spec], "test"))
    runner = DumpRunner(tmp_path / "dump", load_folder(folder))
    runner.up()
    assert path.read_bytes() != before
    runner.down()
    assert path.read_bytes() == before


def test_map_values_in_extended_json_are_decoded_and_measured_as_bson(tmp_path):
    lines = [
        json.dumps({"_id": i, "seen": {f"{j:024x}": {"$date": "2024-01-01T00:00:00Z"} for j in range(i, i + 40)}})
        for i in range(100)
    ]
    (tmp_path / "c.json").write_text("\n".join(lines) + "\n")
    collection = analyze(SourceSpec(dump=str(tmp_path)))["collections"][0]
    fields = {f["path"]: f for f in collection["fields"]}
    assert set(fields) == {"_id", "seen", "seen.<key>"} and fields["seen.<key>"]["types"][0]["type"] == "date"
    # 40 keys of 24 hex digits holding an 8-byte date each: the size of the BSON, not of the JSON wrappers.
    assert collection["document_size"]["p50"] == 1385
