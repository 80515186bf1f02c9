"""Throughput and peak memory of ``mongopat analyze --dump`` against mongodb-schema, in the same run.

Generates 100,000 e-commerce orders (mongoexport relaxed Extended JSON) once, then runs both tools on the
same file, alternating, ``--rounds`` times each, end to end (process start, parsing and analysis); each
round runs each tool twice, once timed and once with its memory sampled. Prints documents per second,
peak memory and the ratios. mongodb-schema is installed with npm into
``bench/node_modules`` on first use.

    python3 bench/analyze_vs_mongodb_schema.py [--documents 100000] [--rounds 3]
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


def generate_orders(path: Path, documents: int) -> None:
    rng = random.Random(1)
    start = 1_700_000_000
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for i in range(documents):
            created = start + i * 3
            items = [
                {
                    "sku": f"S{rng.randint(0, 5000):05d}",
                    "name": f"Item {rng.randint(0, 999)}",
                    "price": round(rng.random() * 100, 2),
                    "qty": rng.randint(1, 5),
                }
                for _ in range(rng.randint(1, 8))
            ]
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
    args = parser.parse_args()
    folder = WORK / f"orders_{args.documents}"
    export = folder / "orders.json"
    if not export.exists():
        print(f"generating {args.documents:,} orders in {export} ...")
        generate_orders(export, args.documents)
    ensure_mongodb_schema()
    ensure_bytecode()
    analyze = [sys.executable, "-m", "mongopat", "-q", "analyze", "--dump", str(folder), "--format", "json"]
    commands = {
        "mongopat": analyze,
        "mongopat -w1": [*analyze, "--workers", "1"],
        "mongodb-schema": ["node", str(BENCH / "mongodb_schema_run.js"), str(export)],
    }
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for round_number in range(args.rounds):
        for name, command in commands.items():
            results[name].append(run_measured(command))
        print(f"round {round_number + 1}: " + ", ".join(f"{n} {r[-1][0]:.2f} s" for n, r in results.items()))
    size_mib = export.stat().st_size / 2**20
    print(f"\n{args.documents:,} documents, {size_mib:.1f} MiB of mongoexport JSON; {args.rounds} rounds")
    best = {name: min(runs) for name, runs in results.items()}
    median = {name: sorted(t for t, _m in runs)[len(runs) // 2] for name, runs in results.items()}
    peak = {name: max(mem for _t, mem in runs) for name, runs in results.items()}
    for name in commands:
        seconds = best[name][0]
        print(
            f"  {name:15s} best {seconds:6.2f} s, median {median[name]:6.2f} s"
            f"  {args.documents / seconds:10,.0f} docs/s  peak {peak[name]:6.1f} MiB"
        )
    # The targets of the speed work: 5x at the default workers, 3x on one core, under half the memory.
    for name, target in (("mongopat", 5), ("mongopat -w1", 3)):
        speedup = median["mongodb-schema"] / median[name]
        fastest = best["mongodb-schema"][0] / best[name][0]
        memory = peak[name] / peak["mongodb-schema"]
        print(
            f"  {name}: {speedup:.2f}x the speed of mongodb-schema, medians (target >= {target}x;"
            f" {fastest:.2f}x best against best), {memory:.2f}x its peak memory (target < 0.5x)"
        )
    print(
        f"  ({os.cpu_count()} CPUs; 'mongopat' runs its default workers, 'mongopat -w1' one process;"
        " memory is the PSS of the whole process tree)"
    )


if __name__ == "__main__":
    main()
