"""Document steps of every type and a corpus of documents of mixed shapes, for tests that hold two ways
of running a step on a dump folder to the same files (partial reading, worker processes)."""

from __future__ import annotations

import datetime
import random
from typing import Any

from bson import Decimal128, Int64, ObjectId

from mongopat.sources.extjson import encode_document

# (id, step): every step type that declares read_fields, on top-level and nested paths, renames onto a field
# the document may hold, rules, expressions over an array, and a side collection copying the document.
CASES: list[tuple[str, dict[str, Any]]] = [
    ("set_field", {"step": "set_field", "field": "reviewed", "value": True}),
    ("set_field_nested", {"step": "set_field", "field": "flags.reviewed", "value": False}),
    ("set_field_only_missing", {"step": "set_field", "field": "status", "value": "new", "only_missing": True}),
    ("set_field_document", {"step": "set_field", "field": "meta", "value": {"by": "ops", "n": 2}}),
    ("unset_field", {"step": "unset_field", "field": "status"}),
    ("unset_field_nested", {"step": "unset_field", "field": "flags.hot"}),
    ("rename_field", {"step": "rename_field", "from": "status", "to": "state"}),
    ("rename_field_out_of", {"step": "rename_field", "from": "flags.hot", "to": "hot"}),
    ("rename_field_into", {"step": "rename_field", "from": "qty", "to": "flags.qty"}),
    ("computed_array", {"step": "computed", "field": "total", "expression": "sum(items.price * items.qty)"}),
    ("computed_scalar", {"step": "computed", "field": "double", "expression": "qty * 2"}),
    ("computed_nested_target", {"step": "computed", "field": "flags.double", "expression": "qty + likes"}),
    ("approximation", {"step": "approximation", "field": "likes", "factor": 100}),
    ("schema_versioning", {"step": "schema_versioning", "rules": [{"when_has": "cpu", "version": 2}]}),
    ("polymorphic", {"step": "polymorphic", "rules": [{"when_has": "ram", "type": "laptop"}], "default": "other"}),
    ("document_versioning", {"step": "document_versioning", "history_collection": "orders_history"}),
    ("subset", {"step": "subset", "field": "items", "keep": 2, "full_collection": "orders_items"}),
    (
        "subset_sorted",
        {"step": "subset", "field": "items", "keep": 1, "sort": {"price": -1}, "full_collection": "orders_items"},
    ),  # fmt: skip
    ("outlier", {"step": "outlier", "field": "items", "threshold": 1, "overflow_collection": "orders_more"}),
    ("attribute", {"step": "attribute", "fields": ["cpu", "ram"], "into": "specs"}),
    ("map_to_array", {"step": "map_to_array", "field": "prices", "layout": "pair"}),
    ("tree", {"step": "tree", "parent_field": "parent"}),
    (
        "extended_reference",
        {
            "step": "extended_reference",
            "from": "customers",
            "local": "customerId",
            "fields": ["name", "tier"],
            "as": "customer",
        },
    ),  # fmt: skip
    (
        "pre_aggregation",
        {
            "step": "pre_aggregation",
            "from": "customers",
            "local": "customerId",
            "foreign": "_id",
            "compute": {"tiers": {"sum": "tier"}},
            "into": "stats",
        },
    ),  # fmt: skip
]


def _number(rng: random.Random) -> Any:
    return rng.choice([3, -7, 2.5, 0.1, Int64(2**40), Decimal128("1.10"), float("nan"), None, "12", True])


def _document(rng: random.Random, number: int) -> dict[str, Any]:
    """A document of mixed shapes: every field optional, of varying types, in varying order."""
    fields: dict[str, Any] = {
        "status": rng.choice(["paid", "new", None, 5]),
        "qty": _number(rng),
        "likes": _number(rng),
        "items": [{"price": _number(rng), "qty": _number(rng), "sku": f"s{i}"} for i in range(rng.randrange(4))]
        if rng.random() < 0.8
        else "none",
        "flags": rng.choice([{"hot": True, "reviewed": True}, {"hot": None}, {}, "x", [1, {"hot": 1}]]),
        "createdAt": datetime.datetime(2026, 1, 1) + datetime.timedelta(seconds=rng.randrange(10**8), milliseconds=7),
        "ref": ObjectId(),
        "cpu": "m1",
        "ram": 16,
        "state": "old",
        "reviewed": rng.choice([True, False, "yes"]),
        "total": 0,
        "meta": {"by": "ops", "n": 2},
        "notes": None,
        "tags": ["a", {"b": [None, 1.5]}],
        "prices": rng.choice([{"eur": 2.5, "usd": Decimal128("3")}, {}, "none"]),
        "parent": rng.choice([None, number - 1, number - 2]) if number > 1 else None,
        "customerId": rng.choice([1, 2, 3, 99, "c1", None]),
        "specs": rng.choice([[{"k": "gpu", "v": 1}], "x"]),
    }
    kept = [name for name in fields if rng.random() < 0.6]
    rng.shuffle(kept)
    document = {name: fields[name] for name in kept}
    identifier = rng.choice([number, ObjectId(), f"doc-{number}"])
    if rng.random() < 0.1:  # _id not first: a copy of the document still puts its own _id first
        return {**document, "_id": identifier}
    return {"_id": identifier, **document}


CUSTOMERS = b"".join(
    encode_document(customer) + b"\n"
    for customer in [{"_id": 1, "name": "Ann", "tier": 2}, {"_id": 2, "name": "Bo"}, {"_id": "c1", "tier": 1.5}]
)
_RNG = random.Random(7)
DOCUMENTS = [_document(_RNG, n) for n in range(300)]
