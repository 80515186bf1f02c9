"""The shop dataset every migration test starts from, a step of each type on it, migration files, and the
state a run leaves (every collection as sorted raw BSON, so runs compare byte for byte)."""

from __future__ import annotations

import datetime
import random
from pathlib import Path
from typing import Any

import bson
from bson import ObjectId

from mongopat.migrate.script import load_folder, render
from mongopat.migrate.server.runner import Runner, RunOptions

START = datetime.datetime(2026, 1, 1)


def oid(n: int) -> ObjectId:
    return ObjectId(f"{n:024x}")


def dataset() -> dict[str, list[dict[str, Any]]]:
    """The same documents every call (ObjectIds included), so runs can be compared byte for byte."""
    rng = random.Random(3)
    customers = [{"_id": oid(1000 + i), "name": f"c{i}", "email": f"c{i}@x.io"} for i in range(12)]
    orders = []
    for i in range(230):
        items = [
            {"price": round(rng.random() * 10, 2), "qty": rng.randint(1, 3)}
            for _ in range(rng.randint(0, 6) if i % 50 else 120)
        ]
        orders.append(
            {
                "_id": oid(2000 + i),
                "customerId": customers[i % 12]["_id"],
                "createdAt": START + datetime.timedelta(hours=i),
                "status": rng.choice(["new", "paid"]),
                "items": items,
                "ram": 8 if i % 3 == 0 else None,
                "cpu": "M3" if i % 3 == 1 else None,
            }
        )
    for order in orders:
        for key in ("ram", "cpu"):
            if order[key] is None:
                del order[key]
    readings = [
        {
            "_id": oid(5000 + i),
            "sensor": f"s{i % 4}",
            "ts": START + datetime.timedelta(seconds=7 * i),
            "v": i % 13 * 1.5,
        }
        for i in range(900)
    ]
    categories = [{"_id": "root", "parent": None}] + [
        {"_id": f"n{i}", "parent": "root" if i < 3 else f"n{i % 3}"} for i in range(40)
    ]
    deals = [
        {"_id": i, "accountId": i % 7, "amount": 100 + i, "status": "open" if i % 2 else "won"} for i in range(150)
    ]
    accounts = [{"_id": i, "name": f"a{i}"} for i in range(7)]
    return {
        "customers": customers,
        "orders": orders,
        "readings": readings,
        "categories": categories,
        "deals": deals,
        "accounts": accounts,
    }


STEPS: dict[str, dict[str, Any]] = {
    "computed": {
        "step": "computed",
        "collection": "orders",
        "field": "total",
        "expression": "sum(items.price * items.qty)",
    },
    "attribute": {
        "step": "attribute",
        "collection": "orders",
        "fields": ["ram", "cpu"],
        "index": {"attributes.k": 1, "attributes.v": 1},
    },
    "polymorphic": {
        "step": "polymorphic",
        "collection": "orders",
        "rules": [{"when_has": "ram", "type": "laptop"}],
        "default": "other",
    },
    "schema_versioning": {
        "step": "schema_versioning",
        "collection": "orders",
        "rules": [{"when_has": "cpu", "version": 2}],
    },
    "approximation": {"step": "approximation", "collection": "orders", "field": "likes", "factor": 100},
    "tree": {"step": "tree", "collection": "categories", "parent_field": "parent"},
    "extended_reference": {
        "step": "extended_reference",
        "collection": "orders",
        "from": "customers",
        "local": "customerId",
        "fields": ["name", "email"],
        "as": "customer",
    },
    "pre_aggregation": {
        "step": "pre_aggregation",
        "collection": "accounts",
        "from": "deals",
        "foreign": "accountId",
        "compute": {"total": {"sum": "amount"}, "open": {"count": {"status": "open"}}},
        "into": "stats",
    },
    "document_versioning": {
        "step": "document_versioning",
        "collection": "orders",
        "history_collection": "orders_history",
    },
    "subset": {
        "step": "subset",
        "collection": "orders",
        "field": "items",
        "keep": 3,
        "full_collection": "orders_items",
    },
    "outlier": {
        "step": "outlier",
        "collection": "orders",
        "field": "items",
        "threshold": 20,
        "overflow_collection": "orders_items_overflow",
    },
    "bucket": {
        "step": "bucket",
        "collection": "readings",
        "series_key": "sensor",
        "time_field": "ts",
        "window_seconds": 300,
        "measurements": ["v"],
        "max_bucket_size": 50,
    },
    "set_field": {"step": "set_field", "collection": "orders", "field": "flags.reviewed", "value": False},
    "unset_field": {"step": "unset_field", "collection": "orders", "field": "status"},
    "rename_field": {"step": "rename_field", "collection": "orders", "from": "status", "to": "state"},
    "create_index": {"step": "create_index", "collection": "orders", "keys": {"status": 1, "createdAt": -1}},
    "copy_collection": {"step": "copy_collection", "collection": "customers", "to": "customers_copy"},
    "rename_collection": {"step": "rename_collection", "collection": "accounts", "to": "clients"},
}


def load(db: Any) -> None:
    """The dataset into ``db``, each collection dropped first."""
    for name, docs in dataset().items():
        db[name].drop()
        db[name].insert_many(docs)


def snapshot(db: Any) -> dict[str, list[bytes]]:
    """Every user collection as sorted raw BSON: byte-level comparison of states."""
    out = {}
    for name in sorted(db.list_collection_names()):
        if name.startswith("mongopat_") or name.startswith("system."):
            continue
        out[name] = sorted(bson.encode(doc) for doc in db[name].find())
    return out


def write(folder: Path, migration_id: str, *steps: dict[str, Any]) -> Path:
    """A migration file ``<migration_id>.yaml`` of ``steps`` in ``folder`` (made if new); the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{migration_id}.yaml").write_text(render(migration_id, migration_id, list(steps)))
    return folder


def runner(db: Any, folder: Path, **options: Any) -> Runner:
    """A server runner of ``folder``'s migrations, in small batches, giving up a held lock quickly."""
    return Runner(db, load_folder(folder), RunOptions(**{"batch_size": 37, "lock_timeout": 0.3, **options}))


def final_state_without_faults(mongo: Any, tmp_path: Path, steps: list[dict[str, Any]], **options: Any) -> Any:
    """The database's state after ``steps`` ran once on the dataset with nothing going wrong (in a database of
    its own beside the test's, dropped after)."""
    db = mongo.client[mongo.db_name + "_ref"]
    load(db)
    write(tmp_path / "ref", "0001_m", *steps)
    runner(db, tmp_path / "ref", **options).up()
    state = snapshot(db)
    mongo.client.drop_database(mongo.db_name + "_ref")
    return state
