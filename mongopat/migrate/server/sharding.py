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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pymongo.errors import OperationFailure

# The unique index mongopat creates for a sharded side collection's $merge (down drops it with the other
# indexes the collection did not have).
MERGE_INDEX = "mongopat_merge_on"


@dataclass(frozen=True)
class Sharding:
    """Whether a collection is sharded, and on which key (empty when it is not, or when the key could not
    be read from ``config.collections``)."""

    sharded: bool
    key: dict[str, Any]


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
    return Sharding(True, dict((found or {}).get("key") or {}))


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
