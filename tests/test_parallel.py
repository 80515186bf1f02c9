"""Reading one dump file with several worker processes gives the same report as one process."""

import datetime

import pytest
from bson import ObjectId

import mongopat.sources.dump as dump
from mongopat.analysis.collection import AnalyzeOptions
from mongopat.command import analyze
from mongopat.errors import InputError
from mongopat.sources import DumpSource, SourceSpec
from tests.conftest import write_bson_dump, write_export


def documents(n):
    start = 1_700_000_000
    out = []
    for i in range(n):
        doc = {
            "_id": ObjectId((start + i * 7).to_bytes(4, "big") + i.to_bytes(8, "big")),
            "kind": ["a", "b", "c"][i % 3],
            "at": datetime.datetime(2024, 1, 1) + datetime.timedelta(seconds=i * 7),
            "items": [{"p": j * 1.5, "q": j} for j in range(i % 9)],
        }
        if i > n // 2:
            doc["added"] = True  # drift in the second half
        out.append(doc)
    return out


def comparable(report):
    collection = report["collections"][0]
    collection.pop("sampling")
    return collection


@pytest.mark.parametrize("writer", [write_export, write_bson_dump])
def test_workers_give_the_same_report(tmp_path, monkeypatch, writer):
    monkeypatch.setattr(dump, "MIN_PARALLEL_BYTES", 0)
    writer(tmp_path, "things", documents(3000))
    one = analyze(SourceSpec(dump=str(tmp_path)), options=AnalyzeOptions(workers=1))
    three = analyze(SourceSpec(dump=str(tmp_path)), options=AnalyzeOptions(workers=3))
    assert "3 processes" in three["collections"][0]["sampling"]["note"]
    assert comparable(one) == comparable(three)


def test_partitions_cover_the_file_exactly(tmp_path, monkeypatch):
    monkeypatch.setattr(dump, "MIN_PARALLEL_BYTES", 0)
    write_export(tmp_path, "things", documents(500))
    source = DumpSource(tmp_path)
    parts = source.partitions("things", 4)
    assert len(parts) == 4 and parts[0].start == 0
    assert all(a.end == b.start for a, b in zip(parts, parts[1:], strict=False))
    ids = [d["_id"] for part in parts for d, _ in source.documents("things", None, part=part)]
    assert ids == [d["_id"] for d in documents(500)]


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("{broken", r"things.json:350: not a valid Extended JSON document"),
        ('{"_id": {"$oid": "not hex"}, "kind": "a"}', r"things.json:350: not a valid Extended JSON document: .*\$oid"),
        # 24 characters, 11 bytes of hex between spaces: not an ObjectId, though bytes.fromhex reads it.
        (
            '{"_id": {"$oid": "0123456789 abcdef012345 "}}',
            r"things.json:350: not a valid Extended JSON document: .*\$oid",
        ),
    ],
)
def test_error_line_numbers_are_right_in_later_parts(tmp_path, monkeypatch, workers, bad, message):
    monkeypatch.setattr(dump, "MIN_PARALLEL_BYTES", 0)
    path = write_export(tmp_path, "things", documents(400))
    lines = path.read_text().splitlines()
    lines[349] = bad
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=message):
        analyze(SourceSpec(dump=str(tmp_path)), options=AnalyzeOptions(workers=workers))


def test_small_and_compressed_files_are_not_split(tmp_path):
    write_export(tmp_path, "things", documents(10))
    assert DumpSource(tmp_path).partitions("things", 2) is None


def test_blank_lines_and_a_byte_order_mark_are_read_past(tmp_path, monkeypatch):
    monkeypatch.setattr(dump, "MIN_PARALLEL_BYTES", 0)
    path = write_export(tmp_path, "things", documents(400))
    lines = path.read_text().splitlines()
    path.write_text("\ufeff" + "\n\n".join(lines[:200]) + "\n \n" + "\n".join(lines[200:]) + "\n")
    for workers in (1, 2):
        report = analyze(SourceSpec(dump=str(tmp_path)), options=AnalyzeOptions(workers=workers))
        assert report["collections"][0]["count"] == 400
