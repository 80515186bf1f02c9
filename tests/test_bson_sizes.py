"""Document sizes summed by the columnar walk equal ``bson.encode``'s, byte for byte, or are left unknown
(None) so that the analysis encodes the documents; never a wrong size."""

from __future__ import annotations

import copy
import datetime
import random
import re
from typing import Any

import bson
import pytest
from bson import Binary, Code, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp
from bson.datetime_ms import DatetimeMS

from mongopat.analysis.bsonsize import array_overhead, array_sizes, layout_size, scalar_sizes
from mongopat.analysis.schema import DocumentShape, Limits, walk_documents
from mongopat.sources.extjson import to_extended


def walked_sizes(docs: list[dict[str, Any]]) -> list[int] | None:
    return walk_documents(DocumentShape("", 0, False, Limits()), copy.deepcopy(docs))


def encoded(docs: list[dict[str, Any]]) -> list[int]:
    return [len(bson.encode(doc)) for doc in docs]


def test_common_documents_are_sized_without_encoding():
    rng = random.Random(3)
    docs = [
        {
            "_id": ObjectId(),
            "n": rng.randint(0, 10),
            "big": rng.choice([5, 2**40, -(2**35)]),
            "name": rng.choice(["ascii", "café", "日本語", "emoji 🎉", ""]),
            "price": rng.random(),
            "ok": rng.random() < 0.5,
            "none": None,
            "at": datetime.datetime(2024, 1, 1) + datetime.timedelta(seconds=rng.randint(0, 10**6)),
            "tags": [rng.choice("abc") * rng.randint(0, 3) for _ in range(rng.randint(0, 120))],
            "items": [{"sku": f"S{k}", "qty": k, "long": Int64(k)} for k in range(rng.randint(0, 12))],
            "nested": {"deep": {"deeper": [[1, 2], [3], []]}},
            "dec": Decimal128("1.5"),
            "ts": Timestamp(5, 1),
            "ms": DatetimeMS(5),
            "lo": MinKey(),
            "hi": MaxKey(),
            "clé": "unicode key",
        }
        for _ in range(300)
    ]
    sizes = walked_sizes(docs)
    assert sizes is not None  # the fast path sized them all
    assert sizes == encoded(docs)


def test_mixed_and_sparse_documents():
    rng = random.Random(4)
    docs = []
    for i in range(400):
        doc: dict[str, Any] = {"_id": i, "v": rng.choice([1, "x", None, 2.5, True, Int64(3), 2**33])}
        if i % 3:
            doc["sparse"] = {"a": rng.choice([1, [1, "two", {"three": 3}], {"b": None}])}
        if i % 5 == 0:
            doc["arr"] = rng.choice([[], [[]], [{}], [1, [2, [3]]]])
        docs.append(doc)
    sizes = walked_sizes(docs)
    assert sizes is None or sizes == encoded(docs)


def test_wrappers_are_sized_as_what_they_decode_to():
    plain = [
        {"_id": ObjectId(), "at": datetime.datetime(2024, 5, 1, 12), "n": Int64(7), "d": Decimal128("2.50")}
        for _ in range(50)
    ]
    wrapped = [to_extended(doc, canonical=True) for doc in plain]
    assert walked_sizes(wrapped) == encoded(plain)


@pytest.mark.parametrize(
    "value",
    [Binary(b"\x00\x01"), Regex("a.*", "i"), Code("x = 1"), re.compile("b"), bson.DBRef("c", 1), b"raw"],
)
def test_types_it_does_not_size_are_left_to_bson_encode(value):
    docs = [{"v": value}, {"v": value}]
    assert walked_sizes(docs) in (None, encoded(docs))


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, "lone \udc80 surrogate"])
def test_values_bson_refuses_are_not_sized(value):
    with pytest.raises(Exception):  # noqa: B017 - whatever bson.encode raises, the analysis reports
        bson.encode({"v": value})
    assert walked_sizes([{"v": value}, {"v": value}]) is None


def test_keys_bson_refuses_are_not_sized():
    assert layout_size(("a\x00b",)) is None
    assert layout_size(("a", "é")) == len(bson.encode({"a": None, "é": None}))


def test_array_sizes_match_encoding_across_key_widths():
    for length in (0, 1, 9, 10, 11, 99, 100, 101, 1000, 1001):
        lists = [[1.5] * length, ["x"] * length]
        assert array_sizes([length], 8) == [len(bson.encode({"a": lists[0]})) - 8]
        sizes = scalar_sizes(lists[1], {str}) if length else 0
        assert array_sizes([length], sizes if length else 0)[0] == len(bson.encode({"a": lists[1]})) - 8


def test_array_overhead_of_long_arrays():
    for length in (4096, 4097, 10_000, 123_456):
        assert array_overhead(length) == len(bson.encode({"a": [None] * length})) - 8
    assert array_sizes([5000, 3], 1) == [len(bson.encode({"a": [True] * n})) - 8 for n in (5000, 3)]
