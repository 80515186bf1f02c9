"""The dump folder's document hot paths, each held to the slow path it replaced: ``copy_document`` (the copy
of a document before a transform changes it, equal to ``copy.deepcopy`` and sharing nothing a transform
could change), ``encode_document``'s one-pass line (and ``encode_lines``'s batch of them), ``decode_document``'s walk that
stops once a line's ``"$`` marks are spent, and a batch's pending documents and figures answered at once."""

from __future__ import annotations

import copy
import datetime
import re

import pytest
from bson import Binary, Code, DBRef, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp

from mongopat.migrate.operations import OPERATIONS
from mongopat.migrate.steps import build_step
from mongopat.migrate.transform_api import copy_document, get_path

DOCUMENT = {
    "_id": ObjectId(),
    "n": 1, "f": 1.5, "big": Int64(2**40), "d": Decimal128("1.10"), "ok": True, "none": None, "s": "x",
    "at": datetime.datetime(2026, 1, 1), "ts": Timestamp(1, 2), "bin": Binary(b"\x00\x01", 4), "raw": b"ab",
    "re": Regex("^a", "i"), "compiled": re.compile("b"), "code": Code("x"), "ref": DBRef("c", 1),
    "min": MinKey(), "max": MaxKey(),
    "items": [{"p": 1, "tags": ["a", "b"]}, [1, [2, {"deep": {"er": [3]}}]]],
    "nested": {"a": {"b": {"c": [1, 2]}}},
}  # fmt: skip


def test_the_copy_equals_deepcopy_and_shares_no_container():
    copied = copy_document(DOCUMENT)
    assert copied == copy.deepcopy(DOCUMENT) == DOCUMENT
    copied["items"][0]["tags"].append("c")
    copied["items"][1][1][1]["deep"]["er"].append(4)
    copied["nested"]["a"]["b"]["c"].pop()
    copied["re"].flags = 0
    assert DOCUMENT["items"][0]["tags"] == ["a", "b"] and DOCUMENT["items"][1][1][1]["deep"]["er"] == [3]
    assert DOCUMENT["nested"]["a"]["b"]["c"] == [1, 2] and DOCUMENT["re"].flags != 0


def test_values_keep_their_types():
    copied = copy_document(DOCUMENT)
    assert {key: type(value) for key, value in copied.items()} == {key: type(v) for key, v in DOCUMENT.items()}


def test_a_line_is_written_byte_for_byte_as_the_walk_writes_it():
    """encode_document's one-pass orjson line equals the walk's (to_extended, then orjson) for every BSON
    type, NaN and infinity included (those lines take the walk)."""
    import orjson

    from mongopat.sources.extjson import encode_document, to_extended

    for document in (
        {key: value for key, value in DOCUMENT.items() if key != "compiled"},
        {"nan": float("nan"), "inf": float("-inf"), "text": "null", "none": None},
        {"at": datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc), "old": datetime.datetime(1900, 1, 1)},
    ):
        assert encode_document(document) == orjson.dumps(to_extended(document))


@pytest.mark.parametrize("canonical", [False, True], ids=["relaxed", "canonical"])
def test_lines_written_together_are_the_lines_written_one_by_one(canonical):
    """encode_lines (a batch of side documents in one loop) writes what encode_document writes for each, a
    newline after each: with BSON types, with a batch holding a NaN or a null (written one at a time), and
    none."""
    from mongopat.sources.extjson import encode_document, encode_lines

    plain = {key: value for key, value in DOCUMENT.items() if key != "compiled"}
    batches = [
        [plain, {"_id": 2, "a": [1.5, "x"]}],
        [{"_id": 1}, {"_id": 2, "nan": float("nan")}, {"_id": 3, "none": None}],
        [],
    ]
    for documents in batches:
        assert encode_lines(documents, canonical) == b"".join(encode_document(d, canonical) + b"\n" for d in documents)


@pytest.mark.parametrize(
    "line",
    [
        b'{"_id":{"$oid":"5f0c6b7e2f8fb814b56fa181"},"a":{"b":[{"c":1}]},"at":{"$date":"2026-01-01T00:00:00Z"}}',
        b'{"_id":1,"price":"$5","at":{"$date":{"$numberLong":"1700000000000"}},"n":{"$numberLong":"7"}}',
        b'{"_id":1,"odd":{"$weird":1,"x":2},"later":{"$oid":"5f0c6b7e2f8fb814b56fa181"}}',
        b'{"_id":1,"esc":{"\\u0024oid":"5f0c6b7e2f8fb814b56fa181"}}',
        b'{"_id":1,"plain":{"a":[1,2,{"b":"c"}]}}',
        b'{"_id": {"$oid": "5f0c6b7e2f8fb814b56fa181"}, "deep": {"a": {"b": {"$date": "2026-01-01T00:00:00Z"}}}}',
        b'{"_id":1,"list":[{"$numberDecimal":"1.5"},{"$binary":{"base64":"AA==","subType":"00"}}],"s":"\\"$x"}',
    ],
)
def test_a_line_decodes_as_the_whole_walk_decodes_it(line):
    """decode_document stops walking once the line's ``"$`` marks are spent; the result is the whole walk's."""
    from mongopat.sources.extjson import decode_document, decode_value, loads

    expected = decode_value(loads(line))
    found = decode_document(line)
    assert found == expected and list(found) == list(expected)
    assert {k: type(v) for k, v in found.items()} == {k: type(v) for k, v in expected.items()}
    assert decode_document(line.decode()) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"$oid": "5f0c6b7e2f8fb814b56fa181"}, True),
        ({"$oid": "5F0C6B7E2F8FB814B56FA181"}, True),
        ({"$oid": "5f0c6b7e2f8fb814b56fa18"}, False),  # 23 digits
        ({"$oid": "5f0c6b7e2f8fb814b56fa18g"}, False),  # not hex
        ({"$oid": "5f0c6b7e2f8fb814b56fa1 8"}, False),  # whitespace, which fromhex would skip
        ({"$oid": "5f0c6b7e2f8fb814b56fa181", "x": 1}, False),
        ({"$oid": 5}, False),
        ("5f0c6b7e2f8fb814b56fa181", False),
    ],
)
def test_an_object_id_wrapper_is_recognised_as_the_decoder_takes_it(value, expected):
    """is_object_id (an ``_id`` a step only copies passes through as spelled) says yes exactly where
    decode_wrapper makes an ObjectId of the wrapper."""
    from mongopat.sources.extjson import ExtendedJSONError, decode_wrapper, is_object_id

    assert is_object_id(value) is expected
    if isinstance(value, dict):
        try:
            decoded = decode_wrapper(dict(value))
        except ExtendedJSONError:
            decoded = None
        assert isinstance(decoded, ObjectId) is expected


# Documents a batch may hold for subset and outlier: a list to take, one taken already (its count there),
# other types where the list goes, nothing there, and the same under a sub-document.
BATCH = [
    {"_id": 1, "items": [1, {"a": 2}, 3]},
    {"_id": 2, "items": [], "itemsCount": 0},
    {"_id": 3, "items": "not a list"},
    {"_id": 4},
    {"_id": 5, "items": [{"a": 1}], "itemsCount": None},
    {"_id": 6, "items": None},
    {"_id": 7, "sub": {"items": [1, 2]}},
    {"_id": 8, "sub": {"items": [1], "itemsCount": 1}},
    {"_id": 9, "sub": "x", "items": [[1], [2]]},
]


@pytest.mark.parametrize(
    "spec",
    [
        {"step": "subset", "field": "items", "keep": 1, "full_collection": "full"},
        {"step": "subset", "field": "sub.items", "keep": 1, "full_collection": "full"},
        {"step": "subset", "field": "items", "keep": 2, "sort": {"a": -1}, "full_collection": "full"},
        {"step": "outlier", "field": "items", "threshold": 2, "overflow_collection": "more"},
    ],
    ids=["subset", "subset-nested", "subset-sorted", "outlier"],
)
def test_a_batchs_pending_documents_and_figures_are_those_of_each_document(spec):
    """``pending_of`` and ``file_stats`` answer for a batch at once: the same as ``is_pending`` of each
    document, and the elements a dump-folder run counts are those of the documents the step takes
    (subset) or of every list (outlier, whose verification counts those kept and moved)."""
    step = build_step({"collection": "c", **spec})
    operation = OPERATIONS[step.name]
    assert operation.pending_of(BATCH, step) == [operation.is_pending(doc, step) for doc in BATCH]
    taken = BATCH if step.name == "outlier" else [doc for doc in BATCH if operation.is_pending(doc, step)]
    lists = [get_path(doc, step.params["field"]) for doc in taken]
    assert operation.file_stats(BATCH, step) == {"elements": sum(len(x) for x in lists if isinstance(x, list))}
    assert operation.file_stats([], step) == {"elements": 0}
