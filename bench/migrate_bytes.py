"""Bytes between mongopat and the server per byte of collection data, for each document step, run inside
the server (the default where the step allows it) and with ``--client-side``, on two shapes of data.

A counting TCP proxy sits between mongopat and the server: every byte of both directions of ``migrate up``
is counted (the loading of the collection goes around it). Also prints the commands per 1,000 documents.
The server is MONGOPAT_BENCH_URI (a standalone, or any member with directConnection), else a SecantusDB
daemon started for the run (``pip install -e '.[test]'``).

- ``orders``: generated orders (line items, optional coupon and notes, a tags array, a customer that about
  four orders reference, in ``customers`` for ``extended_ref``; for ``tree``, each 1,000 a tree of four
  children a node by ``parentId``; for ``pre_aggregation``, up to four payments an order in ``payments``);
- ``weather``: MongoDB's weather sample (``../shared/real-data/sample_weatherdata.archive.gz``, 1.7 KiB
  documents, optional nested sections), repeated to size with new ``_id``s.

SecantusDB plans the client-side path's compare-and-swap filter (``{_id, $expr}``) and a lookup of an ``_id``
that is a document (mongopat_backup's) as collection scans: both paths are slow there, so the default
collections are small (the bytes do not depend on the server's speed).

Each step runs on a top-level field and, for the field steps, computed and (on orders) schema_versioning,
approximation and document_versioning, on a nested one (``nested``); ``bucket`` groups the weather
observations by report type and hour (the sample's 10,000 spread over one day and 1,800 stations: by station,
a bucket would hold one).
Inside the server, each step runs on ``--documents`` and on twice as many: "bytes/byte" is the larger run's
whole traffic per byte of data, "a batch more" the traffic the second half added per byte it added, with
``--documents`` a multiple of ``--batch-size``: what each further batch costs (a run's fixed commands,
changelog, lock, verification, cancel out). The client side runs once: its traffic is per document.

    python3 bench/migrate_bytes.py [--documents 1000] [--batch-size 1000] [--corpus orders weather]
        [--step set_field ...] [--in-server-only] [--down]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import bson
import pymongo
from bson import ObjectId
from pymongo import monitoring

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mongopat.migrate.script import load_folder, render  # noqa: E402
from mongopat.migrate.server.runner import Runner, RunOptions  # noqa: E402

WEATHER_ARCHIVE = ROOT.parent / "shared" / "real-data" / "sample_weatherdata.archive.gz"
IGNORED = {"hello", "ismaster", "isMaster", "endSessions", "ping", "buildinfo", "buildInfo"}

STEPS: dict[str, dict[str, dict[str, Any]]] = {
    "orders": {
        "set_field": {"field": "reviewed", "value": True},
        "unset_field": {"field": "notes"},
        "rename_field": {"from": "status", "to": "state"},
        "schema_versioning": {"field": "schemaVersion", "default_version": 2},
        "polymorphic": {"type_field": "kind", "rules": [{"when_has": "coupon", "type": "promo"}], "default": "plain"},
        "approximation": {"field": "views", "factor": 10},
        "computed": {"field": "total2", "expression": "sum(items.price * items.qty)"},
        "document_versioning": {"history_collection": "items_history"},
        "attribute": {"fields": ["status", "notes"], "into": "attrs"},
        "map_to_array": {"field": "coupon", "layout": "pair"},
        "set_field nested": {"step": "set_field", "field": "flags.reviewed", "value": True},
        "unset nested": {"step": "unset_field", "field": "coupon.percent"},
        "rename nested": {"step": "rename_field", "from": "coupon.code", "to": "coupon.id"},
        "computed nested": {"step": "computed", "field": "totals.items", "expression": "sum(items.qty)"},
        "schema_versioning nested": {"step": "schema_versioning", "field": "meta.schemaVersion",
                                     "default_version": 2},
        "approximation nested": {"step": "approximation", "field": "stats.views", "factor": 10},
        "document_versioning nested": {"step": "document_versioning", "history_collection": "items_history",
                                       "version_field": "meta.revision"},
        "subset": {"field": "items", "keep": 3, "full_collection": "items_full"},
        "subset sorted": {"step": "subset", "field": "items", "keep": 3, "sort": {"price": -1},
                          "full_collection": "items_full"},
        "outlier": {"field": "items", "threshold": 3, "overflow_collection": "items_overflow"},
        "extended_ref": {"step": "extended_reference", "from": "customers", "local": "customerId",
                         "fields": ["name", "tier"], "as": "customer"},
        "tree": {"parent_field": "parentId"},
        "pre_aggregation": {"from": "payments", "local": "_id", "foreign": "orderId", "into": "paid",
                            "compute": {"total": {"sum": "amount"}, "n": {"count": True},
                                        "refunds": {"count": {"status": "refunded"}}}},
    },
    "weather": {
        "set_field": {"field": "reviewed", "value": True},
        "unset_field": {"field": "qualityControlProcess"},
        "rename_field": {"from": "callLetters", "to": "station"},
        "schema_versioning": {"field": "schemaVersion", "default_version": 2},
        "polymorphic": {"type_field": "kind", "rules": [{"when_has": "skyCondition", "type": "sky"}], "default": "x"},
        "approximation": {"field": "elevation", "factor": 10},
        "computed": {"field": "elevationFt", "expression": "elevation * 3"},
        "document_versioning": {"history_collection": "items_history"},
        "attribute": {"fields": ["visibility", "dewPoint"], "into": "attrs"},
        "map_to_array": {"field": "wind", "layout": "pair"},
        "set_field nested": {"step": "set_field", "field": "review.by", "value": "qa"},
        "unset nested": {"step": "unset_field", "field": "airTemperature.quality"},
        "rename nested": {"step": "rename_field", "from": "wind.speed.rate", "to": "wind.speed.value"},
        "computed nested": {"step": "computed", "field": "airTemperature.f",
                            "expression": "airTemperature.value * 1.8 + 32"},
        "subset": {"field": "sections", "keep": 2, "full_collection": "items_full"},
        "outlier": {"field": "sections", "threshold": 2, "overflow_collection": "items_overflow"},
        "bucket": {"series_key": "type", "time_field": "ts", "window_seconds": 3600, "max_bucket_size": 200,
                   "measurements": ["airTemperature.value", "elevation"],
                   "sentinels": {"airTemperature.value": [999.9]}},
    },
}  # fmt: skip


class CountingProxy:
    """A TCP proxy that counts the bytes it forwards, both ways."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.bytes = 0
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            client, _address = self.listener.accept()
            try:
                server = socket.create_connection(self.target)
            except OSError:  # the server is gone (the run is over): the client sees its connection closed
                client.close()
                continue
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(1 << 16):
                with self.lock:
                    self.bytes += len(data)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)


class Commands(monitoring.CommandListener):
    def __init__(self) -> None:
        self.count = 0

    def started(self, event: Any) -> None:
        if event.command_name not in IGNORED:
            self.count += 1

    def succeeded(self, event: Any) -> None:
        pass

    def failed(self, event: Any) -> None:
        pass


def orders(documents: int) -> list[dict[str, Any]]:
    rng = random.Random(1)
    found = []
    for i in range(documents):
        items = [
            {"sku": f"S{rng.randint(0, 5000):05d}", "price": round(rng.random() * 100, 2), "qty": rng.randint(1, 5)}
            for _ in range(rng.randint(1, 8))
        ]
        order: dict[str, Any] = {
            "_id": ObjectId((1_700_000_000 + i).to_bytes(4, "big") + i.to_bytes(8, "big")),
            # Each 1,000 orders reference 250 customers of their own: about 4 orders a customer.
            "customerId": customer_id(rng.getrandbits(96) % 250 + i // 1000 * 250),
            "status": rng.choice(["new", "paid", "shipped"]),
            "items": items,
            "tags": [rng.choice(["gift", "express", "b2b"]) for _ in range(rng.randint(0, 4))],
        }
        if rng.random() < 0.1:
            order["coupon"] = {"code": f"C{rng.randint(0, 99):02d}", "percent": 10}
        if rng.random() < 0.3:
            order["notes"] = "leave at door"
        found.append(order)
    return found


def with_parents(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The orders as a forest for ``tree``: each 1,000 orders a tree of four children a node (a quarter of
    them parents, 5 levels), the first its root."""
    found = []
    for i, doc in enumerate(docs):
        first = i // 1000 * 1000
        found.append({**doc, "parentId": docs[first + (i - first - 1) // 4]["_id"] if i > first else None})
    return found


def customer_id(number: int) -> ObjectId:
    return ObjectId(number.to_bytes(12, "big"))


def customers(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The customers the orders reference (extended_reference copies two of their fields)."""
    rng = random.Random(2)
    ids = sorted({d["customerId"] for d in docs if "customerId" in d})
    return [{"_id": i, "name": f"Customer {n}", "tier": rng.choice(["gold", "silver"]), "email": f"c{n}@example.com",
             "since": 2015 + rng.randint(0, 9)} for n, i in enumerate(ids)]  # fmt: skip


def payments(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The payments of the orders (pre_aggregation sums them): none to four an order."""
    rng = random.Random(3)
    return [{"orderId": d["_id"], "amount": round(rng.uniform(5, 500), 2), "method": rng.choice(["card", "iban"]),
             "status": rng.choice(["settled", "settled", "refunded"])}
            for d in docs for _ in range(rng.randrange(5))]  # fmt: skip


def weather(documents: int) -> list[dict[str, Any]]:
    from mongopat.sources.archive import archive_records

    if not WEATHER_ARCHIVE.exists():
        sys.exit(f"the weather corpus needs {WEATHER_ARCHIVE}")
    observations = [bson.decode(raw) for _size, raw in archive_records(WEATHER_ARCHIVE, "sample_weatherdata", "data")]
    found = []
    for i in range(documents):
        document = dict(observations[i % len(observations)])
        document["_id"] = ObjectId((1_400_000_000 + i).to_bytes(4, "big") + i.to_bytes(8, "big"))
        found.append(document)
    return found


def server() -> tuple[str, Any]:
    uri = os.environ.get("MONGOPAT_BENCH_URI")
    if uri:
        return uri, None
    from tests.support.server import ServerProcess, daemon_path

    program = daemon_path()
    if program is None:
        sys.exit("set MONGOPAT_BENCH_URI, or install SecantusDB: pip install -e '.[test]'")
    process = ServerProcess(Path(tempfile.mkdtemp(prefix="mongopat-bench-")), program)
    process.start()
    return process.uri, process


def run(uri: str, docs: list[dict[str, Any]], step: str, params: dict[str, Any], client_side: bool,
        batch_size: int, down: bool = False) -> dict[str, Any]:  # fmt: skip
    direct = pymongo.MongoClient(uri, directConnection=True)
    address = direct.address or ("127.0.0.1", 27017)
    name = f"bench_bytes_{os.getpid()}"
    direct.drop_database(name)
    if params.get("step", step) == "tree":
        docs = with_parents(docs)
    direct[name].items.insert_many(docs)
    if params.get("step", step) == "extended_reference":
        direct[name].customers.insert_many(customers(docs))
    if params.get("step", step) == "pre_aggregation":
        direct[name].payments.insert_many(payments(docs))
        direct[name].payments.create_index("orderId")
    data = sum(len(bson.encode(d)) for d in docs)
    proxy = CountingProxy(*address)
    commands = Commands()
    # Heartbeats once an hour: the server monitor's hellos every 10 s would count the run's duration.
    client = pymongo.MongoClient("127.0.0.1", proxy.port, directConnection=True, event_listeners=[commands],
                                 heartbeatFrequencyMS=3_600_000)  # fmt: skip
    folder = Path(tempfile.mkdtemp(prefix="mongopat-bench-"))
    kind = params.get("step", step)  # a label's step type: "set_field nested" is a set_field
    spec = {"collection": "items", **params, "step": kind}
    (folder / "0001_bench.yaml").write_text(render("0001_bench", kind, [spec], "bench"))
    client.admin.command("ping")
    before, commands.count = proxy.bytes, 0
    started = time.perf_counter()
    Runner(client[name], load_folder(folder), RunOptions(batch_size=batch_size, client_side=client_side)).up()
    elapsed = time.perf_counter() - started
    moved = proxy.bytes - before
    entry = direct[name].mongopat_changelog.find_one({"_id": "0001_bench"})["steps"][0]
    down_bytes, commands_up = None, commands.count
    if down:  # the same run's down, measured alone
        before = proxy.bytes
        Runner(client[name], load_folder(folder), RunOptions(batch_size=batch_size, client_side=client_side)).down(
            "base"
        )
        down_bytes = proxy.bytes - before
    client.close()
    direct.drop_database(name)
    direct.close()
    return {"bytes": moved, "data": data, "commands": commands_up, "seconds": elapsed,
            "in_server": entry.get("in_server"), "down": down_bytes}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=1000, help="migrate up's default: 1000")
    parser.add_argument("--corpus", nargs="+", choices=sorted(STEPS), default=sorted(STEPS))
    parser.add_argument("--step", nargs="+", default=None, help="only these steps")
    parser.add_argument("--in-server-only", action="store_true", help="skip the client side (slow on SecantusDB)")
    parser.add_argument("--down", action="store_true", help="also the bytes of down (run after each up)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # a killed bench stops its daemon too (finally)
    uri, process = server()
    try:
        summary = []
        for corpus in args.corpus:
            make = orders if corpus == "orders" else weather
            small, large = make(args.documents), make(2 * args.documents)
            size = sum(len(bson.encode(d)) for d in small)
            each = size / len(small)
            print(f"\n{corpus}: {len(small):,} and {len(large):,} documents, {each:,.0f} bytes each on average")
            print(f"  {'path':<12} {'step':<18} {'bytes/byte':>10} {'a batch more':>13} {'cmds/1k docs':>12}")
            for step, params in STEPS[corpus].items():
                if args.step and step not in args.step:
                    continue
                ratios: dict[bool, float] = {}
                for client_side in (False, True):
                    one = run(uri, small, step, params, client_side, args.batch_size, args.down)
                    if not one["in_server"] and not client_side:
                        client_side = True  # the step needs Python: its run was the client side's
                    path = "client side" if client_side else "in server"
                    if client_side and args.in_server_only and one["in_server"] is not None and not one["in_server"]:
                        print(f"  {'client side':<12} {step:<18} (the step needs Python; skipped)")
                        break
                    if client_side:  # about 4.5 bytes a byte whatever the size: one run
                        ratios[True] = one["bytes"] / one["data"]
                        print(f"  {path:<12} {step:<18} {ratios[True]:>10.3f} {'':>13}"
                              f" {one['commands'] * 1000 / len(small):>12.1f}")  # fmt: skip
                        if args.down:
                            print(f"  {'  its down':<12} {step:<18} {one['down'] / one['data']:>10.3f}")
                        break
                    # One more batch: what a batch of --batch-size documents costs, apart from a run's fixed
                    # commands (changelog, lock, verification).
                    two = run(uri, large, step, params, client_side, args.batch_size, args.down)
                    ratios[False] = (two["bytes"] - one["bytes"]) / (two["data"] - one["data"])
                    print(f"  {path:<12} {step:<18} {two['bytes'] / two['data']:>10.3f} {ratios[False]:>13.4f}"
                          f" {two['commands'] * 1000 / len(large):>12.1f}")  # fmt: skip
                    if args.down:
                        more = (two["down"] - one["down"]) / (two["data"] - one["data"])
                        print(f"  {'  its down':<12} {step:<18} {two['down'] / two['data']:>10.3f} {more:>13.4f}")
                    if args.in_server_only:
                        break
                summary.append((corpus, step, ratios.get(False), ratios.get(True)))
        print("\nsummary: bytes per byte of collection data a batch more costs (target <= 0.05 inside the server)")
        for corpus, step, inside, outside in summary:
            shown = "needs Python" if inside is None else f"{inside:.4f} ({'ok' if inside <= 0.05 else 'OVER'})"
            other = "not run" if outside is None else f"{outside:.2f}"
            print(f"  {corpus:<8} {step:<18} in server {shown}, client side {other}")
    finally:
        if process is not None:
            process.stop()


if __name__ == "__main__":
    main()
