"""Inference on hand-built documents with known answers (no database involved)."""

import datetime

import bson
from bson import Int64, ObjectId

from mongopat.analysis.collection import AnalyzeOptions, CollectionAnalysis
from mongopat.sources.base import Sampling


def analyse(documents, natural_order=True, count=None, **options):
    analysis = CollectionAnalysis("c", AnalyzeOptions(**options), natural_order=natural_order)
    for document in documents:
        analysis.add(document, len(bson.encode(document)))
    analysis.flush()
    analysis.sampling = Sampling("file", None, complete=count is None)
    analysis.stats.count = count if count is not None else len(documents)
    return analysis.to_dict()


def field(report, path):
    return next(f for f in report["fields"] if f["path"] == path)


def oid_at(epoch: int, n: int = 0) -> ObjectId:
    return ObjectId(epoch.to_bytes(4, "big") + n.to_bytes(8, "big"))


def test_presence_and_types_of_top_level_and_nested_fields():
    docs = [
        {"a": 1, "b": "x", "sub": {"c": 1.5}},
        {"a": 2, "sub": {"c": 2.5, "d": True}},
        {"a": "three", "b": None, "sub": {"c": 3}},
        {"a": 4},
    ]
    report = analyse(docs)
    a = field(report, "a")
    assert a["presence"] == 1.0
    assert {t["type"]: t["count"] for t in a["types"]} == {"int": 3, "string": 1}
    assert field(report, "b")["presence"] == 0.5
    assert field(report, "sub")["presence"] == 0.75
    # Nested presence is relative to the documents that hold the parent.
    assert field(report, "sub.c")["presence"] == 1.0
    assert field(report, "sub.d")["presence"] == round(1 / 3, 4)
    assert {t["type"] for t in field(report, "sub.c")["types"]} == {"double", "int"}
    assert field(report, "sub.d")["depth"] == 2
    assert report["max_depth"] == 2


def test_int_long_split_and_bson_types():
    docs = [
        {"n": 5},
        {"n": 2**40},
        {"n": Int64(7)},
        {"when": datetime.datetime(2024, 1, 1)},
        {"id": ObjectId()},
    ]
    report = analyse(docs)
    assert {t["type"]: t["count"] for t in field(report, "n")["types"]} == {"int": 1, "long": 2}
    assert field(report, "when")["types"][0]["type"] == "date"
    assert field(report, "id")["types"][0]["type"] == "objectId"


def test_arrays_of_documents_lengths_and_element_paths():
    docs = [{"items": [{"price": 1.0, "qty": 1}] * n} for n in (1, 2, 3, 4, 100)]
    docs.append({"items": []})
    report = analyse(docs)
    items = field(report, "items")
    array = items["array"]
    assert (array["min"], array["p50"], array["max"]) == (0, 2, 100)
    assert array["p95"] == 100 and array["p99"] == 100
    assert array["mean"] == round(110 / 6, 2)
    assert array["element_types"] == [{"type": "object", "count": 110, "share": 1.0}]
    hist = {b["le"]: b["count"] for b in array["histogram"]}
    assert hist[0] == 1 and hist[1] == 1 and hist[2] == 1 and hist[5] == 2 and hist[100] == 1
    price = field(report, "items[].price")
    assert price["count"] == 110 and price["presence"] == 1.0 and price["in_array"] is True


def test_arrays_of_scalars_and_nested_arrays():
    report = analyse([{"tags": ["a", "b"], "m": [[1, 2], [3]]}, {"tags": ["a"], "m": [[4, 5, 6]]}])
    tags = field(report, "tags")
    assert tags["array"]["element_types"] == [{"type": "string", "count": 3, "share": 1.0}]
    inner = field(report, "m[]")
    assert inner["array"]["max"] == 3 and inner["array"]["min"] == 1


def test_cardinality_and_top_values():
    docs = [{"status": s, "uid": i} for i, s in enumerate(["new"] * 5 + ["paid"] * 3 + ["void"])]
    report = analyse(docs)
    status = field(report, "status")["cardinality"]
    assert status["distinct"] == 3 and status["exact"]
    assert status["top"][0] == {"value": "new", "count": 5}
    uid = field(report, "uid")["cardinality"]
    assert uid["distinct"] == 9 and uid["all_distinct"]


def test_document_sizes_are_bson_sizes():
    docs = [{"x": "a" * n} for n in (10, 100, 1000)]
    report = analyse(docs)
    sizes = sorted(len(bson.encode(d)) for d in docs)
    assert report["document_size"]["min"] == sizes[0]
    assert report["document_size"]["max"] == sizes[2]
    assert report["document_size"]["p50"] == sizes[1]
    assert report["document_size"]["over_1mb"] == 0


def test_insert_rate_from_objectid_timestamps():
    start = 1_699_999_980  # on a minute boundary
    # 120 documents over 60 seconds: 2/s on average; 10 in the busiest second.
    docs = [{"_id": oid_at(start + i // 2, i)} for i in range(110)] + [
        {"_id": oid_at(start + 59, 1000 + i)} for i in range(10)
    ]
    report = analyse(docs)
    profile = report["time"][0]
    assert profile["field"] == "_id" and profile["span_seconds"] == 59
    assert profile["avg_per_sec"] == 2.0  # over the 60 whole seconds the documents fall in
    assert profile["peak_per_second"] == 10
    assert profile["peak_per_minute"] == 120
    assert profile["first"] == "2023-11-14T22:13:00Z"


def test_sampled_rates_are_scaled_and_omit_per_second_peaks():
    start = 1_700_000_000
    docs = [{"_id": oid_at(start + i * 36, i)} for i in range(100)]  # one hour
    report = analyse(docs, count=10_000)
    profile = report["time"][0]
    assert profile["scaled"] is True
    assert profile["estimated_documents"] == 10_000
    assert profile["peak_per_second"] is None
    assert profile["avg_per_sec"] == float(f"{10_000 / (99 * 36 + 1):.4g}")


def test_an_average_rate_never_passes_its_peak():
    # Stamped at seconds 0, 1 and 2: a span of 2 seconds that fills three (the sales sample's import).
    start = 1_700_000_000
    counts = (700, 2230, 2070)
    docs = [{"_id": oid_at(start + second, second * 10_000 + i)} for second, n in enumerate(counts) for i in range(n)]
    profile = analyse(docs)["time"][0]
    assert profile["span_seconds"] == 2
    assert profile["peak_per_second"] == 2230
    assert profile["avg_per_sec"] == float(f"{sum(counts) / 3:.4g}") <= profile["peak_per_second"]
    assert profile["avg_per_hour"] is None  # three seconds say nothing of an hour


def test_insert_rate_from_date_fields():
    base = datetime.datetime(2024, 1, 1)
    docs = [{"ts": base + datetime.timedelta(minutes=i)} for i in range(61)]
    report = analyse(docs)
    profile = next(p for p in report["time"] if p["field"] == "ts")
    assert profile["kind"] == "date" and profile["span_seconds"] == 3600
    assert profile["avg_per_hour"] == float(f"{61 / 3601 * 3600:.4g}")


def test_shape_drift_finds_appearing_and_vanishing_fields():
    start = 1_700_000_000
    old = [{"_id": oid_at(start + i, i), "name": "x", "legacy": 1} for i in range(50)]
    new = [{"_id": oid_at(start + 1000 + i, 100 + i), "name": "y", "schemaVersion": 2} for i in range(50)]
    drift = analyse(old + new)["drift"]
    assert drift["clock"] == "_id"
    assert [a["field"] for a in drift["appeared"]] == ["schemaVersion"]
    assert [v["field"] for v in drift["vanished"]] == ["legacy"]
    assert len(drift["shapes"]) == 2 and drift["shapes"][0]["documents"] == 50


def test_uniform_shape_has_no_drift():
    docs = [{"_id": oid_at(1_700_000_000 + i, i), "a": i} for i in range(100)]
    drift = analyse(docs)["drift"]
    assert drift["appeared"] == [] and drift["vanished"] == []


def test_extended_json_wrappers_are_decoded_during_the_walk():
    docs = [
        {
            "_id": {"$oid": "5f1e2d3c4b5a697887766554"},
            "at": {"$date": "2024-01-02T03:04:05Z"},
            "items": [{"$numberLong": "5"}],
        }
    ]
    analysis = CollectionAnalysis("c", AnalyzeOptions())
    analysis.add(docs[0], None)
    analysis.flush()
    assert isinstance(docs[0]["_id"], ObjectId)
    report = analysis.to_dict()
    assert field(report, "at")["types"][0]["type"] == "date"
    assert field(report, "items")["array"]["element_types"][0]["type"] == "long"
    assert report["document_size"]["min"] == len(bson.encode(docs[0]))


def test_memory_is_bounded_by_paths_not_documents():
    analysis = CollectionAnalysis("c", AnalyzeOptions(distinct_limit=500))
    for i in range(20_000):
        analysis.add({"_id": i, "s": f"v{i}", "arr": list(range(i % 7))}, 50)
    analysis.flush()
    slot = analysis.root.fields["s"]
    assert len(slot.distinct.values) <= 500 and slot.buffer == []
    assert len(analysis.sizes.counts) <= 4096


def test_a_field_of_dates_and_numbers_profiles_only_the_dates():
    start = datetime.datetime(2024, 1, 1)
    docs = [{"_id": i, "at": start + datetime.timedelta(hours=i) if i % 2 else i} for i in range(200)]
    report = analyse(docs)
    profile = next(p for p in report["time"] if p["field"] == "at")
    assert profile["documents"] == 100
    assert profile["first"] == "2024-01-01T01:00:00Z"
