"""``down`` inside the server for the documents left alone since an ``up`` that ran there: each gets its
original back by an update pipeline, for every step whose transform is stages over the document alone
(``server_stages`` without ``server_range_key``: the field steps, computed, approximation, attribute,
map_to_array, subset, outlier, the versioning steps; top-level or nested). Run after
``unset_in_server.py``, on the backups it left.

A backup the server made (``in_server_steps._settle``: original and ``after`` as documents) and not marked
``raced`` is taken a range at a time in ``_id`` order:

1. one aggregation returns, for each backup whose document is still ``after`` (left alone since ``up``),
   what its original holds that ``after`` does not (``patches``): the top-level fields ``up`` changed or
   took out, each with its value and its place among the original's fields, and the names of those it
   added. ``up``'s stages only set and unset fields, so every other field is ``after``'s, in the
   original's order: only the patch travels;
2. one update pipeline over those documents (their ``_id`` range, and ``$in`` the ``_id``s sent with the
   patches as ``let`` variables; in the simple collation) rebuilds each original from the document and its
   patch, transforms it by the step's stages as ``up`` did, and compares that with the document as it is
   (``$eq`` and ``$bsonSize``, as ``after`` is checked on ``up``). Equal: the document becomes the original followed by
   ``__mongopat_original: {k}`` (this step's mark of a restore). Not equal (the application changed a
   field the step writes since step 1): it stays as it is. Each document's update is atomic on every
   server: an application's write lands before it or after it (on the original). One that lands
   between steps 1 and 2 on a field the step neither reads nor writes is kept, in the original's order;
3. one aggregation returns the ``_id``s of the range's documents neither marked nor equal to their
   original (changed, or deleted): usually none;
4. one update pipeline ``$unset`` of the mark: the original's bytes again;
5. one delete of the range's other backups. Those of step 3 go to the client side's ``down``, which gives a
   changed document the step's inverse and leaves a deleted one deleted.

So what travels is the part of each document the step changed, twice (the reply and the update), and its
``_id`` twice; the client side's ``down`` moves the original, what ``up`` made of it and the document as
it is, and writes it with the whole document as its condition.

A ``down`` stopped anywhere takes the range again: a document restored is no longer ``after`` (step 1
leaves it out), and step 3 finds it marked or equal to its original.
An application reading the range meanwhile sees the mark for the moment between steps 2 and 4; one that
replaces a marked document whole in that moment has its document given to the client side's ``down``
(which leaves it as it is in the old shape, and gives it the step's inverse in the new one). A collection
whose ``_id``s are of several BSON types never ran ``up`` inside the server, so ``$indexOfArray`` over a
range's ``_id``s finds each document's own patch.

Operators: update pipelines with ``$set``, ``$unset``, ``$replaceWith`` (MongoDB 4.2), ``let`` on
``update`` (5.0), ``$setField`` (5.0), ``$bsonSize`` (4.4), ``$objectToArray``, ``$arrayToObject``,
``$reduce``, ``$slice``, ``$concatArrays``, ``$range``, ``$filter``, ``$map``, ``$let``, ``$type``,
``$mergeObjects``, ``$indexOfArray``, ``$arrayElemAt``, ``$cond``, ``$lookup``
(``localField``/``foreignField``): all in MongoDB 5.0.
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

# Of patches in one update's let variables (a command is at most 16 MiB; a patch is at most an original,
# at most 7 MiB: ``in_server_steps.STASH_LIMIT``, so one alone always fits).
PATCHES_BYTES = 4 * 1024 * 1024
# The backups taken here: made inside the server, and not changed between the rewrite and the backup.
TAKEN = {"original": {"$type": "object"}, "after": {"$type": "object"}, "raced": {"$ne": True}}
IDS, PATCHES = "ids", "patches"


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
                *patches(run.step.collection),
            ]
        )
        rows = list(found)  # raw BSON: each original's values as kept
        if not rows:
            return done
        ids = [row["i"] for row in rows]
        left_alone = [row for row in rows if row["q"] is not None]
        for some in fitting(left_alone, lambda row: len(row.raw), PATCHES_BYTES):
            chosen = [row["i"] for row in some]
            collection.update_many(
                # The documents by their range and the let variable: their _ids travel once more, not twice.
                {"_id": {"$gte": chosen[0], "$lte": chosen[-1]}, "$expr": {"$in": ["$_id", f"$${IDS}"]}},
                restore_stages(stages, mark),
                # $literal: a let variable is an expression, and an original's "$price" would be a path.
                let={IDS: {"$literal": chosen}, PATCHES: {"$literal": [row["q"] for row in some]}},
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


def _same(one: Any, other: Any) -> dict[str, Any]:
    """Whether two values are the same: equal (``$eq``), of one BSON type and of one size."""
    return {
        "$and": [
            {"$eq": [one, other]},
            {"$eq": [{"$type": one}, {"$type": other}]},
            {"$eq": [{"$bsonSize": {"v": one}}, {"$bsonSize": {"v": other}}]},
        ]
    }


def _names(pairs: str) -> dict[str, Any]:
    """The ``k`` of each element of ``pairs`` (``$map``: each element's own value, never a path through the
    array)."""
    return {"$map": {"input": pairs, "as": "e", "in": "$$e.k"}}


def patches(name: str) -> list[dict[str, Any]]:
    """The stages giving, for each backup (in ``_id`` order), its document's ``_id`` (``i``) and, where the
    document is still ``after`` (left alone since ``up``), what the original holds that ``after`` does not
    (``q``, else null): the names of the top-level fields ``up`` added (``d``) and each top-level field of
    the original ``after`` lacks or holds otherwise, with its place among the original's fields (``p``:
    ``{i, k, v}``, in the original's order). ``up``'s stages only set and unset fields, so the others are
    ``after``'s, in the original's order."""
    original, after = {"$objectToArray": "$original"}, {"$objectToArray": "$after"}
    at = {"$indexOfArray": [_names("$$a"), "$$f.k"]}
    value = {"$let": {"vars": {"e": {"$arrayElemAt": ["$$a", "$$j"]}}, "in": "$$e.v"}}
    kept = {"$and": [{"$gte": ["$$j", 0]}, _same("$$f.v", value)]}
    field = {"$arrayElemAt": ["$$o", "$$n"]}
    differs = {"$let": {"vars": {"f": field}, "in": {"$let": {"vars": {"j": at}, "in": {"$not": [kept]}}}}}
    changed = {"$filter": {"input": {"$range": [0, {"$size": "$$o"}]}, "as": "n", "cond": differs}}
    entry = {"$let": {"vars": {"f": field}, "in": {"i": "$$n", "k": "$$f.k", "v": "$$f.v"}}}
    added = {"$filter": {"input": "$$a", "as": "f", "cond": {"$not": [{"$in": ["$$f.k", _names("$$o")]}]}}}
    patch = {
        "$let": {
            "vars": {"o": original, "a": after},
            "in": {"d": {"$map": {"input": added, "as": "f", "in": "$$f.k"}},
                   "p": {"$map": {"input": changed, "as": "n", "in": entry}}},
        }
    }  # fmt: skip
    now = {"$arrayElemAt": ["$now", 0]}
    left_alone = {"$and": [{"$eq": [now, "$after"]}, {"$eq": [{"$bsonSize": now}, {"$bsonSize": "$after"}]}]}
    return [
        {"$lookup": {"from": name, "localField": "_id.id", "foreignField": "_id", "as": "now"}},
        {"$project": {"_id": 0, "i": "$_id.id", "q": {"$cond": [left_alone, patch, None]}}},
    ]


def restore_stages(stages: list[dict[str, Any]], mark: str) -> list[dict[str, Any]]:
    """The update pipeline of step 2: the document's original rebuilt from the document and its patch (the
    let variables; see :func:`patches`), transformed by the step's ``stages`` as on ``up`` (with the
    document as it is kept under ORIGINAL, which the stages leave), then the original marked where that
    equals the document, else the document unchanged."""
    patch = {"$arrayElemAt": [f"$${PATCHES}", {"$indexOfArray": [f"$${IDS}", "$_id"]}]}
    replaced = {"$concatArrays": ["$$q.d", _names("$$q.p")]}
    kept = {"$filter": {"input": {"$objectToArray": "$$ROOT"}, "as": "f",
                        "cond": {"$not": [{"$in": ["$$f.k", replaced]}]}}}  # fmt: skip
    # Each field of the original put back at its place, in the original's order: the fields before it are
    # all there by then.
    before = {"$cond": [{"$eq": ["$$this.i", 0]}, [], {"$slice": ["$$value", "$$this.i"]}]}
    after = {"$slice": ["$$value", "$$this.i", {"$add": [{"$size": "$$value"}, 1]}]}
    put = {"$concatArrays": [before, [{"k": "$$this.k", "v": "$$this.v"}], after]}
    rebuilt = {"$arrayToObject": {"$reduce": {"input": "$$q.p", "initialValue": kept, "in": put}}}
    kept_aside = {"$let": {"vars": {"q": patch}, "in": {"now": "$$ROOT", "was": rebuilt}}}
    made = {"$setField": {"field": ORIGINAL, "input": "$$ROOT", "value": "$$REMOVE"}}
    now = f"${ORIGINAL}.now"
    same = {"$and": [{"$eq": [made, now]}, {"$eq": [{"$bsonSize": made}, {"$bsonSize": now}]}]}
    return [
        {"$set": {ORIGINAL: kept_aside}},
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
