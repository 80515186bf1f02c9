"""Document steps a server computes itself, for steps whose transform is aggregation stages
(``server_stages``): no document travels between the server and mongopat.

Each batch is an ``_id`` range holding ``batch_size`` pending documents, taken by two aggregations:

1. **backup**: the range's pending documents, each with what the step's stages make of it, merged into
   ``mongopat_backup`` as ``{_id: backup id, original, after, run}`` (``run`` names the batch);
2. **rewrite**: the batch's backups merged back into the collection, each replacing its document only
   while the document is still the original: ``$merge``'s ``whenMatched`` pipeline compares them inside
   the server, atomically per document. A document the application changed in between is left as the
   application wrote it, still pending: a catch-up pass takes it again from a new backup. One it deleted
   stays deleted (``whenNotMatched: discard``).

A document inserted into a range between the two has no backup of this run, so it is not rewritten
either. ``down`` restores a document still equal to ``after`` byte for byte and gives one the application
changed since the step's inverse (``document_steps.py``). Checkpoints are the ranges' last ``_id``s: a crash
anywhere replays at most one range, whose backups are taken again from the documents still pending.

Operators: ``$merge`` with a ``whenMatched`` pipeline and ``$$new``, ``$set``, ``$unset`` and
``$replaceWith`` stages (MongoDB 4.2), the steps' ``$isNumber`` (4.4), ``$type``, ``$switch``, ``$cond``,
``$let`` and ``$$REMOVE``: all in MongoDB 5.0. A collection is taken on the client side instead when it is
sharded (``$merge`` into it would need its shard key in ``on``) or holds ``_id``s of several BSON types (a
range stays within one).
"""

from __future__ import annotations

from typing import Any

from bson import MinKey, ObjectId
from pymongo import ASCENDING, DESCENDING
from pymongo.errors import OperationFailure

from mongopat.migrate.bookkeeping import BACKUP
from mongopat.migrate.operations import OPERATIONS
from mongopat.migrate.runner import CATCH_UP_PASSES, StepOutcome, count
from mongopat.migrate.steps import Step

# Where a document's original rides along while the stages transform it: a name no application uses.
ORIGINAL = "__mongopat_original"


class InServerSteps:
    """Document steps computed by the server (mixed into ``document_steps.DocumentSteps``)."""

    db: Any
    options: Any
    changelog: Any
    throttle: Any

    def in_server(self, migration_id: str, index: int, step: Step, state: dict[str, Any]) -> bool:
        """Whether the step runs inside the server; decided once per step and kept in the changelog, so a
        resumed run goes on the way it began."""
        if state.get("in_server") is not None:
            return bool(state["in_server"])
        why = self._client_side_because(step, state)
        self.changelog.step(migration_id, index, in_server=why is None, client_side=why)
        state.update(in_server=why is None, client_side=why)
        return why is None

    def _client_side_because(self, step: Step, state: dict[str, Any]) -> str | None:
        operation = OPERATIONS[step.name]
        if operation.server_stages(step) is None or operation.server_side_documents(step) is None:
            return "the step's transform needs Python"
        if self.options.client_side:
            return "--client-side"
        if not type(getattr(self.db, "client", None)).__module__.startswith("pymongo"):
            return "the embedded engine runs no $merge"
        if state.get("has_last") or state.get("ranges"):
            return "resumed from a run that began on the client side"
        name = step.collection
        try:
            if self.db.command("collStats", name).get("sharded"):
                return "the collection is sharded"
        except OperationFailure:
            pass  # no such collection yet: nothing to shard
        ends = [
            found[0]["_id"]
            for direction in (ASCENDING, DESCENDING)
            if (found := list(self.db[name].find({}, {"_id": 1}, sort=[("_id", direction)], limit=1)))
        ]
        if len({_bracket(value) for value in ends}) > 1:
            return "its _ids are of several BSON types"
        return None

    # -- the run -----------------------------------------------------------------------------------

    def in_server_step(self, migration_id: str, index: int, step: Step, state: dict[str, Any]) -> StepOutcome:
        outcome = StepOutcome(
            read=state.get("read", 0), written=state.get("written", 0), stats=dict(state.get("stats") or {})
        )
        total = self.db[step.collection].estimated_document_count()
        self.throttle.start(outcome.read)
        budget = (total or 0) // self.options.batch_size + 2  # documents inserted behind it: the catch-up's
        self._in_server_pass(migration_id, index, step, outcome, state.get("last_id"), state.get("has_last", False),
                             budget, total)  # fmt: skip
        self.in_server_catch_up(migration_id, index, step, outcome)
        return outcome

    def in_server_catch_up(self, migration_id: str, index: int, step: Step, outcome: StepOutcome) -> int:
        """Passes over the documents still pending (changed by the application between a backup and its
        rewrite, or written in the old shape since), as the client-side runner's catch-up passes; returns
        the documents migrated."""
        where = OPERATIONS[step.name].pending(step)
        collection = self.db[step.collection]
        ceiling = collection.estimated_document_count() // self.options.batch_size + 2
        migrated = 0
        for _pass in range(CATCH_UP_PASSES):
            budget = min(collection.count_documents(where) // self.options.batch_size + 1, ceiling)
            done = self._in_server_pass(migration_id, index, step, outcome, None, False, budget, None)
            migrated += done
            if not done:
                break
        outcome.stats["caught_up"] = outcome.stats.get("caught_up", 0) + migrated
        outcome.stats["pending_left"] = collection.count_documents(where)
        return migrated

    def _in_server_pass(
        self,
        migration_id: str,
        index: int,
        step: Step,
        outcome: StepOutcome,
        last: Any,
        has_last: bool,
        budget: int,
        total: int | None,
    ) -> int:
        """Ranges of pending documents after ``last``, at most ``budget`` of them, each checkpointed;
        returns the documents rewritten."""
        rewritten = 0
        for _batch in range(budget):
            taken = self._in_server_batch(migration_id, index, step, last, has_last, outcome.stats)
            if taken is None:
                break
            last, has_last = taken[0], True
            backed, written = taken[1], taken[2]
            outcome.read += backed
            outcome.written += written
            rewritten += written
            self._checkpoint(migration_id, index, outcome, backed, written, last, total)  # type: ignore[attr-defined]
        return rewritten

    def _side_documents_of_deleted(
        self, step: Step, name: str, mine: dict[str, Any], side: dict[str, list[dict[str, Any]]]
    ) -> int:
        """Remove the side documents of this batch's documents the application deleted between their
        backup and their rewrite (as the client side does); returns how many documents that was."""
        gone = [{"$match": mine}, {"$lookup": {"from": name, "localField": "_id.id", "foreignField": "_id",
                                               "as": "current"}}, {"$match": {"current": {"$size": 0}}}]  # fmt: skip
        deleted = 0
        for collection_name, stages in side.items():
            ids = [d["_id"] for d in self.db[BACKUP].aggregate([*gone, {"$replaceWith": "$after"}, *stages,
                                                                {"$project": {"_id": 1}}])]  # fmt: skip
            if ids:
                self.db[collection_name].delete_many({"_id": {"$in": ids}})
            deleted = max(deleted, len(ids))
        return deleted

    def _range_end(self, collection: Any, query: dict[str, Any]) -> tuple[bool, Any]:
        """Whether ``query`` matches a document, and the end of the next range: the ``_id`` of the
        batch_size-th match in ``_id`` order, or of the last one when fewer match (one small reply)."""
        for skip, order in ((self.options.batch_size - 1, ASCENDING), (0, DESCENDING)):
            for doc in collection.find(query, {"_id": 1}, sort=[("_id", order)], skip=skip, limit=1):
                return True, doc["_id"]
        return False, None

    def _in_server_batch(
        self, migration_id: str, index: int, step: Step, last: Any, has_last: bool, stats: dict[str, Any]
    ) -> tuple[Any, int, int] | None:
        """Back up and rewrite the next range of pending documents; (its last _id, documents backed up,
        documents rewritten), or None when none is left after ``last``."""
        name, collection = step.collection, self.db[step.collection]
        operation = OPERATIONS[step.name]
        where = operation.pending(step)
        after = {"_id": {"$gt": last}} if has_last else {}
        query = {"$and": [after, where]} if after else where
        found, high = self._range_end(collection, query)
        if not found:
            return None
        span = {"_id": {"$lte": high, **({"$gt": last} if has_last else {})}}
        run = ObjectId()
        key = {"m": migration_id, "s": index, "c": name}
        collection.aggregate(
            [
                {"$match": {"$and": [span, where]}},
                {"$set": {ORIGINAL: "$$ROOT"}},
                *(operation.server_stages(step) or []),
                {"$replaceWith": {"original": f"${ORIGINAL}", "after": "$$ROOT"}},
                {"$project": {f"after.{ORIGINAL}": 0}},
                {
                    "$replaceWith": {
                        "_id": {**{k: {"$literal": v} for k, v in key.items()}, "id": "$original._id"},
                        "original": "$original",
                        "after": "$after",
                        "run": run,
                    }
                },
                {"$merge": {"into": BACKUP, "on": "_id", "whenMatched": "replace", "whenNotMatched": "insert"}},
            ]
        )
        # This batch's backups: a range of mongopat_backup's _id (documents compare field by field).
        lower = {**key, "id": last} if has_last else {**key, "id": MinKey()}
        mine = {"_id": {"$gt" if has_last else "$gte": lower, "$lte": {**key, "id": high}}, "run": run}
        side = operation.server_side_documents(step) or {}
        for collection_name, stages in side.items():
            # Before the rewrite, as the client side writes them: a crash after it leaves none missing.
            self.db[BACKUP].aggregate(
                [
                    {"$match": mine},
                    {"$replaceWith": "$after"},
                    *stages,
                    {"$merge": {"into": collection_name, "on": "_id", "whenMatched": "replace",
                                "whenNotMatched": "insert"}},
                ]
            )  # fmt: skip
        still_original = {"$eq": ["$$ROOT", "$$new.original"]}  # every field, in order (MongoDB's comparison)
        self.db[BACKUP].aggregate(
            [
                {"$match": mine},
                {"$replaceWith": {"_id": "$_id.id", "original": "$original", "after": "$after"}},
                {
                    "$merge": {
                        "into": name,
                        "on": "_id",
                        "whenMatched": [{"$replaceWith": {"$cond": [still_original, "$$new.after", "$$ROOT"]}}],
                        "whenNotMatched": "discard",
                    }
                },
            ]
        )
        backed = self.db[BACKUP].count_documents(mine)
        # Those still pending lost a race with the application (or were inserted into the range meanwhile).
        left = collection.count_documents({"$and": [span, where]})
        gone = self._side_documents_of_deleted(step, name, mine, side) if side else 0
        written = max(0, backed - left - gone)
        if gone:
            count(stats, "deleted_meanwhile", gone)
        count(stats, "transformed", written)
        if backed > written:
            count(stats, "conflicts", backed - written)
        return high, backed, written


def _bracket(value: Any) -> str:
    """A value's BSON comparison bracket, as far as ranges of _id care (numbers are one)."""
    name = type(value).__name__
    return "number" if name in ("int", "Int64", "float", "Decimal128") else name
