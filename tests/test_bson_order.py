"""mongopat.bson_order: values sorted as MongoDB compares them, across and within type brackets."""

from __future__ import annotations

import datetime
import re

import bson
import pytest

from mongopat.bson_order import bson_order

UTC = datetime.timezone.utc


@pytest.mark.parametrize(
    ("lower", "higher"),
    [
        # brackets: MinKey, null, numbers, strings, documents, arrays, binary, ObjectId, bool, dates,
        # timestamps, regular expressions, JavaScript, MaxKey
        (bson.MinKey(), None),
        (None, -5),
        (10**6, "a"),
        ("zzz", {}),
        ({"z": 1}, []),
        ([9], b""),
        (bson.Binary(b"\xff" * 8, 128), bson.ObjectId("000000000000000000000000")),
        (bson.ObjectId("ffffffffffffffffffffffff"), False),
        (True, datetime.datetime(1969, 1, 1)),
        (datetime.datetime(2999, 1, 1), bson.Timestamp(0, 0)),
        (bson.Timestamp(2**31, 5), bson.Regex("a")),
        (bson.Regex("z", "i"), bson.Code("x")),
        (bson.Code("z"), bson.MaxKey()),
        # numbers: NaN first, every type compared by value
        (float("nan"), -1e300),
        (bson.Decimal128("sNaN"), bson.Decimal128("-Infinity")),
        (bson.Decimal128("NaN"), float("-inf")),
        (bson.Decimal128("-Infinity"), -1e308),
        (1e308, float("inf")),
        (2, 2.5),
        (bson.Int64(3), bson.Decimal128("3.5")),
        (bson.Decimal128("10"), 10.25),
        (2**53, 2**53 + 1),
        (bson.Decimal128("0.1"), 0.1),  # the double nearest 0.1 is above it
        # strings: by UTF-8 bytes, which is code point order
        ("Z", "a"),
        ("a", "é"),
        ("ab", "b"),
        # ObjectId by bytes; bool
        (bson.ObjectId("000000000000000000000001"), bson.ObjectId("0000000000000000000000ff")),
        (False, True),
        # dates: naive is UTC, aware by its instant; microseconds kept
        (datetime.datetime(2020, 1, 1), datetime.datetime(2020, 1, 1, 1, tzinfo=UTC)),
        (datetime.datetime(2020, 1, 1, 1, tzinfo=UTC), datetime.datetime(2020, 1, 1, 2)),
        (
            datetime.datetime(2020, 1, 1, 3, tzinfo=datetime.timezone(datetime.timedelta(hours=5))),
            datetime.datetime(2020, 1, 1),
        ),
        (datetime.datetime(2020, 1, 1), datetime.datetime(2020, 1, 1, microsecond=1)),
        (bson.datetime_ms.DatetimeMS(-1), datetime.datetime(1970, 1, 1)),
        # documents: field by field, each field's type, then its name, then its value; shorter first
        ({}, {"a": None}),
        ({"a": 1}, {"a": 1, "b": 0}),
        ({"b": 1}, {"a": "x"}),  # a number sorts before a string, whatever the names
        ({"a": 1}, {"b": 1}),
        ({"a": 1, "z": 9}, {"a": 2}),
        ({"a": {"x": 1}}, {"a": {"x": 2}}),
        # arrays element by element
        ([], [None]),
        ([1, 2], [1, 3]),
        ([1, 2], [1, 2, 0]),
        # binary: length, then subtype, then bytes
        (b"\xff", b"\x00\x00"),
        (bson.Binary(b"ab", 0), bson.Binary(b"aa", 4)),
        (b"aa", b"ab"),
        # timestamps, regular expressions
        (bson.Timestamp(1, 9), bson.Timestamp(2, 0)),
        (bson.Regex("a", "i"), bson.Regex("b")),
        (re.compile("a"), re.compile("b")),
    ],
)
def test_values_sort_as_mongodb_compares_them(lower, higher):
    assert bson_order(lower) < bson_order(higher)
    assert not bson_order(higher) < bson_order(lower)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        (1, 1.0),
        (bson.Int64(7), bson.Decimal128("7.00")),
        (0, -0.0),
        (float("nan"), bson.Decimal128("sNaN")),
        (datetime.datetime(2020, 1, 1, 5), datetime.datetime(2020, 1, 1, 5, tzinfo=UTC)),
        (bson.datetime_ms.DatetimeMS(1000), datetime.datetime(1970, 1, 1, 0, 0, 1)),
        ({"a": 1}, {"a": 1.0}),
        (bson.ObjectId("000000000000000000000001"), bson.ObjectId("000000000000000000000001")),
    ],
)
def test_values_mongodb_holds_equal_have_one_key(one, other):
    assert bson_order(one) == bson_order(other)


def test_a_mix_of_every_type_sorts_without_error():
    values = [
        bson.MaxKey(), "s", float("nan"), {"a": [1, "x"]}, None, bson.Decimal128("sNaN"), True, 3,
        datetime.datetime(2020, 1, 1, tzinfo=UTC), datetime.datetime(2019, 1, 1), bson.MinKey(), [],
        bson.ObjectId(), b"x", bson.Timestamp(1, 1), bson.Regex("r"), bson.Code("c"), 2.5,
    ]  # fmt: skip
    ordered = sorted(values, key=bson_order)
    assert ordered[0] == bson.MinKey() and ordered[-1] == bson.MaxKey()
    assert [type(v).__name__ for v in ordered[2:6]] == ["float", "Decimal128", "float", "int"]
