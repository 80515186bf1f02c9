"""A bucket migration on a dump folder, against the least work any file-based migration must do.

Generates sensor readings (mongoexport relaxed JSON), then in the same run, each timed best of
``--rounds``:
- baseline: parse every line and write it back (orjson), in this process;
- mongopat: ``mongopat migrate up --dump`` with one bucket step, as a separate process on a fresh copy of
  the folder (interpreter start-up, imports, argument parsing, bucketing, encoding, fsync, verification
  and bookkeeping included), with its default workers and with ``--workers 1``.
mongopat runs with Python's bytecode cache on, after one warm-up run, as an installed package does (some
sandboxes set PYTHONDONTWRITEBYTECODE, which would add compiling mongopat's modules to every run).
Prints the times and their ratios, the migration's own duration as mongopat records it (everything but
start-up), and mongopat's peak memory (PSS of its process tree, the highest of the rounds) at the small
and the large size, with their ratio.

    python3 bench/migrate_dump_bucket.py [--documents 200000] [--small 50000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import orjson
from bson import ObjectId, json_util

sys.path.insert(0, str(Path(__file__).resolve().parent))
from analyze_vs_mongodb_schema import run_measured  # noqa: E402

STEP = """id: 0001_bucket_readings
description: bucket readings
steps:
- step: bucket
  collection: readings
  series_key: sensorId
  time_field: ts
  window_seconds: 3600
  measurements: [temperature]
"""


def generate(path: Path, documents: int) -> None:
    start = datetime.datetime(2026, 1, 1)
    with path.open("w", encoding="utf-8") as handle:
        for i in range(documents):
            when = start + datetime.timedelta(seconds=i * 2)
            handle.write(json_util.dumps({"_id": ObjectId(f"{i:024x}"), "sensorId": f"sensor-{i % 50:02d}", "ts": when,
                                          "temperature": round(20 + (i % 37) * 0.1, 2)}) + "\n")  # fmt: skip


def baseline(source: Path, target: Path) -> float:
    started = time.perf_counter()
    with source.open("rb") as reader, target.open("wb") as writer:
        for line in reader:
            writer.write(orjson.dumps(orjson.loads(line)) + b"\n")
    return time.perf_counter() - started


def prepare(work: Path, documents: int) -> tuple[Path, Path]:
    data = work / f"iot_{documents}" / "iot"
    data.mkdir(parents=True)
    generate(data / "readings.json", documents)
    migrations = work / f"migrations_{documents}"
    migrations.mkdir()
    (migrations / "0001_bucket_readings.yaml").write_text(STEP)
    return data, migrations


class Runs:
    """Fresh runs of ``mongopat migrate up`` on one folder: best wall time, highest peak memory and best
    recorded duration (the migration itself, start-up excluded)."""

    def __init__(self, data: Path, migrations: Path, extra: list[str]) -> None:
        self.data, self.migrations, self.extra = data, migrations, extra
        self.pristine = data.with_name("pristine")
        if not self.pristine.exists():
            shutil.copytree(data, self.pristine)
        self.times: list[float] = []
        self.peaks: list[float] = []
        self.durations: list[float] = []

    def run(self) -> None:
        shutil.rmtree(self.data)
        shutil.copytree(self.pristine, self.data)
        command = [sys.executable, "-m", "mongopat", "-q", "migrate", "up", "--dump", str(self.data)]
        seconds, peak = run_measured([*command, "--dir", str(self.migrations), "--yes", *self.extra])
        entry = json_util.loads((self.data / "mongopat_changelog.json").read_text().splitlines()[0])
        self.times.append(seconds)
        self.peaks.append(peak)
        self.durations.append(entry["duration_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=200_000)
    parser.add_argument("--small", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mongopat-bench-"))
    try:
        small = Runs(*prepare(work, args.small), [])
        large = Runs(*prepare(work, args.documents), [])
        one = Runs(large.data, large.migrations, ["--workers", "1"])
        original = large.pristine / "readings.json"
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        small.run()  # warm-up: writes the bytecode cache; not counted
        small.times.clear(), small.peaks.clear(), small.durations.clear()
        bases = []
        for _ in range(args.rounds):  # interleaved, so that a slow spell of the machine hits every side
            bases.append(baseline(original, work / "copy.json"))
            for runs in (small, large, one):
                runs.run()
        base = min(bases)
        seconds, duration, one_seconds, one_duration = (
            min(large.times),
            min(large.durations),
            min(one.times),
            min(one.durations),
        )
        small_peak, peak, one_peak = max(small.peaks), max(large.peaks), max(one.peaks)
        data = large.data
        buckets = sum(1 for _ in (data / "readings.json").open("rb"))
        print(
            f"{args.documents:,} readings -> {buckets:,} buckets "
            f"({original.stat().st_size / 2**20:.1f} MiB of mongoexport JSON), best of {args.rounds}"
        )
        print(f"  baseline (orjson parse + write every line, in process): {base:.2f} s")
        print(f"  mongopat migrate up --dump (whole process):             {seconds:.2f} s = {seconds / base:.2f}x"
              f" (target <= 2x); the migration itself {duration:.2f} s = {duration / base:.2f}x")  # fmt: skip
        print(f"  mongopat migrate up --dump --workers 1:                 {one_seconds:.2f} s = "
              f"{one_seconds / base:.2f}x; the migration itself {one_duration:.2f} s = "
              f"{one_duration / base:.2f}x")  # fmt: skip
        print(f"  peak memory: {small_peak:.1f} MiB at {args.small:,} readings, {peak:.1f} MiB at {args.documents:,}: "
              f"{peak / small_peak:.2f}x (target <= 1.2x); {one_peak:.1f} MiB with --workers 1")  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
