"""The bucket step on mongoexport files: chunk grouping, merging in file order, worker processes, and the
parallel tally that verification uses. No database: these are files and pure functions."""

from __future__ import annotations

import datetime
import io
import random
from pathlib import Path

import orjson
import pytest
from bson import ObjectId, json_util

import mongopat.migrate.dump_folder.bucket_lines as dump_buckets
from mongopat.errors import InputError
from mongopat.migrate.dump_folder.bucket_lines import (
    BucketSpec,
    bucket_file,
    epoch_of,
    group_chunk,
    tally_buckets,
)
from mongopat.migrate.operations.bucket import BucketBuilder
from mongopat.migrate.steps import build_step
from mongopat.sources.extjson import decode_document

START = datetime.datetime(2026, 1, 1)


def spec_of(width: int = 3600, capacity: int = 1000, measurements: tuple[str, ...] = ("t",)) -> BucketSpec:
    return BucketSpec("sensor", "ts", width, capacity, measurements)


def step_of(spec: BucketSpec):
    return build_step(
        {
            "step": "bucket",
            "collection": "readings",
            "series_key": spec.series_key,
            "time_field": spec.time_field,
            "window_seconds": spec.width,
            "max_bucket_size": spec.capacity,
            "measurements": list(spec.measurements),
        }
    )


def reading_lines(rng: random.Random, count: int, odd: bool) -> list[bytes]:
    """Relaxed Extended JSON lines of readings, shuffled a little; ``odd`` mixes in what real exports
    sometimes hold: no series, a null or document or number series, no time, a time that is not a date,
    canonical and offset dates, milliseconds, blank lines, measurements of every type."""
    lines = []
    for i in range(count):
        when = START + datetime.timedelta(seconds=i * 7 + rng.choice([0, 0, 0, -400, 900]))
        doc: dict = {"_id": ObjectId(f"{i:024x}"), "sensor": f"s{rng.randrange(6)}", "ts": when}
        doc["t"] = rng.choice([20, 21.5, -3, 1e3, 7])
        if odd:
            kind = rng.randrange(14)
            if kind == 0:
                del doc["sensor"]
            elif kind == 1:
                doc["sensor"] = None
            elif kind == 2:
                doc["sensor"] = {"site": rng.choice("ab"), "n": 1}
            elif kind == 3:
                doc["sensor"] = rng.randrange(3)
            elif kind == 4:
                del doc["ts"]
            elif kind == 5:
                doc["ts"] = "yesterday"
            elif kind == 6:
                doc["t"] = rng.choice(["hot", True, None, [1]])
            elif kind == 7:
                del doc["t"]
            elif kind == 8:
                doc["ts"] = when + datetime.timedelta(milliseconds=rng.randrange(1, 1000))
        text = json_util.dumps(doc)
        if odd and rng.random() < 0.05 and isinstance(doc.get("ts"), datetime.datetime):
            # The same instant written with an offset, or canonically.
            millis = round((doc["ts"] - datetime.datetime(1970, 1, 1)).total_seconds() * 1000)
            shifted = (doc["ts"] + datetime.timedelta(hours=2)).isoformat(timespec="milliseconds") + "+02:00"
            replacement = rng.choice([{"$date": shifted}, {"$date": {"$numberLong": str(millis)}}])
            text = orjson.dumps({**orjson.loads(text), "ts": replacement}).decode()
        lines.append(text.encode() + b"\n")
        if odd and rng.random() < 0.01:
            lines.append(b"   \n")
    return lines


def buckets_of(path: Path, spec: BucketSpec, workers: int = 1) -> tuple[bytes, dump_buckets.BucketMerger]:
    out = io.BytesIO()
    merger = bucket_file(path, spec, out.write, workers=workers)
    return out.getvalue(), merger


def reference(lines: list[bytes], spec: BucketSpec) -> tuple[dict[str, dict], list[dict]]:
    """Buckets (by id) and passthrough documents of the decoded path (the pure BucketBuilder)."""
    builder = BucketBuilder(step_of(spec))
    buckets: dict[str, dict] = {}
    for line in lines:
        if line.strip():
            bucket = builder.add(decode_document(line))
            if bucket is not None:
                buckets[repr(bucket["_id"])] = bucket
    for full in builder.completed:
        buckets[repr(full["_id"])] = full
    return buckets, builder.rejected


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("odd", [False, True])
def test_buckets_equal_those_of_the_decoded_path(tmp_path, seed, odd):
    rng = random.Random(seed)
    spec = spec_of(width=rng.choice([60, 90, 600, 3600]), capacity=rng.choice([3, 10, 1000]))
    lines = reading_lines(rng, 2500, odd)
    path = tmp_path / "readings.json"
    path.write_bytes(b"\xef\xbb\xbf" + b"".join(lines) if seed % 2 else b"".join(lines))
    output, merger = buckets_of(path, spec)
    documents = [decode_document(line) for line in output.splitlines()]
    found = {repr(d["_id"]): d for d in documents if "readings" in d}
    passthrough = [d for d in documents if "readings" not in d]
    expected, rejected = reference(lines, spec)
    assert found.keys() == expected.keys()
    for key, bucket in expected.items():
        assert found[key] == bucket, key
    assert passthrough == rejected
    assert merger.read == sum(1 for line in lines if line.strip())
    assert merger.written == len(documents)


def test_plain_and_careful_grouping_agree():
    """The vectorised path and the line-by-line one give the same groups on the chunks both can take."""
    rng = random.Random(3)
    lines = reading_lines(rng, 1000, odd=False)
    for width in (60, 90, 3600):
        spec = spec_of(width=width)
        plain = group_chunk(lines, 1, spec, "f")
        careful = dump_buckets._group_careful(lines, 1, spec, "f")
        assert [vars(g) for g in plain.groups] == [vars(g) for g in careful.groups]
        assert plain.records == careful.records == 1000


def test_workers_write_the_same_bytes(tmp_path, monkeypatch):
    """Chunks are cut at fixed line numbers and merged in file order: one process or three, the same file.
    Late readings (windows already closed) reopen their key at the next sequence number either way."""
    monkeypatch.setattr(dump_buckets, "MIN_PARALLEL_BYTES", 0)
    monkeypatch.setattr(dump_buckets, "CHUNK_LINES", 100)
    monkeypatch.setattr(dump_buckets, "CLOSE_EVERY_LINES", 1000)
    rng = random.Random(7)
    lines = reading_lines(rng, 12_000, odd=True)
    rng.shuffle(lines[5000:5600])  # a stretch far out of order
    path = tmp_path / "readings.json"
    path.write_bytes(b"".join(lines))
    spec = spec_of(width=600, capacity=25)
    one, merged = buckets_of(path, spec, workers=1)
    assert buckets_of(path, spec, workers=2)[0] == one
    assert buckets_of(path, spec, workers=3)[0] == one
    documents = [orjson.loads(line) for line in one.splitlines()]
    buckets = [d for d in documents if "readings" in d]
    assert sum(b["count"] for b in buckets) + merged.passthrough == merged.read
    assert all(b["count"] == len(b["readings"]) <= 25 for b in buckets)
    assert len({orjson.dumps(b["_id"]) for b in buckets}) == len(buckets)  # sequences, never the same id


def test_a_bad_line_in_a_worker_part_is_reported_with_its_line(tmp_path, monkeypatch):
    monkeypatch.setattr(dump_buckets, "MIN_PARALLEL_BYTES", 0)
    lines = reading_lines(random.Random(1), 6000, odd=False)
    lines[5321] = b'{"_id": 1, "sensor": "s1", "ts": {"$date": "2026-01-01T00:00:00Z"}, "t": \n'
    path = tmp_path / "readings.json"
    path.write_bytes(b"".join(lines))
    for workers in (1, 2):
        with pytest.raises(InputError, match=r"readings\.json:5322: not a valid Extended JSON document"):
            buckets_of(path, spec_of(), workers)
    lines[5321] = b'{"_id": 1, "sensor": "s1", "ts": {"$date": "soon"}, "t": 1}\n'
    path.write_bytes(b"".join(lines))
    with pytest.raises(InputError, match=r"readings\.json:5322: .*\$date"):
        buckets_of(path, spec_of(), 2)


def test_epoch_of_reads_every_date_form():
    second = (datetime.datetime(2026, 1, 1, 0, 0, 2) - datetime.datetime(1970, 1, 1)).total_seconds()
    assert epoch_of({"$date": "2026-01-01T00:00:02Z"}) == second
    assert epoch_of({"$date": "2026-01-01T00:00:02.500Z"}) == second + 0.5
    assert epoch_of({"$date": "2026-01-01T01:00:02+01:00"}) == second
    assert epoch_of({"$date": "2026-01-01T00:00:02"}) == second
    assert epoch_of({"$date": {"$numberLong": str(int(second * 1000))}}) == second
    assert epoch_of({"$date": int(second * 1000)}) == second
    for not_a_date in ("2026-01-01", 5, None, {"a": 1}, {"$date": "x", "other": 1}):
        assert epoch_of(not_a_date) is None
    with pytest.raises(ValueError):
        epoch_of({"$date": "tomorrow"})


def test_tally_in_parts_counts_what_one_process_counts(tmp_path, monkeypatch):
    monkeypatch.setattr(dump_buckets, "MIN_PARALLEL_BYTES", 0)
    lines = [orjson.dumps({"_id": i, "count": i % 5, "readings": [0] * (i % 5)}) + b"\n" for i in range(4000)]
    lines[100] = b"not json\n"
    lines[3000] = b'{"count": {"$numberInt": "7"}, "readings": []}\n'  # canonical Extended JSON counts too
    lines.insert(50, b"\n")
    lines.append(b'{"_id": "other", "count": 3}\n')  # no readings: not a bucket
    path = tmp_path / "buckets.json"
    path.write_bytes(b"".join(lines))
    one = tally_buckets(path, 1)
    assert one == tally_buckets(path, 3)
    assert one.documents == 4001 and one.malformed == 1 and one.miscounted == 1
    assert one.readings == sum(i % 5 for i in range(4000)) - (100 % 5) - (3000 % 5) + 7


def test_windows_left_behind_are_closed_and_late_readings_open_the_next_sequence():
    """Memory holds the open windows only; a reading for a window already written goes to a new bucket
    of that window (the next ``_id.n``), never into the written one."""
    spec = spec_of(width=60)
    written: list[bytes] = []
    merger = dump_buckets.BucketMerger(spec, written.append)
    most_open = 0
    for first in range(1, 30_001, 1000):
        lines = [
            json_util.dumps({"_id": i, "sensor": f"s{i % 5}", "ts": START + datetime.timedelta(seconds=i)}).encode()
            for i in range(first, first + 1000)
        ]
        merger.add(group_chunk(lines, first, spec, "f"))
        most_open = max(most_open, len(merger.open))
    assert most_open <= 5 * (10_000 // 60 + 3)  # windows of the last 10,000 lines at most, not all 500
    late = json_util.dumps({"_id": "late", "sensor": "s1", "ts": START + datetime.timedelta(seconds=61)}).encode()
    merger.add(group_chunk([late], 30_001, spec, "f"))
    merger.close(None)
    minute_one = [orjson.loads(b) for b in written if orjson.loads(b)["start"] == {"$date": "2026-01-01T00:01:00.000Z"}]
    s1 = sorted((b["_id"]["n"], b["count"]) for b in minute_one if b["sensor"] == "s1")
    assert s1 == [(0, 12), (1, 1)]
