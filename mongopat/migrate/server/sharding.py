"""What a deployment says about a collection's sharding, and how the in-server path's ``$merge`` writes into
a collection of the application's (a step's side collection) that may be sharded.

MongoDB matches a ``$merge``'s documents on ``on``. Into an unsharded collection that is ``_id``. Into a
sharded one, ``on`` must hold every field of the shard key, and a unique index must hold exactly the ``on``
fields (in any order). Left out, ``on`` would default to the shard key's fields and ``_id`` (the document
key); mongopat names them, so that the stage says what it matches on whatever a server's default, and makes
the index a named ``on`` needs: ``on`` is the shard key's fields followed by ``_id``, and the unique index
``{<shard key fields>: 1, _id: 1}`` is created when none holds those fields (a unique index whose prefix is
the shard key is one a sharded collection accepts). Every document the ``$merge`` writes must hold each
``on`` field, neither null nor an array (MongoDB refuses it mid-run otherwise): a shard key naming a field
the step's side documents may lack keeps the step on the client side, whose inserts take any shard key.

A collection sharded on a range of ``_id`` (``{_id: 1}``, alone or first) has its chunks read from
``config.chunks`` (``shard_breaks``): the in-server path ends a range where the chunks pass from one shard to
another, so that each of a range's commands goes to one shard. Ranges are in ``_id`` order, so a collection
sharded on anything else (a hashed ``_id`` included) gains nothing from its chunks: each command goes to
every shard.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

from pymongo.errors import OperationFailure, PyMongoError

from mongopat.bson_order import (
    BOOLEAN,
    DATE,
    MAX_KEY,
    MIN_KEY,
    NULL,
    NUMBER,
    OBJECT_ID,
    STRING,
    bson_order,
    type_bracket,
)

# The unique index mongopat creates for a sharded side collection's $merge (down drops it with the other
# indexes the collection did not have).
MERGE_INDEX = "mongopat_merge_on"


@dataclass(frozen=True)
class Sharding:
    """Whether a collection is sharded, and on which key (empty when it is not, or when the key could not
    be read from ``config.collections``)."""

    sharded: bool
    key: dict[str, Any]
    # config.collections' uuid, which names the collection's chunks in config.chunks from MongoDB 5.0 on
    # (before, chunks name it by ``ns``).
    uuid: Any = None


def sharding(db: Any, name: str) -> Sharding:
    """What ``collStats`` and ``config.collections`` say of ``name`` (a collection not there yet is
    unsharded)."""
    try:
        if not db.command("collStats", name).get("sharded"):
            return Sharding(False, {})
    except OperationFailure:
        return Sharding(False, {})
    try:
        found = db.client["config"]["collections"].find_one({"_id": f"{db.name}.{name}"})
    except OperationFailure:
        found = None
    return Sharding(True, dict((found or {}).get("key") or {}), (found or {}).get("uuid"))


# The types of _id whose chunk bounds ranges follow; a bound of another type (a document, an array, binary
# and so on: valid, rare in a range-sharded _id) leaves the ranges as they are unsharded.
_FOLLOWED = frozenset({MIN_KEY, NULL, NUMBER, STRING, OBJECT_ID, BOOLEAN, DATE, MAX_KEY})


def followed_order(value: Any) -> tuple[Any, ...] | None:
    """``value``'s sort key in MongoDB's order (``mongopat.bson_order``) when its type is one ranges follow;
    None for others."""
    key = bson_order(value)
    return key if key[0] in _FOLLOWED else None  # a key starts with its type's bracket


@dataclass(frozen=True)
class ShardBreaks:
    """The ``_id`` values, ascending, at which a collection sharded on a range of ``_id`` passes from one
    shard's chunks to another's (a range ending below each goes to one shard); empty for any other
    collection. Their sort keys are computed once: every range of a pass looks them up."""

    values: tuple[Any, ...] = ()
    # The shard of each stretch: below the first break, between two, above the last (one more than the
    # breaks; empty where they were not read from config.chunks).
    shards: tuple[str, ...] = ()
    keys: tuple[tuple[Any, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        keys = tuple(followed_order(value) for value in self.values)
        if any(key is None for key in keys):
            raise ValueError("a break of a type whose order is not followed")
        if self.shards and len(self.shards) != len(self.values) + 1:
            raise ValueError("a shard for each stretch between breaks")
        object.__setattr__(self, "keys", keys)

    def stretches(self) -> list[tuple[Any, Any, str]]:
        """``(low, high, shard)`` of each stretch, ``[low, high)``, None where unbounded: each lies in one
        shard's chunks."""
        if not self.shards:
            return []
        bounds = [None, *self.values, None]
        return [(bounds[n], bounds[n + 1], shard) for n, shard in enumerate(self.shards)]

    def after(self, value: Any, has_value: bool) -> tuple[Any, tuple[Any, ...]] | None:
        """The first break above ``value`` (the first of all when there is no value), with its sort key; None
        when none is, or when ``value`` is of a type whose order is not followed."""
        if not has_value:
            return (self.values[0], self.keys[0]) if self.values else None
        key = followed_order(value)
        if key is None:
            return None
        position = bisect_right(self.keys, key)
        return (self.values[position], self.keys[position]) if position < len(self.values) else None

    @staticmethod
    def below(value: Any, brk_key: tuple[Any, ...]) -> bool:
        """Whether ``value`` sorts before the break whose sort key is ``brk_key``."""
        key = followed_order(value)
        return key is not None and key < brk_key


def shard_breaks(db: Any, name: str) -> ShardBreaks:
    """Where ``name``'s chunks pass from one shard to another, for a collection sharded on a range of
    ``_id`` (``config.chunks``, sorted by the server); empty when it is not, or when ``config`` cannot be
    read (the ranges are then what they are unsharded: every command is still right, on more shards)."""
    found = sharding(db, name)
    if not found.sharded or next(iter(found.key.items()), None) != ("_id", 1):
        return ShardBreaks()
    # By uuid from MongoDB 5.0 on (feature compatibility 5.0), by ns before.
    namespace = {"ns": f"{db.name}.{name}"}
    chunks_of = {"$or": [{"uuid": found.uuid}, namespace]} if found.uuid is not None else namespace
    breaks: list[Any] = []
    shards: list[str] = []
    try:
        for chunk in db.client["config"]["chunks"].find(chunks_of, {"min": 1, "shard": 1}, sort=[("min", 1)]):
            low = (chunk.get("min") or {}).get("_id")
            if shards and chunk.get("shard") != shards[-1]:
                if type_bracket(low) not in _FOLLOWED - {MIN_KEY, MAX_KEY}:
                    return ShardBreaks()
                breaks.append(low)
            if not shards or chunk.get("shard") != shards[-1]:
                shards.append(str(chunk.get("shard")))
    except PyMongoError:
        return ShardBreaks()
    return ShardBreaks(tuple(breaks), tuple(shards) if breaks else ())


class NotMergeable(Exception):
    """Why the step's side documents cannot be merged into their collection inside the server."""


@dataclass(frozen=True)
class MergeTarget:
    """A collection the in-server path merges side documents into, and the fields that match them."""

    into: str
    on: tuple[str, ...] = ("_id",)

    def stage(self) -> dict[str, Any]:
        """The ``$merge`` stage: a side document made again replaces the one made before."""
        on: str | list[str] = "_id" if self.on == ("_id",) else list(self.on)
        return {"$merge": {"into": self.into, "on": on, "whenMatched": "replace", "whenNotMatched": "insert"}}


def merge_target(db: Any, into: str, holds: frozenset[str]) -> MergeTarget:
    """How side documents holding the fields ``holds`` (never null nor an array) are merged into ``into``;
    the unique index a sharded collection's ``on`` needs is created when missing. Raises NotMergeable."""
    found = sharding(db, into)
    if not found.sharded:
        return MergeTarget(into)
    if not found.key:
        raise NotMergeable(f"its side collection {into} is sharded and its shard key could not be read")
    lacking = [field for field in found.key if field not in holds]
    if lacking:
        raise NotMergeable(
            f"its side collection {into} is sharded on {found.key}, and not every side document holds "
            f"{', '.join(lacking)}"
        )
    on = tuple(dict.fromkeys([*found.key, "_id"]))
    if on != ("_id",):
        ensure_unique_index(db[into], on)
    return MergeTarget(into, on)


def ensure_unique_index(collection: Any, on: tuple[str, ...]) -> None:
    """A unique index holding exactly the fields ``on``, made when the collection has none."""
    try:
        for index in collection.list_indexes():
            if index.get("unique") and set(index["key"]) == set(on):
                return
        collection.create_index([(field, 1) for field in on], unique=True, name=MERGE_INDEX)
    except OperationFailure as exc:
        reason = (exc.details or {}).get("errmsg") or str(exc)
        raise NotMergeable(
            f"its side collection {collection.name} needs a unique index on {', '.join(on)} for $merge: {reason}"
        ) from None
