"""``down`` inside the server for a step whose inverse, for a document whose original lacked the top-level
fields it wrote, is update stages over the document as it is (``DocumentOperation.server_inverse``): the
fields taken out for computed, extended_reference, tree, pre_aggregation, document_versioning,
schema_versioning and polymorphic (``AddsFields``); for set_field with a text or null value, the field
taken out where it still holds that value. Only after an ``up`` that ran inside the server.

A backup the server made (``in_server_steps._settle``: the original and ``after``, what ``up`` made of it,
as documents) is taken here when the original had none of those fields and ``after`` without them is the
original again (equal, and of the same BSON size: no value retyped). For its document, the stages then
give what the client side's ``down`` writes either way:
- left alone since ``up`` (it is ``after``): the original's bytes, which the client side restores;
- changed by the application since: the step's inverse, which the stages are;
- deleted: nothing.

Ranges of backups in ``_id`` order, each: one aggregation returns the document ``_id``s (nothing else
travels; packed into arrays, ``command_lists.packed_rows``), one update pipeline applies the stages to
those documents, in the simple collation (``$unset`` and ``$set`` in a pipeline: MongoDB 4.2;
``$setField``, with which ``after`` loses the fields: 5.0; ``$bsonSize``: 4.4), one delete takes the
range's backups out. Each document's update is atomic on every server, so an application writing
meanwhile loses nothing, and no ``$merge`` writes the application's collection. A run stopped anywhere
takes the same range again: its documents already lack the fields, and the update leaves them as they
are. Backups not taken here (made on the client side, or whose original had one of the fields) go to
``restore_in_server.py`` and the client side's ``down`` (``DocumentSteps.revert``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bson import MaxKey, MinKey

from mongopat.migrate.bookkeeping import BACKUP
from mongopat.migrate.contracts import StepRun
from mongopat.migrate.operations import OPERATIONS
from mongopat.migrate.server.command_lists import fitting, id_bytes, packed_rows, unpacked

if TYPE_CHECKING:
    from mongopat.migrate.server.in_server_steps import InServerSteps

ID_BYTES = 4 * 1024 * 1024  # of document _ids in one update's filter


def unset_in_server(steps: InServerSteps, run: StepRun) -> int:
    """Revert what this module can of the step's documents (see the module); returns how many backups
    it took. Only after an ``up`` that ran inside the server (``DocumentSteps.revert`` asks); nothing with
    ``--client-side``."""
    inverse = OPERATIONS[run.step.name].server_inverse(run.step)
    if inverse is None or steps.options.client_side:
        return 0
    fields = inverse.fields
    backups, collection = steps.db[BACKUP], steps.db[run.step.collection]
    key = {"m": run.migration_id, "s": run.index, "c": run.step.collection}
    taken = _restored_by_unsetting(fields)
    low: dict[str, Any] = {"$gte": {**key, "id": MinKey()}}
    done = 0
    while True:
        ranged = {"$and": [{"_id": {**low, "$lte": {**key, "id": MaxKey()}}}, taken]}
        found = backups.aggregate(
            [
                {"$match": ranged},
                {"$sort": {"_id": 1}},
                {"$limit": steps.options.batch_size},
                {"$project": {"_id": 0, "i": "$_id.id"}},
                *packed_rows("i", False),
            ]
        )
        ids = [row["i"] for row in unpacked(found)]
        if not ids:
            return done
        for some in _fitting(ids):
            # The simple collation: the stages compare values as Python does, whatever the collection's.
            collection.update_many({"_id": {"$in": some}}, inverse.stages, collation={"locale": "simple"})
        # The same backups: nothing but this run writes mongopat_backup while it holds the lock.
        span = {"_id": {**low, "$lte": {**key, "id": ids[-1]}}}
        backups.delete_many({"$and": [span, taken]})
        done += len(ids)
        low = {"$gt": {**key, "id": ids[-1]}}
        steps.lock.renew()


def _fitting(ids: list[Any]) -> list[list[Any]]:
    """``ids`` in lists of at most ``ID_BYTES`` encoded (large ``_id``s are allowed)."""
    return fitting(ids, id_bytes, ID_BYTES)


def _restored_by_unsetting(fields: list[str]) -> dict[str, Any]:
    """The filter of the backups made inside the server whose original had none of ``fields`` and is
    ``after`` without them, in value and in BSON size."""
    after: Any = "$after"
    for name in fields:
        after = {"$setField": {"field": name, "input": after, "value": "$$REMOVE"}}
    same = [{"$eq": ["$original", after]}, {"$eq": [{"$bsonSize": "$original"}, {"$bsonSize": after}]}]
    return {
        "original": {"$type": "object"},
        "after": {"$type": "object"},
        **{f"original.{name}": {"$exists": False} for name in fields},
        "$expr": {"$and": same},
    }
