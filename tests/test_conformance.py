"""MongoDB behaviours mongopat relies on, one test each, as MongoDB's documentation states them.

They run on both lanes. Where a test engine departs from MongoDB, the ``diverges`` marker records how (its
reason is a one-line reproduction) and the test is an expected failure there; the README's conformance
table lists the same rows. mongopat's code carries no workaround for any of them.
"""

from __future__ import annotations

import datetime
import threading
from typing import Any

import bson
import pymongo.errors
import pytest
from bson.binary import Binary
from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument

from tests.support.mongod import COMPENSATED_SUMS


@pytest.mark.diverges("mongomock", "insert {b: Binary(b'x', 0)}; find_one()['b'] is the Binary given, not bytes")
def test_binary_subtype_0_reads_back_as_bytes(mongo):
    """pymongo decodes binary subtype 0 as ``bytes``, and a ``Binary`` never equals ``bytes``: what mongopat
    compares with a value read back must be bytes too."""
    mongo.db.kept.insert_one({"_id": 1, "b": Binary(b"x", 0)})
    value = mongo.db.kept.find_one({"_id": 1})["b"]
    assert type(value) is bytes and value == b"x"


def test_dates_read_back_naive_in_utc(mongo):
    """BSON dates carry no zone: a client without tz_aware reads them back naive, in UTC."""
    aware = datetime.datetime(2026, 1, 1, 12, tzinfo=datetime.timezone(datetime.timedelta(hours=2)))
    mongo.db.kept.insert_one({"_id": 1, "d": aware})
    value = mongo.db.kept.find_one({"_id": 1})["d"]
    assert value.tzinfo is None and value == datetime.datetime(2026, 1, 1, 10)


@pytest.mark.diverges("mongomock", "insert {n: 2**40}; type(find_one()['n']) is int, not bson.int64.Int64")
def test_64_bit_integers_read_back_as_int64(mongo):
    mongo.db.kept.insert_one({"_id": 1, "n": 2**40})
    value = mongo.db.kept.find_one({"_id": 1})["n"]
    assert type(value) is bson.int64.Int64 and value == 2**40


def test_an_update_keeps_the_order_of_fields(mongo):
    """$set of an existing field keeps its place; a new field goes last (what byte-for-byte checks rely on)."""
    mongo.db.kept.insert_one({"_id": 1, "a": 1, "b": 2})
    mongo.db.kept.update_one({"_id": 1}, {"$set": {"a": 5, "c": 3}})
    assert list(mongo.db.kept.find_one({"_id": 1})) == ["_id", "a", "b", "c"]


ORDER = "insert {_id: 1, a: 1, b: 2}; find {$expr: {$eq: ['$$ROOT', {$literal: {_id: 1, b: 2, a: 1}}]}} matches"


@pytest.mark.diverges("mongomock", ORDER)
@pytest.mark.diverges("secantusdb", ORDER)
def test_a_replace_conditional_on_the_whole_document(mongo):
    """``{_id, $expr: {$eq: [$$ROOT, {$literal: doc}]}}`` matches only that exact version (the compare-and-swap
    every client-side write of a migration uses). MongoDB compares documents pair by pair, in field order:
    the same fields in another order are another document."""
    collection = mongo.db.kept
    collection.insert_one({"_id": 1, "a": 1, "b": 2})
    version = collection.find_one({"_id": 1})
    swapped = {"_id": 1, "$expr": {"$eq": ["$$ROOT", {"$literal": {"_id": 1, "b": 2, "a": 1}}]}}
    assert collection.replace_one(swapped, {"a": 9}).matched_count == 0  # same fields, another order
    exact = {"_id": 1, "$expr": {"$eq": ["$$ROOT", {"$literal": version}]}}
    assert collection.replace_one(exact, {"a": 9}).matched_count == 1


@pytest.mark.diverges("secantusdb", "explain find {_id: 1, $expr: {$eq: ['$a', 1]}}: COLLSCAN, not IDHACK/IXSCAN")
def test_a_conditional_write_by_id_uses_the_id_index(mongo):
    """MongoDB looks the document up by ``_id`` first, then applies ``$expr`` to it: each conditional write
    costs one document, not a scan."""
    if not mongo.real:
        pytest.skip("mongomock has no query planner to explain")
    mongo.db.kept.insert_many([{"_id": i, "a": 1} for i in range(10)])
    plan = mongo.db.kept.find({"_id": 1, "$expr": {"$eq": ["$a", 1]}}).explain()["queryPlanner"]["winningPlan"]
    assert "COLLSCAN" not in str(plan)


@pytest.mark.diverges("secantusdb", "explain find {_id: {m: 'a', id: 1}}: COLLSCAN, not IDHACK/IXSCAN")
def test_an_id_that_is_a_document_is_found_by_the_id_index(mongo):
    """mongopat_backup's ``_id`` is a document (migration, step, collection, the document's ``_id``): a
    backup is found, and ``$merge`` matches one, by the ``_id`` index, whatever the ``_id``'s type."""
    if not mongo.real:
        pytest.skip("mongomock has no query planner to explain")
    mongo.db.kept.insert_many([{"_id": {"m": "a", "id": i}} for i in range(10)])
    plan = mongo.db.kept.find({"_id": {"m": "a", "id": 1}}).explain()["queryPlanner"]["winningPlan"]
    assert "COLLSCAN" not in str(plan)


@pytest.mark.diverges("secantusdb", "$merge whenMatched [{$replaceWith: {$cond: [{$eq: ['$$ROOT', '$$new.o']}, ...]}}]")
def test_merge_compares_documents_in_field_order(mongo):
    """The rewrite of a step computed inside the server replaces a document only while it equals the
    backed-up original: in MongoDB's comparison, the same fields in another order are another document."""
    if not mongo.real:
        pytest.skip("mongomock has no $merge")
    mongo.db.kept.insert_one({"_id": 1, "b": 2, "a": 1})
    mongo.db.new.insert_one({"_id": 1, "o": {"_id": 1, "a": 1, "b": 2}, "t": {"_id": 1, "a": 1, "b": 2, "z": 1}})
    mongo.db.new.aggregate(
        [
            {"$merge": {
                "into": "kept", "on": "_id", "whenNotMatched": "discard",
                "whenMatched": [{"$replaceWith": {"$cond": [{"$eq": ["$$ROOT", "$$new.o"]}, "$$new.t", "$$ROOT"]}}],
            }},
        ]
    )  # fmt: skip
    assert mongo.db.kept.find_one({"_id": 1}) == {"_id": 1, "b": 2, "a": 1}


@pytest.mark.server_only("mongomock has no $merge and is not thread-safe")
@pytest.mark.diverges(
    "secantusdb",
    "$merge whenMatched [{$replaceWith: '$$ROOT'}] beside $inc from a second client: increments lost (in some runs)",
    sometimes=True,
)
def test_merge_updates_each_document_atomically(mongo):
    """``$merge``'s ``whenMatched`` pipeline is an update of the document it matched, atomic like any
    update: a write another client makes meanwhile lands before or after it, never inside it. The rewrite
    of a step computed inside the server relies on it to leave the application's writes alone."""
    mongo.db.kept.insert_one({"_id": 1, "n": 0})
    mongo.db.new.insert_one({"_id": 1})
    stop, acknowledged = threading.Event(), [0]

    def increment() -> None:
        with mongo.new_client() as other:
            while not stop.is_set():
                acknowledged[0] += other[mongo.db_name].kept.update_one({"_id": 1}, {"$inc": {"n": 1}}).matched_count

    writer = threading.Thread(target=increment)
    writer.start()
    try:
        for _ in range(150):
            mongo.db.new.aggregate(
                [{"$merge": {"into": "kept", "on": "_id", "whenMatched": [{"$replaceWith": "$$ROOT"}],
                             "whenNotMatched": "discard"}}]
            )  # fmt: skip
    finally:
        stop.set()
        writer.join()
    assert acknowledged[0] > 0
    assert mongo.db.kept.find_one({"_id": 1})["n"] == acknowledged[0]


@pytest.mark.server_only("mongomock is not thread-safe")
def test_an_update_pipeline_updates_each_document_atomically(mongo):
    """An update with a pipeline transforms each document as it is at that moment, atomically: an
    increment another client makes meanwhile lands before or after it. The rewrite of a step computed
    inside the server is such an update (``in_server_steps.py``)."""
    mongo.db.kept.insert_one({"_id": 1, "n": 0})
    stop, acknowledged = threading.Event(), [0]

    def increment() -> None:
        with mongo.new_client() as other:
            while not stop.is_set():
                acknowledged[0] += other[mongo.db_name].kept.update_one({"_id": 1}, {"$inc": {"n": 1}}).matched_count

    writer = threading.Thread(target=increment)
    writer.start()
    try:
        for round_number in range(150):
            mongo.db.kept.update_many({"_id": {"$in": [1]}}, [{"$set": {"round": round_number, "copy": "$n"}}])
    finally:
        stop.set()
        writer.join()
    assert acknowledged[0] > 0
    assert mongo.db.kept.find_one({"_id": 1})["n"] == acknowledged[0]


@pytest.mark.diverges("secantusdb", "$eq of two equal documents holding NaN: false")
def test_a_document_holding_nan_equals_itself(mongo):
    """In MongoDB's comparison NaN equals NaN, inside arrays and sub-documents too: a document holding
    one still matches a filter that compares it whole (the client side's compare-and-swap)."""
    doc = {"_id": 1, "v": [float("nan"), 1], "w": {"x": float("nan")}}
    mongo.db.kept.insert_one(doc)
    assert mongo.db.kept.count_documents({"_id": 1, "$expr": {"$eq": ["$$ROOT", {"$literal": doc}]}}) == 1


@pytest.mark.diverges("secantusdb", "$getField of a field the input lacks: the input, not missing")
def test_get_field_of_a_missing_field_is_missing(mongo):
    """``$getField`` of a field the document lacks is missing (``operations/server_paths.py`` reads nested
    paths with plain field paths instead, behind ``$type`` checks)."""
    if not mongo.real:
        pytest.skip("mongomock has no $getField")
    mongo.db.kept.insert_one({"_id": 1, "a": {"c": 1}})
    found = mongo.db.kept.aggregate([{"$project": {"t": {"$type": {"$getField": {"field": "b", "input": "$a"}}}}}])
    assert list(found) == [{"_id": 1, "t": "missing"}]


def test_set_field_keeps_an_existing_field_in_place(mongo):
    """``$setField`` replaces an existing field where it is and appends a new one, as a dict assignment
    does: nested paths written inside the server keep the bytes the Python transforms write."""
    if not mongo.real:
        pytest.skip("mongomock has no $setField")
    mongo.db.kept.insert_one({"_id": 1, "a": {"b": 1, "c": 2}})
    pipeline = [{"$set": {"a": {"$setField": {"field": "d", "input": {"$setField": {"field": "b", "input": "$a",
                                                                                  "value": 9}}, "value": 3}}}}]  # fmt: skip
    mongo.db.kept.update_one({"_id": 1}, pipeline)
    raw = mongo.db.kept.with_options(codec_options=CodecOptions(document_class=RawBSONDocument)).find_one()
    assert raw.raw == bson.encode({"_id": 1, "a": {"b": 9, "c": 2, "d": 3}})


@pytest.mark.diverges("secantusdb", "aggregate [$lookup as r, $project {v: '$r.amount'}]: v is missing, not [5, 7]")
def test_a_path_through_an_array_of_sub_documents_after_lookup(mongo):
    """After ``$lookup``, ``"$r.amount"`` is the array of every joined document's ``amount``."""
    mongo.db.accounts.insert_one({"_id": 1})
    mongo.db.deals.insert_many([{"_id": 10, "account": 1, "amount": 5}, {"_id": 11, "account": 1, "amount": 7}])
    pipeline = [
        {"$lookup": {"from": "deals", "localField": "_id", "foreignField": "account", "as": "r"}},
        {"$project": {"v": "$r.amount", "s": {"$sum": "$r.amount"}}},
    ]
    [row] = mongo.db.accounts.aggregate(pipeline)
    assert row["v"] == [5, 7] and row["s"] == 12


@pytest.mark.diverges("mongomock", "aggregate [$project {m: {$mergeObjects: [{a: 1}, {b: 2}]}}]: NotImplementedError")
def test_merge_objects(mongo):
    mongo.db.kept.insert_one({"_id": 1})
    [row] = mongo.db.kept.aggregate([{"$project": {"m": {"$mergeObjects": [{"a": 1}, {"b": 2}]}}}])
    assert row["m"] == {"a": 1, "b": 2}


@pytest.mark.diverges(
    "mongomock", "aggregate [$project {r: {$reduce: {input: [1, 2], initialValue: 0, in: ...}}}]: NotImplementedError"
)
def test_reduce(mongo):
    mongo.db.kept.insert_one({"_id": 1})
    expression = {"$reduce": {"input": [1, 2, 3], "initialValue": 0, "in": {"$add": ["$$value", "$$this"]}}}
    [row] = mongo.db.kept.aggregate([{"$project": {"r": expression}}])
    assert row["r"] == 6


@pytest.mark.diverges("mongomock", "aggregate [$project {s: {$sum: {$map: {input: '$x', in: '$$this'}}}}]: s is 0")
def test_sum_of_an_expression_in_project(mongo):
    mongo.db.kept.insert_one({"_id": 1, "x": [1, 2, 3]})
    [row] = mongo.db.kept.aggregate([{"$project": {"s": {"$sum": {"$map": {"input": "$x", "in": "$$this"}}}}}])
    assert row["s"] == 6


@pytest.mark.server_only("mongomock has no $toDecimal")
def test_a_double_converted_to_decimal_keeps_15_digits(mongo):
    """MongoDB's documentation of ``$toDecimal``: 2.5 becomes Decimal128("2.50000000000000")."""
    mongo.db.kept.insert_one({"_id": 1})
    [row] = mongo.db.kept.aggregate([{"$project": {"d": {"$toDecimal": 2.5}}}])
    assert str(row["d"]) == "2.50000000000000"


@pytest.mark.server_only("mongomock's $sum of an expression inside $project is 0")
@pytest.mark.diverges("secantusdb", "$project {s: {$sum: [120.19, 624.96, 120.19, 160.23]}}: 1025.5700000000002")
def test_a_sum_of_doubles_compensates_its_rounding(mongo):
    mongo.db.kept.insert_one({"_id": 1})
    for values, total in COMPENSATED_SUMS:
        [row] = mongo.db.kept.aggregate([{"$project": {"s": {"$sum": values}, "a": {"$avg": values}}}])
        assert (row["s"], row["a"]) == (total, total / len(values))


@pytest.mark.server_only("mongomock's $sum of an expression inside $project is 0")
@pytest.mark.diverges("secantusdb", "$project {s: {$sum: [Int64(2**62), Int64(2**62)]}}: 'internal server error'")
def test_a_sum_of_longs_that_overflows_is_a_double(mongo):
    mongo.db.kept.insert_one({"_id": 1, "a": [bson.Int64(2**62), bson.Int64(2**62)]})
    [row] = mongo.db.kept.aggregate([{"$project": {"s": {"$sum": "$a"}}}])
    assert row["s"] == 2.0**63 and isinstance(row["s"], float)


@pytest.mark.server_only("mongomock computes no Decimal128 arithmetic")
@pytest.mark.diverges("secantusdb", "$subtract [Decimal128('1.10'), Decimal128('1E+308')]: rounded to 28 digits")
def test_decimal_arithmetic_keeps_34_digits(mongo):
    """Decimal128 is IEEE 754-2008's decimal128: 34 significant digits, in $subtract as in $add."""
    mongo.db.kept.insert_one({"_id": 1})
    operands = [bson.Decimal128("1.10"), bson.Decimal128("1E+308")]
    [row] = mongo.db.kept.aggregate([{"$project": {"d": {"$subtract": operands}, "a": {"$add": operands}}}])
    assert str(row["a"]) == "1.000000000000000000000000000000000E+308"
    assert str(row["d"]) == "-1.000000000000000000000000000000000E+308"


@pytest.mark.diverges("secantusdb", "$indexStats on a new collection: accesses.since is None, not the time stats began")
def test_index_stats_say_since_when(mongo):
    if not mongo.real:
        pytest.skip("mongomock has no $indexStats")
    mongo.db.kept.insert_one({"_id": 1})
    [entry] = mongo.db.kept.aggregate([{"$indexStats": {}}])
    assert isinstance(entry["accesses"]["since"], datetime.datetime)


@pytest.mark.diverges(
    "secantusdb", "insert 10 docs; $collStats {storageStats: {}}: size 0, avgObjSize 0 (collStats says 290)"
)
def test_coll_stats_stage_agrees_with_the_command(mongo):
    if not mongo.real:
        pytest.skip("mongomock has no $collStats")
    mongo.db.kept.insert_many([{"a": i} for i in range(10)])
    command = mongo.db.command("collStats", "kept")
    [stage] = mongo.db.kept.aggregate([{"$collStats": {"storageStats": {}}}])
    assert stage["storageStats"]["count"] == command["count"] == 10
    assert stage["storageStats"]["size"] == command["size"] > 0


@pytest.mark.diverges(
    "secantusdb", "profile 2; find {a: 1}; system.profile entry has no docsExamined, nreturned or planSummary"
)
def test_profiler_entries_say_what_a_query_examined(mongo):
    if not mongo.real:
        pytest.skip("mongomock has no profiler")
    mongo.db.kept.insert_many([{"a": i % 2} for i in range(10)])
    mongo.db.command("profile", 2)
    try:
        list(mongo.db.kept.find({"a": 1}))
    finally:
        mongo.db.command("profile", 0)
    [entry] = [e for e in mongo.db["system.profile"].find({"ns": f"{mongo.db_name}.kept", "op": "query"})]
    assert entry["docsExamined"] == 10 and entry["nreturned"] == 5 and entry["planSummary"] == "COLLSCAN"


@pytest.mark.diverges("secantusdb", "aggregate [{$queryStats: {}}] on admin: 'Unrecognized pipeline stage name'")
def test_query_stats_stage(mongo):
    """MongoDB 7.1+ (and Atlas) keep query shapes in ``$queryStats``; ``access draft`` reads them."""
    if not mongo.real:
        pytest.skip("mongomock has no $queryStats")
    version = tuple(mongo.client.server_info()["versionArray"][:2])
    if mongo.engine == "mongodb" and version < (7, 1):
        pytest.skip(f"MongoDB {version} predates $queryStats")
    mongo.db.kept.insert_many([{"_id": i, "a": i % 3} for i in range(10)])
    for value in range(3):
        list(mongo.db.kept.find({"a": value}))
    entries = list(mongo.client.admin.aggregate([{"$queryStats": {}}]))
    # What access draft reads from each entry (mongopat/draft/server.py): the namespace and shape of the
    # query under key.queryShape, its counts and timings under metrics.
    ours = [e for e in entries if e["key"]["queryShape"]["cmdNs"] == {"db": mongo.db_name, "coll": "kept"}]
    assert ours, "no entry for the finds just run"
    [entry] = [e for e in ours if e["key"]["queryShape"].get("command") == "find"]
    assert entry["key"]["queryShape"]["filter"] == {"a": {"$eq": "?number"}}
    metrics = entry["metrics"]
    assert metrics["execCount"] == 3
    assert set(metrics["totalExecMicros"]) >= {"sum", "max"}
    assert metrics["docsReturned"]["sum"] == 10
    if mongo.engine != "mongodb" or version >= (8, 0):  # 8.0 added docsExamined; before, draft reads 0
        assert metrics["docsExamined"]["sum"] >= 10
    assert metrics["firstSeenTimestamp"] <= metrics["latestSeenTimestamp"]


@pytest.mark.diverges("mongomock", "find({}) with codec_options document_class=RawBSONDocument: NotImplementedError")
def test_documents_read_as_raw_bson(mongo):
    """A collection read with ``RawBSONDocument`` gives the stored bytes, field order and types included
    (what a backup keeps)."""
    from bson.codec_options import CodecOptions
    from bson.raw_bson import RawBSONDocument

    mongo.db.kept.insert_one({"_id": 1, "b": 2, "a": 1.5})
    raw = mongo.db.kept.with_options(codec_options=CodecOptions(document_class=RawBSONDocument)).find_one()
    assert bytes(raw.raw) == bson.encode({"_id": 1, "b": 2, "a": 1.5})


@pytest.mark.diverges("mongomock", "find({_id: {$type: 'timestamp'}}): NotImplementedError")
def test_type_timestamp_in_a_query(mongo):
    from bson.timestamp import Timestamp

    mongo.db.kept.insert_many([{"_id": Timestamp(5, 1)}, {"_id": 2}])
    assert [d["_id"] for d in mongo.db.kept.find({"_id": {"$type": "timestamp"}})] == [Timestamp(5, 1)]


@pytest.mark.diverges("mongomock", "create_index([('a', 1)], name=None); list_indexes() names it None, not 'a_1'")
def test_an_index_created_without_a_name_gets_the_generated_one(mongo):
    mongo.db.kept.create_index([("a", 1), ("b", -1)], name=None)
    assert {i["name"] for i in mongo.db.kept.list_indexes()} == {"_id_", "a_1_b_-1"}


@pytest.mark.diverges("mongomock", "aggregate([{$project: {s: {$bsonSize: '$$ROOT'}}}]): Unrecognized expression")
def test_bson_size_of_the_root_document(mongo):
    """``$bsonSize`` (MongoDB 4.4+) gives a document's BSON size inside the server: ``migrate up`` measures
    a collection's data bytes with it, summed by ``$group``, without reading the documents."""
    documents = [{"_id": i, "s": "x" * i} for i in range(10)]
    mongo.db.kept.insert_many(documents)
    [total] = mongo.db.kept.aggregate(
        [
            {"$project": {"_id": 0, "s": {"$bsonSize": "$$ROOT"}}},
            {"$group": {"_id": None, "n": {"$sum": 1}, "b": {"$sum": "$s"}}},
        ]
    )
    assert total["n"] == 10 and total["b"] == sum(len(bson.encode(d)) for d in documents)


# -- query plans: what index advice relies on (mongopat.indexes.explain) ----------------------------------


def _stations(mongo: Any) -> Any:
    """5,000 readings of 50 stations a minute apart, indexed by station then time."""
    if not mongo.real:
        pytest.skip("mongomock has no query planner to explain")
    start = datetime.datetime(2024, 1, 1)
    mongo.db.r.insert_many([{"st": i % 50, "ts": start + datetime.timedelta(minutes=i), "v": i} for i in range(5000)])
    mongo.db.r.create_index([("st", 1), ("ts", 1)])
    return mongo.db


def _explained(db: Any, **find: Any) -> dict[str, Any]:
    return db.command({"explain": {"find": "r", **find}, "verbosity": "executionStats"})


def test_explain_names_the_index_and_what_a_read_examined(mongo):
    """``explain`` with executionStats: the winning plan's stages (an IXSCAN naming its index and key) and
    the keys and documents examined and returned, the figures the rehearsal reports for each read."""
    from mongopat.indexes.explain import summarise

    db = _stations(mongo)
    window = {"$gte": datetime.datetime(2024, 1, 2), "$lt": datetime.datetime(2024, 1, 3)}
    summary = summarise(_explained(db, filter={"st": 3, "ts": window}))
    assert summary.index == "st_1_ts_1" and summary.key == {"st": 1, "ts": 1}
    assert "IXSCAN" in summary.stages and "COLLSCAN" not in summary.stages
    assert summary.keys_examined == summary.docs_examined == summary.returned == 29
    scan = summarise(_explained(db, filter={"v": 7}))
    assert scan.index is None and "COLLSCAN" in scan.stages and scan.docs_examined == 5000 and scan.returned == 1


@pytest.mark.diverges(
    "secantusdb", "index {st: 1, ts: 1}; explain find {st: 3} sort {ts: 1}: a SORT stage above IXSCAN"
)
def test_an_index_that_gives_the_order_needs_no_sort_stage(mongo):
    """An equality on ``st`` then the index's next key ``ts``: the scan returns documents in ``ts`` order,
    so the plan has no blocking sort (the equality, sort, range rule rests on it)."""
    from mongopat.indexes.explain import summarise

    summary = summarise(_explained(_stations(mongo), filter={"st": 3}, sort={"ts": 1}))
    assert summary.index == "st_1_ts_1" and not summary.sort_in_memory


@pytest.mark.diverges(
    "secantusdb", "index {st: 1, ts: 1}; explain find {st: 3} sort {ts: -1} limit 5: 100 docs examined"
)
def test_a_sorted_read_with_a_limit_stops_at_the_limit(mongo):
    """Read backwards along the index, the newest five of a station are the first five keys: five
    documents examined, not the station's hundred."""
    from mongopat.indexes.explain import summarise

    summary = summarise(_explained(_stations(mongo), filter={"st": 3}, sort={"ts": -1}, limit=5))
    assert summary.docs_examined == 5 and summary.returned == 5


@pytest.mark.diverges(
    "secantusdb", "index {st: 1, ts: 1}; explain find {st: 3} projection {_id: 0, st: 1, ts: 1}: FETCH"
)
def test_a_covered_read_fetches_no_document(mongo):
    """A read whose filter and projection are all in the index key (``_id`` excluded) is answered from the
    index: no document examined."""
    from mongopat.indexes.explain import summarise

    summary = summarise(_explained(_stations(mongo), filter={"st": 3}, projection={"_id": 0, "st": 1, "ts": 1}))
    assert summary.docs_examined == 0 and summary.returned == 100


@pytest.mark.diverges("secantusdb", "index {st: 1, ts: 1}; explain find {st: 3} sort {ts: -1} limit 1: nReturned 100")
def test_explain_counts_what_the_read_returns(mongo):
    """``executionStats.nReturned`` is what the read returns, after its limit: the rehearsal reports it
    beside the documents examined."""
    from mongopat.indexes.explain import summarise

    summary = summarise(_explained(_stations(mongo), filter={"st": 3}, sort={"ts": -1}, limit=1))
    assert summary.returned == 1


@pytest.mark.diverges(
    "secantusdb",
    "index {tags: 1, v: -1, y: 1}, tags arrays; explain find {tags: 3, y: {$gte: 10}} sort {v: -1}: COLLSCAN",
)
def test_an_equality_on_an_array_field_leads_a_compound_index(mongo):
    """A multikey index whose array field the read compares for equality serves the read, its sort and its
    range (MongoDB tracks which paths are multikey): the index the model advises for a genre's best films."""
    from mongopat.indexes.explain import summarise

    if not mongo.real:
        pytest.skip("mongomock has no query planner to explain")
    mongo.db.m.insert_many([{"tags": [i % 7, (i + 1) % 7], "v": i, "y": i % 50} for i in range(3000)])
    mongo.db.m.create_index([("tags", 1), ("v", -1), ("y", 1)])
    raw = mongo.db.command(
        {"explain": {"find": "m", "filter": {"tags": 3, "y": {"$gte": 10}}, "sort": {"v": -1}, "limit": 5},
         "verbosity": "executionStats"}
    )  # fmt: skip
    summary = summarise(raw)
    assert summary.index == "tags_1_v_-1_y_1" and not summary.sort_in_memory


# -- time-series collections (the timeseries step) -------------------------------------------------------------

NO_TIMESERIES = "create_collection('t', timeseries={'timeField': 'ts'}): NotImplementedError"


def _timeseries(mongo: Any) -> Any:
    mongo.db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m", "granularity": "minutes"})
    mongo.db.ts.insert_many([{"t": datetime.datetime(2026, 1, 1, 0, i), "m": "a", "v": i} for i in range(10)])
    return mongo.db.ts


@pytest.mark.diverges("mongomock", NO_TIMESERIES)
@pytest.mark.diverges("secantusdb", "list_collections() after create(timeseries=...): type 'collection'")
def test_a_time_series_collection_is_listed_as_one(mongo):
    """listCollections gives a time-series collection type ``timeseries`` and its options (5.0+)."""
    _timeseries(mongo)
    [entry] = [c for c in mongo.db.list_collections() if c["name"] == "ts"]
    assert entry["type"] == "timeseries" and entry["options"]["timeseries"]["timeField"] == "t"


@pytest.mark.diverges("mongomock", NO_TIMESERIES)
def test_a_time_series_collection_reads_back_its_readings(mongo):
    """Inserted readings read back as they were inserted (the server unpacks its buckets)."""
    ts = _timeseries(mongo)
    assert [d["v"] for d in ts.find({"m": "a"}, sort=[("t", 1)])] == list(range(10))


@pytest.mark.diverges("mongomock", NO_TIMESERIES)
@pytest.mark.diverges("secantusdb", "renameCollection of a time-series collection succeeds (and drops its options)")
def test_a_time_series_collection_cannot_be_renamed(mongo):
    """So the timeseries step copies readings into a collection of a new name."""
    from pymongo.errors import OperationFailure

    ts = _timeseries(mongo)
    with pytest.raises(OperationFailure):
        ts.rename("ts2")


@pytest.mark.diverges("mongomock", NO_TIMESERIES)
@pytest.mark.diverges("secantusdb", "aggregate [{$merge: {into: <a time-series collection>}}] succeeds")
def test_merge_cannot_write_into_a_time_series_collection(mongo):
    """So the timeseries step inserts from the client (``$out`` can write one from 7.0.3 only)."""
    from pymongo.errors import OperationFailure

    _timeseries(mongo)
    mongo.db.plain.insert_one({"t": datetime.datetime(2026, 1, 2), "m": "b", "v": 1})
    with pytest.raises(OperationFailure):
        list(mongo.db.plain.aggregate([{"$project": {"_id": 0}}, {"$merge": {"into": "ts"}}]))


@pytest.mark.diverges("mongomock", NO_TIMESERIES)
@pytest.mark.diverges("secantusdb", "create(timeseries=...) then list_collection_names(): no system.buckets.<name>")
def test_a_time_series_collection_keeps_its_buckets_in_system_buckets(mongo):
    """Its buckets are ``system.buckets.<name>`` (before 8.3's viewless time-series collections): what
    ``migrate verify`` counts to compare with the buckets predicted."""
    _timeseries(mongo)
    assert "system.buckets.ts" in mongo.db.list_collection_names()


@pytest.mark.diverges("mongomock", "update_many(..., let={...}): NotImplementedError")
def test_let_variables_reach_an_update_pipeline_its_filter_and_an_aggregation(mongo):
    """``let`` on ``update`` and ``aggregate`` (MongoDB 5.0): a constant read as ``$$name`` in the filter's
    ``$expr`` and in the pipeline (extended_reference's table of referenced documents)."""
    kept = mongo.db.kept
    kept.insert_many([{"_id": 1, "r": "a"}, {"_id": 2, "r": "b"}])
    table = {"keys": {"$literal": ["a"]}, "copies": {"$literal": [{"n": "$not-a-path"}]}}
    pick = {"$arrayElemAt": ["$$copies", {"$indexOfArray": ["$$keys", "$r"]}]}
    kept.update_many({"$expr": {"$in": ["$r", "$$keys"]}}, [{"$set": {"c": pick}}], let=table)
    assert list(kept.find({}, {"_id": 0})) == [{"r": "a", "c": {"n": "$not-a-path"}}, {"r": "b"}]
    found = list(kept.aggregate([{"$match": {"_id": 2}}, {"$project": {"_id": 0, "k": "$$keys"}}], let=table))
    assert found == [{"k": ["a"]}]


INDEX_OF_TRUE = "aggregate [$project {i: {$indexOfArray: [[1], true]}}]: 0, not -1"


@pytest.mark.diverges("mongomock", "aggregate [$project {i: {$indexOfArray: [[1], 1]}}]: NotImplementedError")
@pytest.mark.diverges("secantusdb", INDEX_OF_TRUE)
def test_index_of_array_matches_numbers_across_types_and_never_a_boolean(mongo):
    """``$indexOfArray`` compares as BSON does: 1, 1.0 and Int64(1) are one value, ``true`` is not a number."""
    mongo.db.kept.insert_one({"_id": 1})
    probes = {"int": 1, "double": 1.0, "long": bson.Int64(1), "true": True}
    stage = {"$project": {name: {"$indexOfArray": [[1], {"$literal": value}]} for name, value in probes.items()}}
    [found] = mongo.db.kept.aggregate([stage])
    assert {name: found[name] for name in probes} == {"int": 0, "double": 0, "long": 0, "true": -1}


@pytest.mark.diverges("mongomock", "aggregate [$project {t: {$type: '$x.b'}}]: Unrecognized expression '$type'")
@pytest.mark.diverges(
    "secantusdb", "aggregate [$project {t: {$let: {vars: {d: {a: 1}}, in: {$type: '$$d.b'}}}}]: 'null'"
)
def test_type_of_a_missing_field_is_missing_through_a_variable_too(mongo):
    """``$type`` of a field a document lacks is ``"missing"``, read as a field path of the document or of a
    variable holding a document."""
    mongo.db.kept.insert_one({"_id": 1, "x": {"a": 1}})
    through = {"$let": {"vars": {"d": "$x"}, "in": {"$type": "$$d.b"}}}
    [found] = mongo.db.kept.aggregate([{"$project": {"_id": 0, "path": {"$type": "$x.b"}, "variable": through}}])
    assert found == {"path": "missing", "variable": "missing"}


@pytest.mark.diverges("mongomock", "aggregate [$project {t: {$type: {$arrayElemAt: [[], 0]}}}]: Unrecognized '$type'")
@pytest.mark.diverges(
    "secantusdb", "aggregate [$project {t: {$type: {$arrayElemAt: [[], 0]}}}]: 'object' (through a $let too)"
)
def test_type_of_an_element_past_the_end_is_missing(mongo):
    """``$arrayElemAt`` past the end of an array is missing, and so is a variable bound to it
    (``restore_in_server.py`` keeps its indexes inside the array rather than rely on it)."""
    mongo.db.kept.insert_one({"_id": 1, "a": []})
    past = {"$arrayElemAt": ["$a", 0]}
    through = {"$let": {"vars": {"e": past}, "in": {"$type": "$$e"}}}
    [found] = mongo.db.kept.aggregate([{"$project": {"_id": 0, "direct": {"$type": past}, "variable": through}}])
    assert found == {"direct": "missing", "variable": "missing"}


@pytest.mark.diverges("mongomock", "aggregate [$project {o: {$arrayToObject: [{k: 1, v: 2}]}}]: {1: 2}")
@pytest.mark.diverges("secantusdb", "aggregate [$project {o: {$arrayToObject: [{k: 1, v: 2}]}}]: {'1': 2}")
def test_an_array_to_object_refuses_a_key_that_is_no_string(mongo):
    """``$arrayToObject`` fails on a ``k`` that is no string (``map_to_array``'s ``server_unmade`` makes a map
    only of an array whose keys are strings, so that a ``down`` inside the server never fails on one)."""
    mongo.db.kept.insert_one({"_id": 1, "a": [{"k": 1, "v": 2}]})
    with pytest.raises(pymongo.errors.OperationFailure):
        list(mongo.db.kept.aggregate([{"$project": {"o": {"$arrayToObject": "$a"}}}]))


@pytest.mark.diverges("mongomock", "aggregate [$project {f: {$filter: {input: '$x', ...}}}]: no field f")
@pytest.mark.diverges(
    "secantusdb",
    "aggregate [$project {e: {$filter: {input: [{a: 1}], as: 'r', cond: {$eq: ['$$r.b', null]}}}}]: [{a: 1}]",
)
def test_a_missing_field_is_not_null_to_eq(mongo):
    """``$eq`` takes a missing field apart from null (pre_aggregation's counts: a related document without
    the field does not match a condition on null), read from the document or from a variable."""
    mongo.db.kept.insert_one({"_id": 1, "x": [{"a": 1}, {"a": 1, "b": None}]})
    kept = {"$filter": {"input": "$x", "as": "r", "cond": {"$eq": ["$$r.b", None]}}}
    [found] = mongo.db.kept.aggregate(
        [{"$project": {"_id": 0, "path": {"$eq": ["$b", None]}, "kept": {"$size": kept}}}]
    )
    assert found == {"path": False, "kept": 1}
