"""pre_aggregation's aggregates (``mongopat/migrate/operations/aggregates.py``): MongoDB's accumulators in
Python, and the same computed by a server from the expressions the in-server path sends."""

from __future__ import annotations

import datetime
import random
from typing import Any

import bson
import pytest
from bson import Decimal128, Int64, ObjectId

from mongopat.migrate.operations.aggregates import (
    aggregate_rows,
    aggregates_of,
    empty_aggregates,
    server_aggregates,
    server_computes_alike,
)

NAN = float("nan")


def one(op: str, argument: Any, values: list[Any]) -> Any:
    rows = [{"_id": i, "v": v} for i, v in enumerate(values)]
    return aggregates_of(rows, {"out": {op: argument}})["out"]


@pytest.mark.parametrize(
    ("op", "values", "expected"),
    [
        ("sum", [], 0),  # no number: 0, as $sum of nothing
        ("sum", [1, 2], 3),
        ("sum", [2**31 - 1, 1], Int64(2**31)),  # an int32 that overflows is a long
        ("sum", [Int64(1), 2], Int64(3)),  # a long among them: a long
        ("sum", [Int64(2**62), Int64(2**62)], 2.0**63),  # a long that overflows: a double
        ("sum", [1, 2.5], 3.5),
        ("sum", [True, "3", None, [1, 2], {"n": 1}, 4], 4),  # none of these is a number
        ("sum", [Decimal128("1.10"), 2], Decimal128("3.10")),  # a decimal among them: a decimal
        ("sum", [1.0, NAN], NAN),
        ("sum", [float("inf"), 1], float("inf")),
        ("avg", [], None),
        ("avg", [1, 2], 1.5),
        ("avg", [2, 2], 2.0),  # an average of integers is a double
        ("avg", [1, "x"], 1.0),
        ("min", [], None),
        ("min", [3, 2.5, "a", True], 2.5),  # the smallest number: strings and booleans are none
        ("min", [3, NAN, 1], NAN),  # NaN is the smallest number
        ("max", [3, NAN, 1], 3),
        ("max", [NAN], NAN),
        ("max", [Decimal128("2"), 1.5], Decimal128("2")),
        ("max", [2, 2.0], 2),  # the first of equal values
    ],
)
def test_each_accumulator_gives_what_mongodb_gives(op, values, expected):
    found = one(op, "v", values)
    assert bson.encode({"v": found}) == bson.encode({"v": expected})


MISSING = object()


@pytest.mark.parametrize(
    ("value", "wanted", "counted"),
    [
        (MISSING, None, False),  # a missing field is not null
        (None, None, True),
        (True, 1, False),  # true is not 1
        (1, True, False),
        (True, True, True),
        (1.0, 1, True),
        (Int64(1), 1, True),
        (Decimal128("1"), 1, True),
        (NAN, NAN, True),  # NaN equals NaN in BSON's comparison
        ("a", "a", True),
        ("a", "A", False),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}, False),  # documents compare field by field, in order
        ({"a": 1.0}, {"a": 1}, True),
        ([1, {"x": 2.0}], [1, {"x": 2}], True),
        ([1, 2], 1, False),  # an array is not its element to $eq
        (ObjectId("65a000000000000000000001"), "65a000000000000000000001", False),
        (datetime.datetime(2024, 1, 1), datetime.datetime(2024, 1, 1), True),
    ],
)
def test_a_count_condition_compares_as_eq_does(value, wanted, counted):
    row = {"_id": 1} if value is MISSING else {"_id": 1, "v": value}
    assert aggregates_of([row], {"n": {"count": {"v": wanted}}}) == {"n": int(counted)}


@pytest.mark.parametrize(
    ("row", "counted"),
    [
        ({"p": {"w": 1}}, True),
        ({"p": {"w": 1.0, "x": 2}}, True),
        ({"p": [{"w": 1}]}, False),  # never through an array, as get_path reads
        ({"p": 5}, False),
        ({"p.w": 1}, False),  # a top-level name holding a dot is not the path
        ({"p": {}}, False),
    ],
)
def test_a_count_condition_on_a_dotted_field_reads_the_nested_path(row, counted):
    assert aggregates_of([{"_id": 1, **row}], {"n": {"count": {"p.w": 1}}}) == {"n": int(counted)}


def test_related_documents_are_summed_in_id_order():
    """A sum of doubles depends on its order (2083.2 one way, 2083.2000000000003 the other): the rows are
    added in ``_id`` order, as the server's ``$sort`` gives them, whatever order they were read in."""
    rows = [{"_id": 2, "k": 1, "v": 208.32}, {"_id": 0, "k": 1, "v": 1249.92}, {"_id": 1, "k": 1, "v": 624.96}]
    [found] = aggregate_rows(rows, "k", {"s": {"sum": "v"}}).values()
    assert found == {"s": 2083.2000000000003}
    assert aggregate_rows(rows[::-1], "k", {"s": {"sum": "v"}}) == {1: found}


def test_rows_are_grouped_by_key_as_python_looks_them_up():
    rows = [{"_id": 1, "k": 1}, {"_id": 2, "k": 1.0}, {"_id": 3, "k": True}, {"_id": 4, "k": [1]}, {"_id": 5}]
    grouped = aggregate_rows(rows, "k", {"n": {"count": True}})
    assert grouped[1] == {"n": 2} and grouped[(bool, True)] == {"n": 1} and grouped[None] == {"n": 1}
    assert len(grouped) == 4
    assert empty_aggregates({"n": {"count": True}, "s": {"sum": "v"}, "a": {"avg": "v"}}) == {
        "n": 0,
        "s": 0,
        "a": None,
    }


@pytest.mark.parametrize(
    ("compute", "alike"),
    [
        ({"s": {"sum": "a.b"}, "n": {"count": {"status": "x"}}}, True),
        ({"n": {"count": {"a.b": 1}}}, True),  # read through sub-documents only, as Python reads it
        ({"n": {"count": {"a..b": 1}}}, False),
        ({"s": {"sum": "$a"}}, False),
    ],
)
def test_the_server_takes_the_aggregates_it_reads_as_python_reads_them(compute, alike):
    assert server_computes_alike(compute) is alike


# Values whose sums are exact whatever the summation (the test server does not compensate its sums of
# doubles: test_conformance.py), of every kind an aggregate meets.
VALUES = [3, 2.5, -0.0, Int64(7), Int64(2**62), 2**31 - 1, 1e308, Decimal128("1.10"), Decimal128("NaN"), NAN,
          float("inf"), None, "x", True, [1, 2], {"n": 1}, "missing"]  # fmt: skip
CONDITIONS = ["a", "b", None, 1, True, {"d": 1}, "missing"]


@pytest.mark.server_only("the server computes the aggregates")
@pytest.mark.parametrize("seed", range(3))
def test_the_server_computes_the_aggregates_python_computes(mongo, seed):
    rng = random.Random(seed)
    compute = {
        "n": {"count": True},
        "s": {"sum": "v"},
        "a": {"avg": "v"},
        "lo": {"min": "v"},
        "hi": {"max": "v"},
        "c": {"count": {"w": rng.choice(["a", 1, {"d": 1}])}},
        # A nested condition (p: a document, an array of one, a number, or missing; never null, whose
        # missing counterpart the test server reads as null: test_conformance.py).
        "cn": {"count": {"p.w": rng.choice(["a", 1])}},
    }
    groups = []
    for g in range(40):
        rows = []
        for i in range(rng.randrange(5)):
            row: dict[str, Any] = {"_id": g * 10 + i}
            for name, pool in (("v", VALUES), ("w", CONDITIONS)):
                if (value := rng.choice(pool)) != "missing":
                    row[name] = value
            nested = rng.choice(["a", 1, 1.0, "missing"])
            row["p"] = rng.choice([{"w": nested}, [{"w": nested}], 5, {}]) if nested != "missing" else {}
            rows.append(row)
        groups.append({"_id": g, "rows": rows})
    mongo.db.kept.insert_many(groups)
    found = mongo.db.kept.aggregate([{"$project": {"x": server_aggregates(compute, "$rows")}}])
    by_server = {d["_id"]: bson.encode(d["x"]) for d in found}
    assert by_server == {g["_id"]: bson.encode(aggregates_of(g["rows"], compute)) for g in groups}
