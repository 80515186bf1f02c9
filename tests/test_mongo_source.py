"""Live sources through the shared ``mongo`` fixture (mongomock, or a real server via MONGOPAT_TEST_URI)."""

import time

import pytest
from bson import ObjectId
from pymongo.errors import ExecutionTimeout, OperationFailure, ServerSelectionTimeoutError

from mongopat.analysis.collection import AnalyzeOptions
from mongopat.command import analyze
from mongopat.errors import InputError, SourceError
from mongopat.sources import MongoSource, SourceSpec
from mongopat.sources.mongo import describe_error


def spec(mongo, **kwargs):
    return SourceSpec(uri=mongo.uri, db=mongo.db_name, **kwargs)


def test_small_collection_is_scanned_whole(mongo):
    mongo.db.orders.insert_many([{"total": i, "items": [{"p": 1}] * (i % 4)} for i in range(50)])
    mongo.db.orders.create_index("total")
    report = analyze(spec(mongo))
    orders = report["collections"][0]
    assert orders["name"] == "orders" and orders["count"] == 50
    assert orders["sampling"]["method"] == "scan" and orders["sampling"]["complete"]
    assert orders["document_size"]["count"] == 50
    assert {i["name"] for i in orders["indexes"]} == {"_id_", "total_1"}
    assert next(f for f in orders["fields"] if f["path"] == "items")["array"]["max"] == 3


def test_large_collection_is_sampled_with_sample(mongo):
    mongo.db.events.insert_many([{"kind": "k"} for _ in range(300)])
    report = analyze(spec(mongo), options=AnalyzeOptions(sample_size=40))
    events = report["collections"][0]
    assert events["sampling"]["method"] == "$sample"
    assert events["sampling"]["documents"] == 40
    assert events["count"] == 300  # estimated count from the server


def test_collection_filter_and_unknown_collection(mongo):
    mongo.db.a.insert_one({"x": 1})
    mongo.db.b.insert_one({"x": 1})
    report = analyze(spec(mongo), ["b"])
    assert [c["name"] for c in report["collections"]] == ["b"]
    with pytest.raises(InputError, match="not found"):
        analyze(spec(mongo), ["nope"])


def test_empty_database_is_an_input_error(mongo):
    with pytest.raises(InputError, match="has no collections"):
        analyze(spec(mongo))


def test_references_found_on_a_live_source(mongo):
    customers = [ObjectId() for _ in range(20)]
    mongo.db.customers.insert_many([{"_id": c, "name": "n"} for c in customers])
    mongo.db.orders.insert_many([{"customerId": customers[i % 20]} for i in range(60)])
    report = analyze(spec(mongo))
    orders = next(c for c in report["collections"] if c["name"] == "orders")
    ref = orders["references"][0]
    assert (ref["field"], ref["target"], ref["match_rate"]) == ("customerId", "customers", 1.0)


def test_missing_database_name():
    with pytest.raises(InputError, match="no database"):
        MongoSource("mongomock://tests")


def test_unreachable_server_fails_fast_without_the_password():
    started = time.monotonic()
    with pytest.raises(SourceError) as info:
        MongoSource("mongodb://admin:hunter2secret@127.0.0.1:9/db", timeout_ms=500)
    elapsed = time.monotonic() - started
    assert "cannot reach MongoDB" in info.value.message
    assert "hunter2secret" not in str(info.value)
    assert elapsed < 15  # bounded by --timeout-ms, not the driver's 30 s default


def test_bad_uri_scheme_and_bad_read_preference():
    with pytest.raises(InputError, match="unsupported URI"):
        MongoSource("postgres://x/db")
    with pytest.raises(InputError, match="read preference"):
        MongoSource("mongomock://tests/db", read_preference="fastest")


def test_malformed_mongodb_uri():
    with pytest.raises(InputError, match="invalid MongoDB URI"):
        MongoSource("mongodb://user:pw@host:notaport/db")


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (OperationFailure("Authentication failed.", code=18), "authentication failed at mongodb://app:***@h/db"),
        (OperationFailure("not authorized on shop to execute command { aggregate }", code=13), "not authorized"),
        (ExecutionTimeout("operation exceeded time limit", code=50), "--max-time-ms"),
        (ServerSelectionTimeoutError("h:27017: timed out, Timeout: 5s"), "cannot reach MongoDB"),
    ],
)
def test_driver_errors_become_one_clear_line(error, expected):
    described = describe_error(error, "mongodb://app:pa55word@h/db")
    assert expected in described.message
    assert "pa55word" not in str(described)
    assert described.exit_code == 2


def test_password_in_driver_message_is_scrubbed():
    error = OperationFailure("bad uri mongodb://app:pa55word@h/db and pa55word again", code=2)
    assert "pa55word" not in str(describe_error(error, "mongodb://app:pa55word@h/db"))


def test_full_scan_reads_every_document_only_when_asked(mongo):
    mongo.db.events.insert_many([{"k": i} for i in range(300)])
    sampled = analyze(spec(mongo), options=AnalyzeOptions(sample_size=40))["collections"][0]
    full = analyze(spec(mongo), options=AnalyzeOptions(sample_size=40, full_scan=True))["collections"][0]
    assert sampled["sampling"]["documents"] == 40 and sampled["sampling"]["method"] == "$sample"
    assert (
        full["sampling"]["documents"] == 300
        and full["sampling"]["complete"]
        and "--full-scan" in full["sampling"]["note"]
    )
