"""Document steps on a dump folder, against the least work any file-based migration must do, on two shapes
of data.

For each corpus, writes a mongoexport file (relaxed Extended JSON) of ``--documents`` documents, then in
the same run, each timed best of ``--rounds`` (interleaved, so that a slow spell of the machine hits every
side):
- baseline: parse every line and write it back (orjson), in this process;
- mongopat: ``mongopat migrate up --dump`` with one document step, as a separate process on a fresh copy of
  the folder (start-up, decoding, the step, encoding, fsync, verification and bookkeeping included), on
  its default workers (a file over 4 MiB is cut into parts, one per CPU) and with ``--workers 1``.
Prints the times, their ratio, the migration's own duration as mongopat records it and its peak memory.

- ``orders``: generated orders (line items, optional coupon and notes, a tags array), ~330 bytes each;
- ``weather``: MongoDB's weather sample (``../shared/real-data/sample_weatherdata.archive.gz``, 1.7 KiB
  documents, optional nested sections), repeated to size with new ``_id``s.

``--steps all`` runs every document step of ``bench/migrate_bytes.py`` (top-level and nested) in place of
the three chosen by default.

    python3 bench/migrate_dump_documents.py [--documents 50000] [--rounds 3] [--corpus orders weather]
                                            [--steps set_field computed ... | all]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from bson import json_util

sys.path.insert(0, str(Path(__file__).resolve().parent))
from analyze_vs_mongodb_schema import run_measured  # noqa: E402
from migrate_bytes import STEPS, orders, weather  # noqa: E402
from migrate_dump_bucket import baseline  # noqa: E402

from mongopat.migrate.script import render  # noqa: E402

CHOSEN = ("set_field", "computed", "document_versioning")


def prepare(work: Path, corpus: str, documents: list[dict[str, Any]]) -> Path:
    pristine = work / corpus / "pristine"
    pristine.mkdir(parents=True)
    with (pristine / "items.json").open("w", encoding="utf-8") as handle:
        handle.writelines(json_util.dumps(document) + "\n" for document in documents)
    return pristine


def run_step(
    pristine: Path, work: Path, step: str, params: dict[str, Any], options: tuple[str, ...] = ()
) -> tuple[float, float, float]:
    """(wall seconds, the migration's recorded duration, peak MiB) of one fresh run."""
    data = work / "data"
    shutil.rmtree(data, ignore_errors=True)
    shutil.copytree(pristine, data)
    name = step.replace(" ", "_")
    migrations = work / f"migrations_{name}"
    if not migrations.exists():
        migrations.mkdir()
        spec = {"step": step, "collection": "items", **params}
        (migrations / f"0001_{name}.yaml").write_text(render(f"0001_{name}", spec["step"], [spec]))
    command = [sys.executable, "-m", "mongopat", "-q", "migrate", "up", "--dump", str(data), "--dir", str(migrations)]
    seconds, peak = run_measured([*command, "--yes", *options])
    entry = json_util.loads((data / "mongopat_changelog.json").read_text().splitlines()[0])
    if entry["state"] != "applied":
        sys.exit(f"{step}: {entry.get('error')}")
    return seconds, entry["duration_s"], peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--corpus", nargs="+", choices=["orders", "weather"], default=["orders", "weather"])
    parser.add_argument("--steps", nargs="+", default=list(CHOSEN), help="step names of migrate_bytes.STEPS, or all")
    args = parser.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # as an installed package runs
    work = Path(tempfile.mkdtemp(prefix="mongopat-bench-"))
    try:
        for corpus in args.corpus:
            documents = (orders if corpus == "orders" else weather)(args.documents)
            pristine = prepare(work, corpus, documents)
            size = (pristine / "items.json").stat().st_size
            chosen = list(STEPS[corpus]) if args.steps == ["all"] else args.steps  # each corpus has its own
            run_step(pristine, work, "set_field", STEPS[corpus]["set_field"])  # warm-up: the bytecode cache
            bases: list[float] = []
            ways = {"": (), " --workers 1": ("--workers", "1")}
            runs: dict[tuple[str, str], list[tuple[float, float, float]]] = {
                (step, way): [] for step in chosen for way in ways
            }
            for _ in range(args.rounds):
                bases.append(baseline(pristine / "items.json", work / "copy.json"))
                for step in chosen:
                    for way, options in ways.items():
                        runs[step, way].append(run_step(pristine, work, step, STEPS[corpus][step], options))
            base = min(bases)
            print(f"\n{corpus}: {args.documents:,} documents, {size / 2**20:.1f} MiB of mongoexport JSON, "
                  f"best of {args.rounds}; baseline (orjson parse + write every line, one process) {base:.2f} s; "
                  f"mongopat on its default workers ({os.cpu_count()} CPUs here), then on one")  # fmt: skip
            for step in chosen:
                for way in ways:
                    seconds = min(r[0] for r in runs[step, way])
                    duration = min(r[1] for r in runs[step, way])
                    peak = max(r[2] for r in runs[step, way])
                    print(f"  {step + way:<31} {seconds:6.2f} s = {seconds / base:5.2f}x (whole process); "
                          f"the migration itself {duration:.2f} s = {duration / base:.2f}x; "
                          f"peak {peak:.0f} MiB")  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
