"""``down`` inside the server for the documents left alone since an ``up`` that ran there: each gets its
original back by an update pipeline, for every step whose transform is stages over the document alone
(``server_stages`` without ``server_range_key``: the field steps, computed, approximation, attribute,
map_to_array, subset, outlier, the versioning steps; top-level or nested). Run after
``unset_in_server.py``, on the backups it left.

A backup the server made (``in_server_steps._settle``: original and ``after`` as documents) and not marked
``raced`` is taken a range at a time in ``_id`` order:

1. one aggregation returns the range's originals (raw BSON: their exact bytes);
2. one update pipeline over those documents (``_id $in``, the originals as ``let`` variables, in the simple
   collation) rebuilds from each original what the step's stages make of it and compares that with the
   document as it is (``$eq`` and ``$bsonSize``, as ``after`` is checked on ``up``). Equal: the document
   is left alone since ``up``, and becomes its original followed by ``__mongopat_original: {k}`` (this
   step's mark of a restore). Not equal (changed by the application since): it stays as it is. Each
   document's update is atomic on every server: an application's write lands before it (and the document
   is no longer equal) or after it (on the original);
3. one aggregation returns the ``_id``s of the range's documents neither marked nor equal to their
   original (changed, or deleted): usually none;
4. one update pipeline ``$unset`` of the mark: the original's bytes again;
5. one delete of the range's other backups. Those of step 3 go to the client side's ``down``, which gives a
   changed document the step's inverse and leaves a deleted one deleted.

So the original travels twice (the reply and the update) where the client side's ``down`` moves it, what
``up`` made of it and the document as it is, and writes it with the whole document as its condition.

A ``down`` stopped anywhere takes the range again: a document restored is no longer equal to what the
stages make of its original, the update leaves it, and step 3 finds it marked or equal to its original.
An application reading the range meanwhile sees the mark for the moment between steps 2 and 4; one that
replaces a marked document whole in that moment has its document given to the client side's ``down``
(which leaves it as it is in the old shape, and gives it the step's inverse in the new one). A collection
whose ``_id``s are of several BSON types never ran ``up`` inside the server, so ``$indexOfArray`` over a
range's ``_id``s finds each document's own original.

Operators: update pipelines with ``$set``, ``$unset``, ``$replaceWith`` (MongoDB 4.2), ``let`` on
``update`` (5.0), ``$setField`` (5.0), ``$bsonSize`` (4.4), ``$mergeObjects``, ``$indexOfArray``,
``$arrayElemAt``, ``$cond``, ``$lookup`` (``localField``/``foreignField``): all in MongoDB 5.0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bson import MaxKey, MinKey

from mongopat.migrate.bookkeeping import BACKUP
from mongopat.migrate.contracts import StepRun
from mongopat.migrate.operations import OPERATIONS
from mongopat.migrate.operations.base import ORIGINAL
from mongopat.migrate.server.command_lists import fitting

if TYPE_CHECKING:
    from mongopat.migrate.server.in_server_steps import InServerSteps

# Of originals in one update's let variables (a command is at most 16 MiB; an original at most 7 MiB,
# ``in_server_steps.STASH_LIMIT``, so one alone always fits).
ORIGINALS_BYTES = 4 * 1024 * 1024
# The backups taken here: made inside the server, and not changed between the rewrite and the backup.
TAKEN = {"original": {"$type": "object"}, "after": {"$type": "object"}, "raced": {"$ne": True}}
IDS, ORIGINALS = "ids", "originals"


def restore_in_server(steps: InServerSteps, run: StepRun) -> int:
    """Give the documents left alone since ``up`` their originals inside the server (see the module);
    returns how many backups it took out. Nothing with ``--client-side``, or for a step whose stages read
    other documents."""
    operation = OPERATIONS[run.step.name]
    stages = operation.server_stages(run.step)
    if stages is None or operation.server_range_key(run.step) is not None or steps.options.client_side:
        return 0
    mark = restore_mark(run)
    backups, collection = steps.db[BACKUP], steps.db[run.step.collection]
    key = {"m": run.migration_id, "s": run.index, "c": run.step.collection}
    low: dict[str, Any] = {"$gte": {**key, "id": MinKey()}}
    done = 0
    while True:
        ranged = {"$and": [{"_id": {**low, "$lte": {**key, "id": MaxKey()}}}, TAKEN]}
        found = steps._collection(BACKUP).aggregate(
            [
                {"$match": ranged},
                {"$sort": {"_id": 1}},
                {"$limit": steps.options.batch_size},
                {"$project": {"_id": 0, "original": 1}},
            ]
        )
        originals = [backup["original"] for backup in found]  # raw BSON: the bytes as kept
        if not originals:
            return done
        ids = [original["_id"] for original in originals]
        for some in fitting(originals, lambda original: len(original.raw), ORIGINALS_BYTES):
            collection.update_many(
                {"_id": {"$in": [original["_id"] for original in some]}},
                restore_stages(stages, mark),
                # $literal: a let variable is an expression, and an original's "$price" would be a path.
                let={IDS: {"$literal": [original["_id"] for original in some]}, ORIGINALS: {"$literal": some}},
                collation={"locale": "simple"},  # the stages compare as Python does, whatever the collection's
            )
        span = {"_id": {**low, "$lte": {**key, "id": ids[-1]}}}
        changed = _not_restored(steps, run, span, mark)
        collection.update_many(
            {"_id": {"$gte": ids[0], "$lte": ids[-1]}, f"{ORIGINAL}.k": mark}, [{"$unset": ORIGINAL}]
        )
        # The same backups: nothing but this run writes mongopat_backup while it holds the lock.
        gone = backups.delete_many({"$and": [span, TAKEN, {"_id.id": {"$nin": changed}}]}).deleted_count
        done += gone
        low = {"$gt": {**key, "id": ids[-1]}}
        steps.lock.renew()


def restore_mark(run: StepRun) -> str:
    """What marks a document this step's ``down`` restored (never an ``up``'s original: ``stash_key``)."""
    return f"{run.migration_id}/{run.index}/down"


def restore_stages(stages: list[dict[str, Any]], mark: str) -> list[dict[str, Any]]:
    """The update pipeline of step 2: the document's original (from the let variables) transformed by the
    step's ``stages`` as on ``up`` (with the document as it is kept under ORIGINAL, which the stages
    leave), then the original marked where that equals the document, else the document unchanged."""
    at = {"$indexOfArray": [f"$${IDS}", "$_id"]}
    kept = {"now": "$$ROOT", "was": {"$arrayElemAt": [f"$${ORIGINALS}", at]}}
    made = {"$setField": {"field": ORIGINAL, "input": "$$ROOT", "value": "$$REMOVE"}}
    now = f"${ORIGINAL}.now"
    same = {"$and": [{"$eq": [made, now]}, {"$eq": [{"$bsonSize": made}, {"$bsonSize": now}]}]}
    return [
        {"$set": {ORIGINAL: kept}},
        {"$replaceWith": {"$mergeObjects": [f"${ORIGINAL}.was", {ORIGINAL: f"${ORIGINAL}"}]}},
        *stages,
        {"$replaceWith": {"$cond": [same, {"$mergeObjects": [f"${ORIGINAL}.was", {ORIGINAL: {"k": mark}}]}, now]}},
    ]


def _not_restored(steps: InServerSteps, run: StepRun, span: dict[str, Any], mark: str) -> list[Any]:
    """The ``_id``s of the range's documents step 2 did not restore: neither marked by it nor equal to their
    original (a document restored by a run stopped before step 4 or 5 is one or the other)."""
    original = "$original"
    restored = {
        "$or": [
            {"$eq": [f"$now.{ORIGINAL}.k", mark]},
            {"$and": [{"$eq": ["$now", original]}, {"$eq": [{"$bsonSize": "$now"}, {"$bsonSize": original}]}]},
        ]
    }
    found = steps.db[BACKUP].aggregate(
        [
            {"$match": {"$and": [span, TAKEN]}},
            {"$lookup": {"from": run.step.collection, "localField": "_id.id", "foreignField": "_id", "as": "now"}},
            {"$set": {"now": {"$arrayElemAt": ["$now", 0]}}},
            {"$match": {"$expr": {"$not": [restored]}}},
            {"$project": {"_id": 0, "id": "$_id.id"}},
        ]
    )
    return [backup["id"] for backup in found]
