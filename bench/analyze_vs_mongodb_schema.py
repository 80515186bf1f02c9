"""Throughput and peak memory of ``mongopat analyze --dump`` against mongodb-schema, in the same run, on
three shapes of data.

Each corpus is generated once (mongoexport relaxed Extended JSON, in ``bench/.work/``), then both tools
run on the same file, alternating, ``--rounds`` times each, end to end (process start, parsing and
analysis); each round runs each tool twice, once timed and once with its memory sampled. Prints, per
corpus, documents per second, peak memory and the ratios. mongodb-schema is installed with npm into
``bench/node_modules`` on first use.

- ``orders``: e-commerce orders that all carry the same keys in the same order;
- ``optional``: orders with optional fields (a coupon in 10%, notes in 5%, a tags array of 0-4
  strings, a 4-field address whose fields are each sometimes missing);
- ``weather``: MongoDB's weather sample (``../shared/real-data/sample_weatherdata.archive.gz``, 1.7 KiB
  documents, optional nested sections, 124 paths), repeated to size with new ``_id``s.

    python3 bench/analyze_vs_mongodb_schema.py [--documents 100000] [--rounds 3] [--corpus weather ...]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bson import ObjectId, json_util

BENCH = Path(__file__).resolve().parent
WORK = BENCH / ".work"


def _items(rng: random.Random, named: bool) -> list[dict]:
    """An order's 1-8 line items (with a product name, or without)."""
    items = []
    for _ in range(rng.randint(1, 8)):
        item: dict = {"sku": f"S{rng.randint(0, 5000):05d}"}
        if named:
            item["name"] = f"Item {rng.randint(0, 999)}"
        item.update(price=round(rng.random() * 100, 2), qty=rng.randint(1, 5))
        items.append(item)
    return items


def generate_orders(path: Path, documents: int) -> None:
    rng = random.Random(1)
    start = 1_700_000_000
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for i in range(documents):
            created = start + i * 3
            items = _items(rng, named=True)
            order = {
                "_id": ObjectId(created.to_bytes(4, "big") + i.to_bytes(8, "big")),
                "customerId": ObjectId(rng.getrandbits(96).to_bytes(12, "big")),
                "createdAt": {"$date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(created))},
                "status": rng.choice(["new", "paid", "shipped", "delivered"]),
                "items": items,
                "shipping": {
                    "address": {"city": rng.choice(["Lyon", "Porto", "Graz"]), "zip": f"{rng.randint(0, 99999):05d}"},
                    "method": "ground",
                },
                "total": round(sum(item["price"] * item["qty"] for item in items), 2),
                "notes": None if i % 3 else "leave at door",
            }
            handle.write(json_util.dumps(order) + "\n")


def generate_optional_orders(path: Path, documents: int) -> None:
    """Orders as applications write them: optional fields, arrays of varying length, sub-documents whose
    keys come and go, so consecutive documents rarely share a key set."""
    rng = random.Random(2)
    start = 1_700_000_000
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for i in range(documents):
            created = start + i * 3
            items = _items(rng, named=False)
            address = {
                key: value
                for key, value in (
                    ("street", f"{rng.randint(1, 200)} Main St"),
                    ("city", rng.choice(["Lyon", "Porto", "Graz", "Oslo"])),
                    ("zip", f"{rng.randint(0, 99999):05d}"),
                    ("country", rng.choice(["FR", "PT", "AT", "NO"])),
                )
                if rng.random() < 0.9
            }
            order: dict = {
                "_id": ObjectId(created.to_bytes(4, "big") + i.to_bytes(8, "big")),
                "customerId": ObjectId(rng.getrandbits(96).to_bytes(12, "big")),
                "createdAt": {"$date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(created))},
                "status": rng.choice(["new", "paid", "shipped", "delivered"]),
                "items": items,
                "address": address,
            }
            if rng.random() < 0.10:
                order["coupon"] = {"code": f"C{rng.randint(0, 99):02d}", "percent": rng.choice([5, 10, 15])}
            if rng.random() < 0.05:
                order["notes"] = "leave at door"
            order["tags"] = [
                rng.choice(["gift", "express", "fragile", "bulk", "b2b"]) for _ in range(rng.randint(0, 4))
            ]
            order["total"] = round(sum(item["price"] * item["qty"] for item in items), 2)
            handle.write(json_util.dumps(order) + "\n")


WEATHER_ARCHIVE = BENCH.parent.parent / "shared" / "real-data" / "sample_weatherdata.archive.gz"


def generate_weather(path: Path, documents: int) -> None:
    """The weather sample's observations, repeated to ``documents`` with a new ``_id`` each time."""
    import bson

    sys.path.insert(0, str(BENCH.parent))
    from mongopat.sources.archive import archive_records

    if not WEATHER_ARCHIVE.exists():
        sys.exit(f"the weather corpus needs {WEATHER_ARCHIVE}")
    observations = [bson.decode(raw) for _size, raw in archive_records(WEATHER_ARCHIVE, "sample_weatherdata", "data")]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for i in range(documents):
            document = dict(observations[i % len(observations)])
            document["_id"] = ObjectId((1_400_000_000 + i).to_bytes(4, "big") + i.to_bytes(8, "big"))
            handle.write(json_util.dumps(document) + "\n")


CORPORA = {"orders": generate_orders, "optional": generate_optional_orders, "weather": generate_weather}


def _tree_pss_kib(root: int) -> int:
    """Proportional set size of a process and all its descendants (shared pages counted once)."""
    total = 0
    pending = [root]
    while pending:
        pid = pending.pop()
        try:
            with open(f"/proc/{pid}/smaps_rollup") as handle:
                for line in handle:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
                        break
            with open(f"/proc/{pid}/task/{pid}/children") as handle:
                pending.extend(int(child) for child in handle.read().split())
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return total


def run_measured(command: list[str]) -> tuple[float, float]:
    """Wall seconds of one run, and peak memory (MiB) of the whole process tree in another, sampled every
    10 ms as PSS. Two runs, because the sampler takes time from what it measures: reading the process
    tree's memory maps costs about 2 ms of CPU a sample (a sixth of a CPU), taken from a program that uses
    every CPU (mongopat's default workers) but not from one that leaves a CPU idle."""
    return _timed(command), _peak_mib(command)


def _timed(command: list[str]) -> float:
    started = time.perf_counter()
    process = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    elapsed = time.perf_counter() - started
    if process.returncode != 0:
        sys.exit(f"failed: {' '.join(command)}\n{process.stderr.decode()}")
    return elapsed


def _peak_mib(command: list[str]) -> float:
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    while process.poll() is None:
        peak = max(peak, _tree_pss_kib(process.pid))
        time.sleep(0.01)
    if process.returncode != 0:
        sys.exit(f"failed: {' '.join(command)}\n{process.stderr.read().decode()}")
    return peak / 1024


def ensure_bytecode() -> None:
    """Compile mongopat's modules as an installed package has them: a checkout run with
    PYTHONDONTWRITEBYTECODE set (as on this machine) would compile every module again at each start."""
    import compileall

    compileall.compile_dir(str(BENCH.parent / "mongopat"), quiet=1)


def ensure_mongodb_schema() -> None:
    if (BENCH / "node_modules" / "mongodb-schema").exists():
        return
    if shutil.which("npm") is None:
        sys.exit("npm is needed to install the mongodb-schema baseline")
    subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent"], cwd=BENCH, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--corpus", action="append", choices=sorted(CORPORA), help="repeatable; default: all three")
    args = parser.parse_args()
    ensure_mongodb_schema()
    ensure_bytecode()
    summary = []
    for corpus in args.corpus or list(CORPORA):
        summary.append((corpus, run_corpus(corpus, args.documents, args.rounds)))
    print("\nsummary (medians; targets: 5x at the default workers, 3x with -w1, memory under 0.5x)")
    for corpus, ratios in summary:
        print(
            f"  {corpus:9s} "
            + "  ".join(f"{name}: {speed:.2f}x, memory {memory:.2f}x" for name, speed, memory in ratios)
        )
    print(
        f"  ({os.cpu_count()} CPUs; 'mongopat' runs its default workers, 'mongopat -w1' one process;"
        " memory is the PSS of the whole process tree)"
    )


def run_corpus(corpus: str, documents: int, rounds: int) -> list[tuple[str, float, float]]:
    folder = WORK / f"{corpus}_{documents}"
    export = folder / f"{corpus}.json"
    if not export.exists():
        print(f"generating {documents:,} documents of the {corpus} corpus in {export} ...")
        CORPORA[corpus](export, documents)
    analyze = [sys.executable, "-m", "mongopat", "-q", "analyze", "--dump", str(folder), "--format", "json"]
    commands = {
        "mongopat": analyze,
        "mongopat -w1": [*analyze, "--workers", "1"],
        "mongodb-schema": ["node", str(BENCH / "mongodb_schema_run.js"), str(export)],
    }
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for round_number in range(rounds):
        for name, command in commands.items():
            results[name].append(run_measured(command))
        print(f"{corpus} round {round_number + 1}: " + ", ".join(f"{n} {r[-1][0]:.2f} s" for n, r in results.items()))
    size_mib = export.stat().st_size / 2**20
    print(f"\n{corpus}: {documents:,} documents, {size_mib:.1f} MiB of mongoexport JSON; {rounds} rounds")
    best = {name: min(runs) for name, runs in results.items()}
    median = {name: sorted(t for t, _m in runs)[len(runs) // 2] for name, runs in results.items()}
    peak = {name: max(mem for _t, mem in runs) for name, runs in results.items()}
    for name in commands:
        seconds = best[name][0]
        print(
            f"  {name:15s} best {seconds:6.2f} s, median {median[name]:6.2f} s"
            f"  {documents / seconds:10,.0f} docs/s  peak {peak[name]:6.1f} MiB"
        )
    ratios = []
    for name, target in (("mongopat", 5), ("mongopat -w1", 3)):
        speedup = median["mongodb-schema"] / median[name]
        fastest = best["mongodb-schema"][0] / best[name][0]
        memory = peak[name] / peak["mongodb-schema"]
        ratios.append((name, speedup, memory))
        print(
            f"  {name}: {speedup:.2f}x the speed of mongodb-schema, medians (target >= {target}x;"
            f" {fastest:.2f}x best against best), {memory:.2f}x its peak memory (target < 0.5x)"
        )
    print()
    return ratios


if __name__ == "__main__":
    main()
