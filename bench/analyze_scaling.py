"""How ``mongopat analyze --dump`` scales: time and peak memory as documents grow, and on large documents.

Generates (once, under ``bench/.work``, not committed) the orders of ``analyze_vs_mongodb_schema.py`` at
each ``--documents`` size, and ``--large`` documents of about 1 MiB of JSON each (an array of 20,000
readings), then runs ``mongopat analyze --dump`` on each, at the default workers and with ``--workers 1``,
best of ``--rounds``. Prints seconds, documents per second, microseconds per document against the smallest
size measured in the same run (flat when the cost grows linearly) and the peak memory (PSS of the process
tree).

    python3 bench/analyze_scaling.py [--documents 100000 1000000] [--large 300] [--rounds 1]
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

from bson import ObjectId, json_util

sys.path.insert(0, str(Path(__file__).resolve().parent))

from analyze_vs_mongodb_schema import WORK, ensure_bytecode, generate_orders, run_measured  # noqa: E402


def generate_large(path: Path, documents: int, readings: int = 20_000) -> None:
    rng = random.Random(2)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for i in range(documents):
            doc = {
                "_id": ObjectId((1_700_000_000 + i * 60).to_bytes(4, "big") + i.to_bytes(8, "big")),
                "device": f"d{i % 17}",
                "readings": [
                    {"t": k, "v": round(rng.random() * 100, 3), "ok": rng.random() > 0.01, "tag": f"t{k % 50}"}
                    for k in range(readings)
                ],
            }
            handle.write(json_util.dumps(doc) + "\n")


def measure(label: str, folder: Path, documents: int, rounds: int) -> list[tuple[str, int, float, float]]:
    analyze = [sys.executable, "-m", "mongopat", "-q", "analyze", "--dump", str(folder), "--format", "json"]
    rows = []
    for name, command in (("default", analyze), ("-w1", [*analyze, "--workers", "1"])):
        runs = [run_measured(command) for _ in range(rounds)]
        seconds = min(t for t, _m in runs)
        peak = max(m for _t, m in runs)
        rows.append((f"{label} {name}", documents, seconds, peak))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--large", type=int, default=300, help="documents of about 1 MiB (0: skip)")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    ensure_bytecode()
    rows = []
    for documents in sorted(args.documents):
        folder = WORK / f"orders_{documents}"
        export = folder / "orders.json"
        if not export.exists():
            print(f"generating {documents:,} orders in {export} ...", flush=True)
            generate_orders(export, documents)
        rows.extend(measure(f"orders {documents:,}", folder, documents, args.rounds))
    if args.large:
        folder = WORK / f"large_{args.large}"
        export = folder / "devices.json"
        if not export.exists():
            print(f"generating {args.large} documents of about 1 MiB in {export} ...", flush=True)
            generate_large(export, args.large)
        size = export.stat().st_size / args.large / 2**20
        rows.extend(measure(f"large ({size:.2f} MiB each)", folder, args.large, args.rounds))
    # Cost per document relative to the smallest size, per mode: 1.00x everywhere is linear growth.
    base: dict[str, float] = {}
    for name, documents, seconds, _peak in rows:
        if name.startswith("orders"):
            base.setdefault(name.split()[-1], seconds / documents)
    header = ("run", "documents", "seconds", "docs/s", "us/doc", "vs smallest", "peak MiB")
    print("\n{:34s} {:>10s} {:>8s} {:>9s} {:>8s} {:>11s} {:>9s}".format(*header))
    for name, documents, seconds, peak in rows:
        per = seconds / documents
        ratio = f"{per / base[name.split()[-1]]:.2f}x" if name.startswith("orders") else "-"
        figures = (name, documents, seconds, documents / seconds, per * 1e6, ratio, peak)
        print("{:34s} {:10,d} {:8.2f} {:9,.0f} {:8.1f} {:>11s} {:9.1f}".format(*figures))


if __name__ == "__main__":
    main()
