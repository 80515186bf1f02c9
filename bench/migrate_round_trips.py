"""Round trips of a migration: mongopat's batched run against the hand-written per-document loop.

Counts the commands each sends to migrate the same documents: a `computed` step (store a total derived
from the items), or with `--step bucket` a bucket step (readings of 20 sensors into 10-minute buckets; the
hand-written loop reads each reading, pushes it into its bucket and deletes it). With MONGOPAT_BENCH_URI
set (e.g. mongodb://localhost:27017), pymongo's command monitoring counts every command a real server
receives, getMores included; without it, an in-process mongomock database is used and every collection
call counts as one command (mongomock is far too slow to time, so only counts are printed).

    python3 bench/migrate_round_trips.py [--documents 5000] [--batch-size 1000] [--step computed|bucket]
"""

from __future__ import annotations

import argparse
import datetime
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from bson import ObjectId
from pymongo import monitoring

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mongopat.expressions import evaluate, parse  # noqa: E402
from mongopat.migrate.script import load_folder, render  # noqa: E402
from mongopat.migrate.server.runner import Runner, RunOptions  # noqa: E402

IGNORED = {"hello", "ismaster", "isMaster", "endSessions", "ping", "buildinfo", "buildInfo"}


class Counter(monitoring.CommandListener):
    def __init__(self) -> None:
        self.count = 0

    def started(self, event) -> None:
        if event.command_name not in IGNORED:
            self.count += 1

    def succeeded(self, event) -> None:
        pass

    def failed(self, event) -> None:
        pass


class CountingCollection:
    """mongomock stand-in for command monitoring: one count per collection call."""

    def __init__(self, collection, counter: Counter) -> None:
        self._collection, self._counter = collection, counter

    def with_options(self, *args, **kwargs):
        return CountingCollection(self._collection.with_options(*args, **kwargs), self._counter)

    def __getattr__(self, name):
        attribute = getattr(self._collection, name)
        if not callable(attribute) or name.startswith("_"):
            return attribute

        def counted(*args, **kwargs):
            self._counter.count += 1
            return attribute(*args, **kwargs)

        return counted


class CountingDatabase:
    def __init__(self, db, counter: Counter) -> None:
        self._db, self._counter = db, counter

    def __getitem__(self, name):
        return CountingCollection(self._db[name], self._counter)

    def __getattr__(self, name):
        attribute = getattr(self._db, name)
        if name in ("list_collection_names", "create_collection"):

            def counted(*args, **kwargs):
                self._counter.count += 1
                return attribute(*args, **kwargs)

            return counted
        return CountingCollection(attribute, self._counter) if not callable(attribute) else attribute


def orders(n: int) -> list[dict]:
    rng = random.Random(1)
    return [{"_id": ObjectId(), "items": [{"price": rng.random() * 10, "qty": rng.randint(1, 3)} for _ in range(4)]}
            for _ in range(n)]  # fmt: skip


def readings(n: int) -> list[dict]:
    rng = random.Random(1)
    start = datetime.datetime(2026, 1, 1)
    return [{"_id": ObjectId(), "sensor": f"s{i % 20}", "ts": start + datetime.timedelta(seconds=i * 3),
             "v": rng.random()} for i in range(n)]  # fmt: skip


BUCKET = {"step": "bucket", "collection": "orders", "series_key": "sensor", "time_field": "ts", "window_seconds": 600,
          "measurements": ["v"], "max_bucket_size": 200}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=5000)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--step", choices=("computed", "bucket"), default="computed")
    args = parser.parse_args()
    uri = os.environ.get("MONGOPAT_BENCH_URI")
    counter = Counter()
    if uri:
        import pymongo

        client = pymongo.MongoClient(uri, event_listeners=[counter])
        wrap = lambda db: db  # noqa: E731
        where = f"real server (command monitoring), {uri.split('@')[-1]}"
    else:
        from mongopat.sources.mongo import mongomock_client

        client = mongomock_client("bench")
        wrap = lambda db: CountingDatabase(db, counter)  # noqa: E731
        where = "mongomock (one count per collection call; getMores not counted)"
    expression = parse("sum(items.price * items.qty)")
    docs = orders(args.documents) if args.step == "computed" else readings(args.documents)

    # Baseline: the loop people write by hand, one find_one and one replace_one per document.
    naive = client["mongopat_bench_naive"]
    naive.orders.drop()
    naive.orders.insert_many([dict(d) for d in docs])
    ids = [d["_id"] for d in naive.orders.find({}, {"_id": 1})]
    counter.count = 0
    started = time.perf_counter()
    counted = wrap(naive)
    for identifier in ids:
        document = counted["orders"].find_one({"_id": identifier})
        if args.step == "computed":
            document["total"] = evaluate(expression, document)
            counted["orders"].replace_one({"_id": identifier}, document)
        else:
            window = document["ts"].replace(minute=document["ts"].minute // 10 * 10, second=0)
            sensor = document.pop("sensor")
            counted["orders"].update_one(
                {"sensor": sensor, "start": window},
                {"$push": {"readings": document}, "$inc": {"count": 1}},
                upsert=True,
            )
            counted["orders"].delete_one({"_id": identifier})
    naive_commands, naive_seconds = counter.count, time.perf_counter() - started

    batched = client["mongopat_bench_batched"]
    batched.orders.drop()
    batched.drop_collection("mongopat_changelog")
    batched.drop_collection("mongopat_backup")
    batched.orders.insert_many([dict(d) for d in docs])
    with tempfile.TemporaryDirectory() as folder:
        step = {"step": "computed", "collection": "orders", "field": "total", "expression": str(expression.text)}
        if args.step == "bucket":
            step = BUCKET
        Path(folder, "0001_total.yaml").write_text(render("0001_total", "total", [step]))
        counter.count = 0
        started = time.perf_counter()
        Runner(wrap(batched), load_folder(folder), RunOptions(batch_size=args.batch_size)).up()
        batched_commands, batched_seconds = counter.count, time.perf_counter() - started
    if args.step == "computed":
        assert batched.orders.count_documents({"total": {"$exists": True}}) == args.documents
    else:
        assert sum(b["count"] for b in batched.orders.find({}, {"count": 1})) == args.documents
    per_k = 1000 / args.documents
    print(f"{args.step} step, {args.documents:,} documents, batch size {args.batch_size:,}, {where}")
    print(
        f"  hand-written loop: {naive_commands:,} commands ({naive_commands * per_k:,.0f} per 1,000 documents), "
        f"{naive_seconds:.2f} s"
    )
    print(f"  mongopat migrate:  {batched_commands:,} commands ({batched_commands * per_k:,.1f} per 1,000 documents, "
          f"backups, checkpoints and verification included), {batched_seconds:.2f} s")  # fmt: skip
    print(f"  ratio: {naive_commands / max(batched_commands, 1):,.0f}x fewer commands")
    for name in ("mongopat_bench_naive", "mongopat_bench_batched"):
        client.drop_database(name)


if __name__ == "__main__":
    main()
