"""A bucket migration on a dump folder, against the least work any file-based migration must do.

Generates sensor readings (mongoexport relaxed JSON), then in the same run:
- baseline: parse every line and write it back (orjson), in this process;
- mongopat: ``mongopat migrate up --dump`` with one bucket step, as a separate process (start-up,
  decoding, bucketing, encoding, fsync, verification and bookkeeping included).
Prints both times and their ratio, and mongopat's peak memory (PSS of its process) at the small and the
large size, with their ratio.

    python3 bench/migrate_dump_bucket.py [--documents 200000] [--small 50000]
"""

from __future__ import annotations

import argparse
import datetime
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


def migrate(work: Path, documents: int) -> tuple[float, float, Path]:
    data = work / f"iot_{documents}" / "iot"
    data.mkdir(parents=True)
    generate(data / "readings.json", documents)
    migrations = work / f"migrations_{documents}"
    migrations.mkdir()
    (migrations / "0001_bucket_readings.yaml").write_text(STEP)
    command = [
        sys.executable,
        "-m",
        "mongopat",
        "-q",
        "migrate",
        "up",
        "--dump",
        str(data),
        "--dir",
        str(migrations),
        "--yes",
    ]
    seconds, peak = run_measured(command)
    return seconds, peak, data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=200_000)
    parser.add_argument("--small", type=int, default=50_000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mongopat-bench-"))
    try:
        small_seconds, small_peak, _ = migrate(work, args.small)
        seconds, peak, data = migrate(work, args.documents)
        original = data / "mongopat_backup__0001_bucket_readings__0__readings.json"
        base = min(baseline(original, work / "copy.json") for _ in range(3))
        buckets = sum(1 for _ in (data / "readings.json").open("rb"))
        print(
            f"{args.documents:,} readings -> {buckets:,} buckets "
            f"({original.stat().st_size / 2**20:.1f} MiB of mongoexport JSON)"
        )
        print(f"  baseline (orjson parse + write every line, best of 3): {base:.2f} s")
        print(f"  mongopat migrate up --dump (whole process):            {seconds:.2f} s")
        print(f"  ratio: {seconds / base:.2f}x the baseline (target <= 3x)")
        print(f"  peak memory: {small_peak:.1f} MiB at {args.small:,} readings, {peak:.1f} MiB at {args.documents:,}: "
              f"{peak / small_peak:.2f}x (target <= 1.2x)")  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
