"""What the analysis tells apart before any rule reads it: placeholder values, arrays that are geometries or
vectors, documents keyed by ids, the server's own collections. Cases as data: each names the documents and
what the report must say of them."""

from __future__ import annotations

import datetime
import random
import time
from typing import Any

import pytest
from bson import ObjectId

from mongopat.analysis.sentinels import NumberRange
from mongopat.command import analyze
from mongopat.rules import Context, run_rules
from mongopat.sources import SourceSpec
from tests.support.dumps import write_export

rng = random.Random(11)

# (case, values of one field, the sentinels the report names: (value, constant))
SENTINEL_CASES = [
    ("temperature with 999.9 for not read", [rng.randint(-300, 400) / 10 for _ in range(200)] + [999.9] * 12,
     [(999.9, False)]),
    ("a placeholder held by every document", [9999] * 50, [(9999, True)]),
    ("a real maximum of 99 in a 0..100 range", [rng.randint(0, 100) for _ in range(200)] + [99] * 5, []),
    ("9999 not twice past the other values", [rng.randint(0, 7000) for _ in range(200)] + [9999] * 5, []),
    ("-999 below negative readings", [rng.randint(-50, 50) for _ in range(200)] + [-999] * 3, [(-999, False)]),
    ("too few values to tell", [1, 2, 3, 999], []),
    ("two other values only", [1, 2] * 20 + [999] * 4, []),
    ("99999 among cloud heights", [rng.choice([450, 800, 1200, 2500]) for _ in range(100)] + [99999] * 30,
     [(99999, False)]),
]  # fmt: skip


@pytest.mark.parametrize(("case", "values", "expected"), SENTINEL_CASES, ids=[c[0] for c in SENTINEL_CASES])
def test_sentinel_values(case, values, expected):
    numbers = NumberRange()
    for start in range(0, len(values), 64):  # in buffers, as the walk folds them
        numbers.add_many(values[start : start + 64])
    summary = numbers.summary(len(set(values)))
    assert [(s["value"], s["constant"]) for s in summary["sentinels"]] == expected, case
    assert summary["min"] == min(values) and summary["max"] == max(values)


def test_sentinels_merge_like_one_stream():
    values = [rng.randint(-300, 400) / 10 for _ in range(300)] + [999.9] * 20
    rng.shuffle(values)
    one, left, right = NumberRange(), NumberRange(), NumberRange()
    one.add_many(values)
    left.add_many(values[:150])
    right.add_many(values[150:])
    left.merge(right)
    assert left.summary(len(set(values))) == one.summary(len(set(values)))


def fields_of(tmp_path, documents: list[dict[str, Any]], name: str = "things") -> dict[str, dict[str, Any]]:
    write_export(tmp_path, name, documents)
    report = analyze(SourceSpec(dump=str(tmp_path)))
    return {f["path"]: f for f in report["collections"][0]["fields"]}


# (case, one document's array field, its path, the kind the report names)
ARRAY_CASES = [
    ("GeoJSON polygon", {"geometry": {"type": "Polygon", "coordinates": [[[1.0, 2.0]] * 40]}},
     "geometry.coordinates", "geojson"),
    ("GeoJSON point", {"loc": {"type": "Point", "coordinates": [1.5, 2.5]}}, "loc.coordinates", "geojson"),
    ("embedding", {"embedding": [0.1] * 64}, "embedding", "vector"),
    ("legacy coordinate pair", {"coord": [-73.9, 40.7]}, "coord", "coordinates"),
    ("list of tags", {"tags": ["a", "b", "c"]}, "tags", None),
    ("scores of varying length", {"scores": [1, 2, 3]}, "scores", None),
]  # fmt: skip


@pytest.mark.parametrize(("case", "document", "path", "kind"), ARRAY_CASES, ids=[c[0] for c in ARRAY_CASES])
def test_arrays_recognised_for_what_they_are(tmp_path, case, document, path, kind):
    documents = [dict(document, _id=i) for i in range(30)]
    if case == "scores of varying length":
        documents = [{"_id": i, "scores": list(range(i % 5 + 1))} for i in range(30)]
    assert fields_of(tmp_path, documents)[path]["array"]["kind"] == kind, case


def test_no_array_advice_on_geometries_and_vectors(tmp_path):
    """Rings of thousands of points and 1,024-number embeddings are bounded by what they stand for:
    capping them would break 2dsphere queries and vector search. A list that grows still gets MP201."""
    documents = [
        {"_id": i, "geometry": {"type": "Polygon", "coordinates": [[[float(j), 1.0] for j in range(1200)]]},
         "embedding": [0.5] * 1024, "events": list(range(1500 if i == 0 else 3))}
        for i in range(20)
    ]  # fmt: skip
    write_export(tmp_path, "areas", documents)
    report = analyze(SourceSpec(dump=str(tmp_path)))
    found = run_rules(Context(report), {"MP201"})
    assert [r.fields for r in found] == [["events"]]


def test_a_document_keyed_by_ids_is_a_map_in_seconds(tmp_path):
    """One document of 25,000 entries keyed by ids: a handful of paths, not 100,000, and its _id apart."""
    document: dict[str, Any] = {"_id": ObjectId()}
    for i in range(25_000):
        document[str(40_000_000 + i * 7)] = {"name": f"r{i}", "borough": rng.choice("ABC")}
    write_export(tmp_path, "by_id", [document])
    started = time.monotonic()
    report = analyze(SourceSpec(dump=str(tmp_path)))
    assert time.monotonic() - started < 30
    collection = report["collections"][0]
    assert [f["path"] for f in collection["fields"]] == ["_id", "<key>", "<key>.name", "<key>.borough"]
    assert collection["document_map"]["keys"] == 25_000
    assert collection["document_map"]["key_forms"] == [{"form": "integer", "share": 1.0}]
    assert next(f for f in collection["fields"] if f["path"] == "_id")["types"][0]["type"] == "objectId"


def test_documents_with_many_optional_named_fields_are_not_a_map(tmp_path):
    documents = [{"_id": i, **{f"skill_{k}": k for k in range(40) if (i + k) % 3 == 0}} for i in range(60)]
    fields = fields_of(tmp_path, documents)
    assert "skill_0" in fields and "<key>" not in fields


def test_a_profiler_dump_gets_no_design_advice(tmp_path):
    """system.profile saved under another name: its documents are the server's, and its `query` filter
    names a student without copying anything of the student."""
    start = datetime.datetime(2026, 1, 1)
    students = [{"_id": i, "name": f"s{i}"} for i in range(100)]
    profile = [
        {"_id": ObjectId(), "op": "query", "ns": "school.students", "millis": rng.randint(0, 40), "client": f"10.0.0.{i % 2}",
         "ts": start + datetime.timedelta(seconds=i // 3), "nreturned": rng.randint(0, 9),
         "query": {"student_id": i % 100, "$snapshot": True}}
        for i in range(1500)
    ]  # fmt: skip
    write_export(tmp_path, "students", students)
    write_export(tmp_path, "profiles", profile)
    report = analyze(SourceSpec(dump=str(tmp_path)))
    profiles = next(c for c in report["collections"] if c["name"] == "profiles")
    assert profiles["system_output"] == "profiler"
    assert any("profiler" in note for note in profiles["notes"])
    assert [p for p in profiles["patterns_in_place"] if p["pattern"] == "extended_reference"] == []
    assert [r for r in run_rules(Context(report)) if r.collection == "profiles"] == []
