"""Dump folders: mongoexport JSON (lines and arrays, relaxed and canonical), mongodump BSON, errors."""

import datetime
import gzip
import json

import bson
import pytest
from bson import Decimal128, Int64, ObjectId

from mongopat.command import analyze
from mongopat.errors import InputError, SourceError
from mongopat.sources import DumpSource, SourceSpec
from tests.support.dumps import write_bson_dump, write_export

DOCS = [
    {
        "_id": ObjectId("5f1e2d3c4b5a697887766554"),
        "n": Int64(2**40),
        "price": Decimal128("9.99"),
        "at": datetime.datetime(2024, 5, 1, 12, 30),
        "tags": ["a", "b"],
        "nested": {"x": 1.5},
    },
    {"_id": ObjectId("5f1e2d3c4b5a697887766555"), "n": 3, "at": datetime.datetime(2024, 5, 2)},
]


def read_all(folder, name="things", **kwargs):
    source = DumpSource(folder)
    stream = source.documents(name, None, **kwargs)
    return [doc for doc, _size in stream], stream


@pytest.mark.parametrize("canonical", [False, True])
def test_mongoexport_lines_decode_to_bson_types(tmp_path, canonical):
    write_export(tmp_path, "things", DOCS, canonical=canonical)
    docs, stream = read_all(tmp_path)
    assert docs == DOCS
    assert stream.sampling.complete and stream.sampling.documents == 2


def test_mongoexport_json_array(tmp_path):
    body = ",\n".join(bson.json_util.dumps(d) for d in DOCS * 3)
    (tmp_path / "things.json").write_text(f"[\n{body}\n]\n")
    docs, _ = read_all(tmp_path)
    assert docs == DOCS * 3


def test_json_array_split_across_read_chunks(tmp_path, monkeypatch):
    import mongopat.sources.dump as dump

    monkeypatch.setattr(dump, "_ARRAY_CHUNK", 7)
    body = ",".join(bson.json_util.dumps(d) for d in DOCS)
    (tmp_path / "things.json").write_text(f"[{body}]")
    docs, _ = read_all(tmp_path)
    assert docs == DOCS


def test_mongodump_bson_with_metadata_indexes(tmp_path):
    write_bson_dump(
        tmp_path,
        "things",
        DOCS,
        indexes=[
            {"key": {"_id": 1}, "name": "_id_"},
            {"key": {"at": -1}, "name": "at_-1", "expireAfterSeconds": 60},
        ],
    )
    docs, _ = read_all(tmp_path)
    assert docs == DOCS
    indexes, _notes = DumpSource(tmp_path).indexes("things")
    assert [(i.name, i.key, i.ttl_seconds) for i in indexes] == [
        ("_id_", [("_id", 1)], None),
        ("at_-1", [("at", -1)], 60),
    ]


def test_gzip_files_are_read(tmp_path):
    with gzip.open(tmp_path / "things.bson.gz", "wb") as handle:
        for document in DOCS:
            handle.write(bson.encode(document))
    docs, _ = read_all(tmp_path)
    assert docs == DOCS


def test_sizes_are_bson_sizes(tmp_path):
    write_export(tmp_path, "things", DOCS)
    source = DumpSource(tmp_path)
    sizes = [size for _doc, size in source.documents("things", None)]
    assert sizes == [len(bson.encode(d)) for d in DOCS]


def test_mongodump_layout_with_database_subfolder(tmp_path):
    write_bson_dump(tmp_path / "shop", "orders", DOCS)
    source = DumpSource(tmp_path)
    assert source.database == "shop" and source.collections() == ["orders"]
    write_bson_dump(tmp_path / "crm", "deals", DOCS)
    with pytest.raises(SourceError, match="several databases"):
        DumpSource(tmp_path)
    assert DumpSource(tmp_path, "crm").collections() == ["deals"]


def test_system_collections_and_metadata_are_not_collections(tmp_path):
    write_bson_dump(tmp_path, "orders", DOCS, indexes=[])
    write_bson_dump(tmp_path, "system.views", [{"_id": "v"}])
    assert DumpSource(tmp_path).collections() == ["orders"]


def test_malformed_line_names_file_and_line(tmp_path):
    (tmp_path / "things.json").write_text('{"a": 1}\n{"a": 2}\n{"a": \n')
    with pytest.raises(InputError, match=r"things.json:3: not a valid Extended JSON document"):
        analyze(SourceSpec(dump=str(tmp_path)))


def test_bad_extended_json_value_names_the_line(tmp_path):
    (tmp_path / "things.json").write_text('{"_id": {"$oid": "nothex"}}\n')
    with pytest.raises(InputError, match=r"things.json:1: .*\$oid"):
        read_all(tmp_path)


def test_non_object_line(tmp_path):
    (tmp_path / "things.json").write_text("[1, 2]\n")
    with pytest.raises(InputError):
        read_all(tmp_path)


def test_truncated_bson_file(tmp_path):
    path = write_bson_dump(tmp_path, "things", DOCS)
    path.write_bytes(path.read_bytes()[:-5])
    with pytest.raises(InputError, match="truncated BSON document at byte"):
        read_all(tmp_path)


def test_garbage_bson_length(tmp_path):
    (tmp_path / "things.bson").write_bytes(b"\xff\xff\xff\x7f" + b"\x00" * 10)
    with pytest.raises(InputError, match="invalid BSON document length"):
        read_all(tmp_path)


def test_unclosed_json_array(tmp_path):
    (tmp_path / "things.json").write_text('[{"a": 1}, {"a": 2}')
    with pytest.raises(InputError, match="not closed|not a valid"):
        read_all(tmp_path)


def test_missing_folder_and_file_instead_of_folder(tmp_path):
    with pytest.raises(SourceError, match="not found"):
        DumpSource(tmp_path / "nope")
    (tmp_path / "f.json").write_text("{}")
    with pytest.raises(SourceError, match="expects a folder"):
        DumpSource(tmp_path / "f.json")


def test_empty_folder(tmp_path):
    with pytest.raises(SourceError, match="no collection files"):
        DumpSource(tmp_path)


def test_unknown_collection_lists_the_known_ones(tmp_path):
    write_export(tmp_path, "orders", DOCS)
    with pytest.raises(InputError, match="not found") as info:
        analyze(SourceSpec(dump=str(tmp_path)), ["order"])
    assert "orders" in info.value.hint


def test_empty_collection_file_is_reported_not_fatal(tmp_path):
    (tmp_path / "empty.json").write_text("")
    report = analyze(SourceSpec(dump=str(tmp_path)))
    collection = report["collections"][0]
    assert collection["count"] == 0 and collection["fields"] == []
    assert any("empty" in note for note in collection["notes"])


def test_reservoir_sample_is_uniform_and_reproducible(tmp_path):
    write_export(tmp_path, "things", [{"_id": i} for i in range(1000)])
    first = [d["_id"] for d, _ in DumpSource(tmp_path, seed=3).documents("things", 100)]
    second = [d["_id"] for d, _ in DumpSource(tmp_path, seed=3).documents("things", 100)]
    assert first == second and len(first) == 100 and len(set(first)) == 100
    assert max(first) > 500  # not just the head of the file
    report = analyze(SourceSpec(dump=str(tmp_path)), options=None)
    assert report["collections"][0]["count"] == 1000


def test_sampled_dump_reports_exact_count_and_method(tmp_path):
    from mongopat.analysis.collection import AnalyzeOptions

    write_export(tmp_path, "things", [{"_id": i} for i in range(300)])
    report = analyze(SourceSpec(dump=str(tmp_path)), options=AnalyzeOptions(sample_size=50))
    collection = report["collections"][0]
    assert collection["count"] == 300 and collection["count_exact"]
    assert collection["sampling"]["method"] == "file-reservoir" and collection["sampling"]["documents"] == 50
    json.dumps(report)  # the report is plain JSON
