"""Reading one dump file with several worker processes gives the same report as one process."""

import datetime
import multiprocessing
import time

import pytest
from bson import ObjectId

import mongopat.sources.dump as dump
import mongopat.sources.shared_parts as shared_parts
from mongopat.analysis.collection import AnalyzeOptions
from mongopat.command import analyze
from mongopat.errors import InputError
from mongopat.sources import DumpSource, SourceSpec
from tests.support.dumps import write_bson_dump, write_export


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


def _small_shares(monkeypatch):
    """Parts, chunks and steals small enough for a file of a few hundred documents."""
    monkeypatch.setattr(dump, "MIN_PARALLEL_BYTES", 0)
    monkeypatch.setattr(dump, "_LINES_CHUNK", 2048)
    monkeypatch.setattr(shared_parts, "MIN_STEAL_BYTES", 4096)


def test_a_stolen_half_is_read_once_and_the_owner_stops_where_it_starts(tmp_path, monkeypatch):
    _small_shares(monkeypatch)
    path = write_export(tmp_path, "things", documents(600))
    source = DumpSource(tmp_path)
    parts = source.partitions("things", 2)
    with source.share_parts("things", parts, multiprocessing.get_context("fork")) as shared:
        first, second = shared.parts
        owner = dump._read_json_batches(path, first)
        read = list(next(owner)[0])  # the owner of part 0 has read its first chunk, part 1 is read to its end
        later = [d for batch, _ in dump._read_json_batches(path, second) for d in batch]
        stolen = shared.steal(1)  # the second half of what part 0 has left
        assert stolen is not None and first.start < stolen.start < stolen.end == first.end
        with path.open("rb") as handle:
            handle.seek(stolen.start - 1)
            assert handle.read(1) == b"\n"  # a cut at a line start
        read += [d for batch, _ in owner for d in batch]
        taken = [d for batch, _ in dump._read_json_batches(path, stolen) for d in batch]
    ids = [d["_id"]["$oid"] for d in read + taken + later]
    assert ids == [str(d["_id"]) for d in documents(600)]


@pytest.mark.parametrize(("slow", "workers"), [(0, 2), (1, 2), (1, 3)])
def test_a_process_done_first_takes_work_from_the_slower_one_and_the_report_is_the_same(
    tmp_path, monkeypatch, slow, workers
):
    """Part ``slow`` reads slowly (this process's part, or a worker's): the others, done first, steal
    halves of what it has left. Every document is read once, in file order once merged."""
    _small_shares(monkeypatch)
    write_export(tmp_path, "things", documents(3000))
    one = analyze(SourceSpec(dump=str(tmp_path)), options=AnalyzeOptions(workers=1))
    claim, steal = shared_parts.SharedParts.claim, shared_parts.SharedParts.steal
    marks = tmp_path / "steals"

    def slow_claim(self, index, size):
        if index == slow:
            time.sleep(0.01)
        return claim(self, index, size)

    def logged_steal(self, thief):
        stolen = steal(self, thief)
        if stolen is not None:  # written from either process
            with marks.open("a") as handle:
                handle.write(f"{thief}\n")
        return stolen

    monkeypatch.setattr(shared_parts.SharedParts, "claim", slow_claim)
    monkeypatch.setattr(shared_parts.SharedParts, "steal", logged_steal)
    many = analyze(SourceSpec(dump=str(tmp_path)), options=AnalyzeOptions(workers=workers))
    assert comparable(one) == comparable(many)
    thieves = set(marks.read_text().split())
    assert thieves and str(slow) not in thieves


def test_an_error_in_a_stolen_half_names_its_line(tmp_path, monkeypatch):
    _small_shares(monkeypatch)
    path = write_export(tmp_path, "things", documents(3000))
    lines = path.read_text().splitlines()
    lines[2900] = "{broken"  # near the end of the worker's part, which the first process steals
    path.write_text("\n".join(lines) + "\n")
    claim = shared_parts.SharedParts.claim

    def slow_claim(self, index, size):
        if index == 1:
            time.sleep(0.01)
        return claim(self, index, size)

    monkeypatch.setattr(shared_parts.SharedParts, "claim", slow_claim)
    with pytest.raises(InputError, match=r"things.json:2901: not a valid Extended JSON document"):
        analyze(SourceSpec(dump=str(tmp_path)), options=AnalyzeOptions(workers=2))


def test_bson_files_keep_their_fixed_parts(tmp_path, monkeypatch):
    """A BSON file has no mark to find a document boundary from the middle: its parts are not shared."""
    monkeypatch.setattr(dump, "MIN_PARALLEL_BYTES", 0)
    write_bson_dump(tmp_path, "things", documents(500))
    source = DumpSource(tmp_path)
    parts = source.partitions("things", 2)
    assert len(parts) == 2 and source.share_parts("things", parts, multiprocessing.get_context("fork")) is None
