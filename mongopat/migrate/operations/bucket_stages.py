"""The bucket step as aggregation stages and update pipelines: what a server computes when it moves readings
into buckets itself (``server/bucket_in_server.py`` runs them). Pure data, no driver.

Readings are taken a range of whole windows at a time. Each pending reading of the range first keeps its
own version beside itself (``stash``: ``{k: migration/step, d: $$ROOT}`` under :data:`ORIGINAL`); every
further stage reads that version, never the document, so what a bucket holds is exactly what the delete
compares against. Operators: ``$setWindowFields`` with ``$documentNumber`` (MongoDB 5.0), ``$setField``
(5.0), ``$bsonSize`` (4.4), ``$toLong``/``$toDate``/``$toInt`` (4.0), ``$lookup`` with ``localField`` and
``pipeline`` together (5.0), ``$merge`` into mongopat's own collections and, insert-only, into the collection (4.2),
``$out`` into mongopat's stage collection, ``$filter``, ``$let``, ``$cond``, ``$ifNull``, ``$isNumber``
(4.4), ``$type``, ``$in``, ``$size``, ``$max``, ``$min``, ``$floor``, ``$mod``, ``$mergeObjects``.
"""

from __future__ import annotations

from typing import Any

from mongopat.migrate.operations.base import ORIGINAL, Step
from mongopat.migrate.operations.bucket import sentinels_of

# What ``bucket.measured`` takes as a measurement: a BSON int32 or double (a BSON long decodes as ``Int64``,
# a subclass of ``int`` that it leaves out, as it leaves out bools and Decimal128).
MEASURED_TYPES = ["int", "double"]
# The fields a bucket holds: a series or time field of the same name would be overwritten by the bucket's.
BUCKET_FIELDS = frozenset({"_id", "start", "end", "count", "min", "max", "readings"})
STASHED = f"{ORIGINAL}.k"
STASH = f"${ORIGINAL}.d"
# A reading keeps its own version beside itself for a moment: one larger than this would not fit twice in
# 16 MB (the client side's catch-up moves it).
STASH_LIMIT = 7 * 1024 * 1024


def width_ms(step: Step) -> int:
    return int(step.params["window_seconds"]) * 1000


def window_start(step: Step, time: Any) -> dict[str, Any]:
    """The start of the window holding the date ``time`` (an expression), as ``bucket.window_start``:
    windows from the epoch, a reading before 1970 in the window that starts before it (a floor modulo:
    ``$mod`` keeps the dividend's sign)."""
    width = width_ms(step)
    ms = {"$toLong": time}
    return {"$toDate": {"$subtract": [ms, {"$mod": [{"$add": [{"$mod": [ms, width]}, width]}, width]}]}}


def pending_in(step: Step, low: Any, high: Any) -> dict[str, Any]:
    """Pending readings (``bucket.pending``) with a time in ``[low, high)`` (None: unbounded) that hold no
    stash and fit twice in a document."""
    time: dict[str, Any] = {"$type": "date"}
    if low is not None:
        time["$gte"] = low
    if high is not None:
        time["$lt"] = high
    return {
        "readings": {"$exists": False},
        step.params["series_key"]: {"$ne": None},
        step.params["time_field"]: time,
        ORIGINAL: {"$exists": False},
        "$expr": {"$lte": [{"$bsonSize": "$$ROOT"}, STASH_LIMIT]},
    }


def stash(key: str) -> list[dict[str, Any]]:
    """The update pipeline that keeps a reading's version in itself (atomic with the version it keeps)."""
    return [{"$set": {ORIGINAL: {"k": key, "d": "$$ROOT"}}}]


def unstash() -> list[dict[str, Any]]:
    return [{"$unset": ORIGINAL}]


def unchanged_since_stash() -> dict[str, Any]:
    """Matches a stashed reading still exactly its stash: equal field by field, in order, and of the same
    size (``$eq`` takes 1 and 1.0 as equal; their sizes differ)."""
    now = {"$setField": {"field": ORIGINAL, "input": "$$ROOT", "value": "$$REMOVE"}}
    return {
        "$expr": {
            "$let": {
                "vars": {"now": now},
                "in": {"$and": [{"$eq": ["$$now", STASH]}, {"$eq": [{"$bsonSize": "$$now"}, {"$bsonSize": STASH}]}]},
            }
        }
    }


def entry(step: Step, reading: str) -> dict[str, Any]:
    """A reading (the expression ``reading``) as a bucket holds it: without its series, fields in order."""
    return {"$setField": {"field": step.params["series_key"], "input": reading, "value": "$$REMOVE"}}


def _measured(step: Step, name: str, reading: str) -> dict[str, Any]:
    """A reading's measurement when ``bucket.measured`` takes it, else missing (an accumulator skips it)."""
    taken: dict[str, Any] = {"$in": [{"$type": "$$x"}, MEASURED_TYPES]}
    skip = sorted(sentinels_of(step).get(name) or [], key=repr)
    if skip:
        taken = {"$and": [taken, {"$not": [{"$in": ["$$x", skip]}]}]}
    return {"$let": {"vars": {"x": f"{reading}.{name}"}, "in": {"$cond": [taken, "$$x", "$$REMOVE"]}}}


def _bounds(names: list[str], accumulated: dict[str, str]) -> Any:
    """``min`` or ``max`` of a bucket, nested as the dotted names are (``air.temp`` in ``{air: {temp}}``),
    holding only the measurements a reading gave (an empty document is left out, as the client side's
    ``$min`` creates none)."""
    tree: dict[str, Any] = {}
    for name in names:
        node = tree
        *parents, leaf = name.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = name

    def expression(node: dict[str, Any]) -> Any:
        fields = {
            key: {"$ifNull": [f"${accumulated[value]}", "$$REMOVE"]} if isinstance(value, str) else expression(value)
            for key, value in node.items()
        }
        return {"$let": {"vars": {"b": fields}, "in": {"$cond": [{"$eq": ["$$b", {}]}, "$$REMOVE", "$$b"]}}}

    return expression(tree)


def staged_buckets(step: Step, key: str, collection: str, into: str) -> list[dict[str, Any]]:
    """The aggregation, on the collection, that writes into ``into`` the buckets of the readings stashed
    under ``key``: per series and window, in ``_id`` order, ``max_bucket_size`` readings a bucket (as
    ``BucketFill`` places a window's readings read in ``_id`` order), numbered after the window's newest
    bucket already in the collection. Built from the stashed versions, and deterministic: run again before
    its buckets are published, it writes the same ones."""
    p = step.params
    series, time, size = p["series_key"], p["time_field"], int(p["max_bucket_size"])
    names = list(p.get("measurements") or [])
    low = {name: f"lo{number}" for number, name in enumerate(names)}
    high = {name: f"hi{number}" for number, name in enumerate(names)}
    group: dict[str, Any] = {
        "_id": {"s": f"$r.{series}", "w": "$w", "j": {"$floor": {"$divide": [{"$subtract": ["$i", 1]}, size]}}},
        "readings": {"$push": entry(step, "$r")},
    }
    for name in names:
        group[low[name]] = {"$min": _measured(step, name, "$r")}
        group[high[name]] = {"$max": _measured(step, name, "$r")}
    newest = {
        "$lookup": {
            "from": collection,
            "localField": "_id.s",
            "foreignField": series,
            "let": {"w": "$_id.w"},
            "pipeline": [
                {"$match": {"$expr": {"$eq": ["$start", "$$w"]}, "readings": {"$type": "array"}}},
                {"$group": {"_id": None, "n": {"$max": {"$cond": [{"$isNumber": "$_id.n"}, "$_id.n", "$$REMOVE"]}}}},
            ],
            "as": "newest",
        }
    }
    after_newest = {
        "$let": {
            "vars": {"n": {"$max": _each("$newest", "n")}},
            "in": {"$cond": [{"$isNumber": "$$n"}, {"$add": ["$$n", 1]}, 0]},
        }
    }
    bucket: dict[str, Any] = {
        "_id": {"s": "$_id.s", "w": "$_id.w", "n": {"$toInt": {"$add": [after_newest, "$_id.j"]}}},
        series: "$_id.s",
        "start": "$_id.w",
        "end": {"$add": ["$_id.w", width_ms(step)]},
        "count": {"$size": "$readings"},
    }
    if names:
        bucket["min"] = _bounds(names, low)
        bucket["max"] = _bounds(names, high)
    bucket["readings"] = "$readings"
    return [
        {"$match": {STASHED: key}},
        {"$replaceWith": {"r": STASH}},
        {"$set": {"w": window_start(step, f"$r.{time}")}},
        {
            "$setWindowFields": {
                "partitionBy": {"s": f"$r.{series}", "w": "$w"},
                "sortBy": {"r._id": 1},
                "output": {"i": {"$documentNumber": {}}},
            }
        },
        {"$sort": {"i": 1}},  # a bucket's readings in _id order ($push keeps the order it is given)
        {"$group": group},
        newest,
        {"$replaceWith": bucket},
        {"$out": into},
    ]


def backups(step: Step, key: str, migration_id: str, index: int, into: str) -> list[dict[str, Any]]:
    """The aggregation, on the collection, that keeps each stashed reading's version and what a bucket holds
    of it in ``into`` (``mongopat_backup``; ``document_versions.backup_id``), for ``down``."""
    ident = {
        "m": {"$literal": migration_id},
        "s": {"$literal": index},
        "c": {"$literal": step.collection},
        "id": f"{STASH}._id",
    }
    return [
        {"$match": {STASHED: key}},
        {"$replaceWith": {"_id": ident, "original": STASH, "after": entry(step, STASH)}},
        {"$merge": {"into": into, "on": "_id", "whenMatched": "replace", "whenNotMatched": "insert"}},
    ]


def publish(collection: str) -> list[dict[str, Any]]:
    """The aggregation, on the stage, that inserts its buckets into the collection: insert-only (a bucket
    there already, published before a crash, is kept as the application may have changed it since)."""
    return [{"$merge": {"into": collection, "on": "_id", "whenMatched": "keepExisting", "whenNotMatched": "insert"}}]


def staged_readings(collection: str, present: bool) -> list[dict[str, Any]]:
    """The aggregation, on the stage, listing per bucket the readings whose document is still in the
    collection (``present``) or gone: ``{_id: bucket _id, ids: [reading _id]}``, one small reply."""
    return [
        {"$project": {"ids": _each("$readings", "_id")}},
        {"$unwind": "$ids"},
        {
            "$lookup": {
                "from": collection,
                "localField": "ids",
                "foreignField": "_id",
                "pipeline": [{"$project": {"_id": 1}}],
                "as": "found",
            }
        },
        {"$match": {"found": {"$ne": []} if present else {"$eq": []}}},
        {"$group": {"_id": "$_id", "ids": {"$push": "$ids"}}},
    ]


def stranded(collection: str) -> list[dict[str, Any]]:
    """The aggregation, on the stage, listing per staged bucket the readings its published bucket does not
    hold: ``{_id: bucket _id, ids: [reading _id]}``. None but those the application pulled (and deleted) since,
    unless a bucket of the same ``_id`` was there already and the insert-only ``$merge`` kept it: their
    readings must not be deleted."""
    published = {
        "$lookup": {
            "from": collection,
            "localField": "_id",
            "foreignField": "_id",
            "pipeline": [{"$project": {"ids": _each("$readings", "_id")}}],
            "as": "published",
        }
    }
    holds = {
        "$reduce": {
            "input": _each("$published", "ids"),
            "initialValue": [],
            "in": {"$concatArrays": ["$$value", {"$ifNull": ["$$this", []]}]},
        }
    }
    return [
        {"$project": {"ids": _each("$readings", "_id")}},
        published,
        {"$project": {"ids": {"$setDifference": ["$ids", holds]}}},
        {"$match": {"ids": {"$ne": []}}},
    ]


def _each(array: Any, field: str) -> dict[str, Any]:
    """``field`` of each document of ``array``, as ``"<array>.<field>"`` would give it."""
    return {"$map": {"input": array, "in": f"$$this.{field}"}}


def pull(ids_variable: str = "ids") -> list[dict[str, Any]]:
    """The update pipeline that takes the readings ``$$ids`` out of a bucket and counts them out: atomic,
    and the same when sent again (a reading already out is not counted twice)."""
    kept = {"$filter": {"input": "$readings", "cond": {"$not": [{"$in": ["$$this._id", f"$${ids_variable}"]}]}}}
    dropped = {"$subtract": [{"$size": "$readings"}, {"$size": "$$kept"}]}
    changed = {"readings": "$$kept", "count": {"$subtract": ["$count", dropped]}}
    return [{"$replaceWith": {"$let": {"vars": {"kept": kept}, "in": {"$mergeObjects": ["$$ROOT", changed]}}}}]


# -- down: buckets back into readings ----------------------------------------------------------------


def buckets_in(low: Any, high: Any) -> dict[str, Any]:
    """Buckets (``bucket.buckets_filter``) whose ``start`` is a date in ``[low, high)`` (None: unbounded)
    that hold no stash."""
    start: dict[str, Any] = {"$type": "date"}
    if low is not None:
        start["$gte"] = low
    if high is not None:
        start["$lt"] = high
    return {"readings": {"$type": "array"}, "count": {"$exists": True}, "start": start, ORIGINAL: {"$exists": False}}


def unpacked_readings(step: Step, key: str, migration_id: str, index: int, kept_in: str, into: str) -> list[Any]:
    """The aggregation, on the collection, that writes into ``into`` each reading of the buckets stashed
    under ``key`` as a document again (``{bucket, declined, doc}``), as ``bucket_steps._as_document`` makes
    it: the original kept in ``kept_in`` where the reading is still what ``up`` put in its bucket (``$eq``
    and ``$bsonSize``), else the reading with its series, in the original's field order where one is kept.
    A reading whose backup the client side made (its bytes, which the server cannot read) declines its
    bucket: every reading of it is ``declined``, and the bucket is the client side's."""
    series = step.params["series_key"]
    backup_id = {
        "m": {"$literal": migration_id},
        "s": {"$literal": index},
        "c": {"$literal": step.collection},
        "id": "$item._id",
    }
    merged = {"$mergeObjects": ["$$item", {series: "$$series"}]}
    left_alone = {
        "$and": [
            {"$eq": [{"$type": "$$kept.after"}, "object"]},
            {"$eq": ["$$kept.after", "$$item"]},
            {"$eq": [{"$bsonSize": "$$kept.after"}, {"$bsonSize": "$$item"}]},
        ]
    }
    document = {
        "$cond": [
            left_alone,
            "$$kept.original",
            {
                "$cond": [
                    {"$eq": [{"$type": "$$kept.original"}, "object"]},
                    _in_order_of("$$kept.original", merged),
                    merged,
                ]
            },
        ]
    }
    return [
        {"$match": {STASHED: key}},
        {"$project": {"_id": 0, "bucket": f"{STASH}._id", "series": f"{STASH}.{series}", "item": f"{STASH}.readings"}},
        {"$unwind": "$item"},
        {"$set": {"key": backup_id}},
        {"$lookup": {"from": kept_in, "localField": "key", "foreignField": "_id", "as": "kept"}},
        {"$set": {"kept": {"$arrayElemAt": ["$kept", 0]}}},
        {
            "$project": {
                "bucket": 1,
                "declined": {"$eq": [{"$type": "$kept.raw"}, "binData"]},
                "doc": {"$let": {"vars": {"item": "$item", "series": "$series", "kept": "$kept"}, "in": document}},
            }
        },
        # One reading declined declines its whole bucket: none of its readings is written here.
        {"$setWindowFields": {"partitionBy": "$bucket", "output": {"declined": {"$max": "$declined"}}}},
        {"$out": into},
    ]


def _in_order_of(original: str, document: Any) -> dict[str, Any]:
    """``document`` with its fields in the order ``original`` has them, then its others (``bucket.reading``)."""
    pairs = {"$objectToArray": document}
    order = _each({"$objectToArray": original}, "k")
    return {
        "$let": {
            "vars": {"pairs": pairs, "order": order},
            "in": {
                "$let": {
                    "vars": {"keys": _each("$$pairs", "k")},
                    "in": {
                        "$arrayToObject": {
                            "$concatArrays": [
                                {
                                    "$map": {
                                        "input": {
                                            "$filter": {"input": "$$order", "cond": {"$in": ["$$this", "$$keys"]}}
                                        },
                                        "in": {"$arrayElemAt": ["$$pairs", {"$indexOfArray": ["$$keys", "$$this"]}]},
                                    }
                                },
                                {"$filter": {"input": "$$pairs", "cond": {"$not": [{"$in": ["$$this.k", "$$order"]}]}}},
                            ]
                        }
                    },
                }
            },
        }
    }


def publish_readings(collection: str) -> list[dict[str, Any]]:
    """The aggregation, on the stage, that writes the readings not declined into the collection, replacing
    a document of the same ``_id`` (a bucket changed since its stash is unpacked again over them: while a
    bucket exists, it is what its readings are)."""
    return [
        {"$match": {"declined": False}},
        {"$replaceWith": "$doc"},
        {"$merge": {"into": collection, "on": "_id", "whenMatched": "replace", "whenNotMatched": "insert"}},
    ]


def pulled_since_stash(key: str) -> list[dict[str, Any]]:
    """The aggregation, on the collection, listing the readings each bucket still stashed under ``key``
    held at its stash and holds no more (the application deleted them): ``{ids: [reading _id]}``."""
    return [
        {"$match": {STASHED: key}},
        {"$project": {"ids": {"$setDifference": [_each(f"{STASH}.readings", "_id"), _each("$readings", "_id")]}}},
        {"$match": {"ids": {"$ne": []}}},
    ]
