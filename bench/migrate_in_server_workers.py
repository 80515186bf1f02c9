"""A step the server computes itself, taken in one pass against ``--workers N`` stretches of ``_id`` at once.

For each step chosen (default ``computed`` and ``subset`` on generated orders, ``bench/migrate_bytes.py``'s
corpus), each round loads the same documents into a fresh database (not timed), then times ``up`` with
``--workers 1`` (one pass: the baseline) and with ``--workers N``, interleaved so that a slow spell of the
machine hits both; prints the best of the rounds and their ratio. What the threads gain is the server's
cores working on several ranges at once: a stand-alone mongod or a replica set's primary with free cores
gains, a server that runs one command at a time does not. A sharded collection's shards working at once
(a thread per shard) needs a sharded cluster, which this script does not make.

    MONGOPAT_BENCH_URI=mongodb://localhost:27017 python3 bench/migrate_in_server_workers.py
        [--documents 20000] [--workers 4] [--batch-size 1000] [--rounds 3] [--steps computed subset]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pymongo import MongoClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from migrate_bytes import STEPS, orders  # noqa: E402

from mongopat.migrate.script import load_folder, render  # noqa: E402
from mongopat.migrate.server.runner import Runner, RunOptions  # noqa: E402


def timed_up(client: Any, documents: list[dict[str, Any]], folder: Path, batch_size: int, workers: int) -> float:
    db = client["mongopat_bench_workers"]
    client.drop_database(db.name)
    db.items.insert_many(documents)
    started = time.perf_counter()
    Runner(db, load_folder(folder), RunOptions(batch_size=batch_size, workers=workers)).up()
    seconds = time.perf_counter() - started
    state = db.mongopat_changelog.find_one({})["steps"][0]
    if not state.get("in_server"):
        sys.exit(f"the step ran on the client side: {state.get('client_side')}")
    if workers > 1 and state["stats"].get("threads_at_once") != workers:
        sys.exit(f"--workers {workers}: {state['stats'].get('threads_at_once')} thread(s) at once")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", nargs="+", default=["computed", "subset"], help="step names of migrate_bytes")
    args = parser.parse_args()
    uri = os.environ.get("MONGOPAT_BENCH_URI")
    if not uri:
        sys.exit("set MONGOPAT_BENCH_URI to a server (the threads' gain is the server's)")
    client: Any = MongoClient(uri, serverSelectionTimeoutMS=5000)
    documents = orders(args.documents)
    work = Path(tempfile.mkdtemp(prefix="mongopat-bench-"))
    try:
        print(f"{args.documents:,} orders, batches of {args.batch_size}, best of {args.rounds} (interleaved)")
        for step in args.steps:
            folder = work / step.replace(" ", "_")
            folder.mkdir()
            spec = {"step": step.split()[0], "collection": "items", **STEPS["orders"][step]}
            (folder / "0001_step.yaml").write_text(render("0001_step", spec["step"], [spec]))
            times: dict[int, list[float]] = {1: [], args.workers: []}
            for _ in range(args.rounds):
                for workers, taken in times.items():
                    taken.append(timed_up(client, [dict(d) for d in documents], folder, args.batch_size, workers))
            one, many = min(times[1]), min(times[args.workers])
            print(f"  {step:<10} one pass {one:6.2f} s; --workers {args.workers} {many:6.2f} s = {many / one:.2f}x")
        client.drop_database("mongopat_bench_workers")
    finally:
        client.close()


if __name__ == "__main__":
    main()
