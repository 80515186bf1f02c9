"""Document steps a server computes itself, for steps whose transform is aggregation stages
(``server_stages``): no document travels between the server and mongopat.

Each batch is an ``_id`` range holding ``batch_size`` pending documents, taken in four commands:

1. **backup**: the range's pending documents, each with what the step's stages make of it, merged into
   ``mongopat_backup`` as ``{_id: backup id, original, after, run}`` (``run`` names the batch); the side
   documents of a step that makes them are merged from these backups next;
2. **ids**: the ``_id``s of this batch's backups (a few bytes a document);
3. **rewrite**: ``update`` with the same stages as a pipeline, on those ``_id``s still pending. Each
   document's update is atomic, on MongoDB as on the test server: it transforms the document as it is at
   that moment, so an application's write landing between the backup and the rewrite is transformed with
   the rest, never overwritten. A document inserted into the range meanwhile has no backup and is not
   rewritten (the catch-up takes it); one deleted stays deleted;
4. **check**: backups whose document is not what ``up`` made of the original they keep (changed between
   backup and rewrite, or since) are marked ``raced``: ``down`` gives those the step's inverse, never the
   original. A document rewritten from the application's version keeps the side documents of the version
   backed up; and one whose change the step's own transform erases (``unset`` of the very field it wrote)
   cannot be told from one left alone, so ``down`` gives it the original kept.

``down`` restores a document still equal to ``after`` byte for byte and gives one the application
changed since the step's inverse (``document_steps.py``). Checkpoints are the ranges' last ``_id``s: a crash
anywhere replays at most one range, whose backups are taken again from the documents still pending.

Operators: update pipelines with ``$set``, ``$unset`` and ``$replaceWith`` (MongoDB 4.2), ``$merge`` into
mongopat's own collections (4.2), ``$setField`` for nested paths (5.0, ``operations/server_paths.py``), the
steps' ``$isNumber`` (4.4), ``$type``, ``$switch``, ``$cond``, ``$let``, ``$lookup`` and ``$$REMOVE``: all
in MongoDB 5.0. A collection is taken on the client side instead when it holds ``_id``s of several BSON
types (a range stays within one), or is sharded and the step writes its shard key.
"""

from __future__ import annotations

from typing import Any

from bson import MinKey, ObjectId
from pymongo import ASCENDING, DESCENDING
from pymongo.errors import OperationFailure

from mongopat.migrate.bookkeeping import BACKUP
from mongopat.migrate.contracts import StepRun, StepState
from mongopat.migrate.operations import OPERATIONS
from mongopat.migrate.runner import CATCH_UP_PASSES, StepOutcome, count
from mongopat.migrate.server.steps import ServerSteps
from mongopat.migrate.steps import Step

# Where a document's original rides along while the stages transform it: a name no application uses.
ORIGINAL = "__mongopat_original"


class InServerSteps(ServerSteps):
    """Document steps computed by the server (the base of ``document_steps.DocumentSteps``)."""

    def in_server(self, run: StepRun) -> bool:
        """Whether the step runs inside the server; decided once per step and kept in the changelog, so a
        resumed run goes on the way it began."""
        if run.state.get("in_server") is not None:
            return bool(run.state["in_server"])
        why = self._client_side_because(run.step, run.state)
        self.changelog.step(run.migration_id, run.index, in_server=why is None, client_side=why)
        run.state["in_server"], run.state["client_side"] = why is None, why
        return why is None

    def _client_side_because(self, step: Step, state: StepState) -> str | None:
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
        if (why := self._shard_key_because(step)) is not None:
            return why
        ends = [
            found[0]["_id"]
            for direction in (ASCENDING, DESCENDING)
            if (found := list(self.db[name].find({}, {"_id": 1}, sort=[("_id", direction)], limit=1)))
        ]
        if len({_bracket(value) for value in ends}) > 1:
            return "its _ids are of several BSON types"
        return None

    def _shard_key_because(self, step: Step) -> str | None:
        """Why a sharded collection stays on the client side: the step writes its shard key (or the key
        cannot be read). The rewrite is an update of the collection's own documents, which a sharded
        collection takes on every shard at once; the backups' ``$merge`` goes into mongopat's own
        unsharded collection, so neither needs the shard key in ``on``."""
        try:
            if not self.db.command("collStats", step.collection).get("sharded"):
                return None
        except OperationFailure:
            return None  # no such collection yet: nothing to shard
        try:
            found = self.db.client["config"]["collections"].find_one({"_id": f"{self.db.name}.{step.collection}"})
        except OperationFailure:
            found = None
        key = list((found or {}).get("key") or {})
        if not key:
            return "the collection is sharded and its shard key could not be read"
        written = OPERATIONS[step.name].written_fields(step)
        touched = [k for k in key if any(w == k or w.startswith(k + ".") or k.startswith(w + ".") for w in written)]
        return f"the step writes {', '.join(touched)}, part of the shard key" if touched else None

    # -- the run -----------------------------------------------------------------------------------

    def in_server_step(self, run: StepRun) -> StepOutcome:
        outcome = StepOutcome(
            read=run.state.get("read", 0), written=run.state.get("written", 0), stats=dict(run.state.get("stats") or {})
        )
        total = self.db[run.step.collection].estimated_document_count()
        self.throttle.start(outcome.read)
        budget = (total or 0) // self.options.batch_size + 2  # documents inserted behind it: the catch-up's
        self._in_server_pass(run, outcome, run.state.get("last_id"), run.state.get("has_last", False),
                             budget, total)  # fmt: skip
        self.in_server_catch_up(run, outcome)
        return outcome

    def in_server_catch_up(self, run: StepRun, outcome: StepOutcome) -> int:
        """Passes over the documents still pending (changed by the application between a backup and its
        rewrite, or written in the old shape since), as the client-side runner's catch-up passes; returns
        the documents migrated."""
        where = server_pending(run.step)
        collection = self.db[run.step.collection]
        ceiling = collection.estimated_document_count() // self.options.batch_size + 2
        migrated = 0
        for _pass in range(CATCH_UP_PASSES):
            budget = min(collection.count_documents(where) // self.options.batch_size + 1, ceiling)
            done = self._in_server_pass(run, outcome, None, False, budget, None)
            migrated += done
            if not done:
                break
        outcome.stats["caught_up"] = outcome.stats.get("caught_up", 0) + migrated
        outcome.stats["pending_left"] = collection.count_documents(where)
        return migrated

    def _in_server_pass(
        self,
        run: StepRun,
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
            taken = self._in_server_batch(run, last, has_last, outcome.stats)
            if taken is None:
                break
            last, has_last = taken[0], True
            backed, written = taken[1], taken[2]
            outcome.read += backed
            outcome.written += written
            rewritten += written
            self._checkpoint(run, outcome, backed, written, last, total)
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
        self, run: StepRun, last: Any, has_last: bool, stats: dict[str, Any]
    ) -> tuple[Any, int, int] | None:
        """Back up and rewrite the next range of pending documents; (its last _id, documents backed up,
        documents rewritten), or None when none is left after ``last``."""
        name, collection = run.step.collection, self.db[run.step.collection]
        operation = OPERATIONS[run.step.name]
        stages = operation.server_stages(run.step) or []
        where = server_pending(run.step)
        after = {"_id": {"$gt": last}} if has_last else {}
        query = {"$and": [after, where]} if after else where
        found, high = self._range_end(collection, query)
        if not found:
            return None
        span = {"_id": {"$lte": high, **({"$gt": last} if has_last else {})}}
        batch = ObjectId()  # names this batch's backups
        key = {"m": run.migration_id, "s": run.index, "c": name}
        collection.aggregate(
            [
                {"$match": {"$and": [span, where]}},
                {"$set": {ORIGINAL: "$$ROOT"}},
                *stages,
                {"$replaceWith": {"original": f"${ORIGINAL}", "after": "$$ROOT"}},
                {"$project": {f"after.{ORIGINAL}": 0}},
                {
                    "$replaceWith": {
                        "_id": {**{k: {"$literal": v} for k, v in key.items()}, "id": "$original._id"},
                        "original": "$original",
                        "after": "$after",
                        "run": batch,
                    }
                },
                {"$merge": {"into": BACKUP, "on": "_id", "whenMatched": "replace", "whenNotMatched": "insert"}},
            ]
        )
        # This batch's backups: a range of mongopat_backup's _id (documents compare field by field).
        lower = {**key, "id": last} if has_last else {**key, "id": MinKey()}
        mine = {"_id": {"$gt" if has_last else "$gte": lower, "$lte": {**key, "id": high}}, "run": batch}
        side = operation.server_side_documents(run.step) or {}
        for collection_name, side_stages in side.items():
            # Before the rewrite, as the client side writes them: a crash after it leaves none missing.
            self._side_documents(BACKUP, [{"$match": mine}, {"$replaceWith": "$after"}], side_stages, collection_name)
        # Only documents with a backup are rewritten: one inserted into the range since has none, and
        # stays pending for the catch-up.
        ids = self.db[BACKUP].aggregate([{"$match": mine}, {"$project": {"_id": 0, "i": "$_id.id"}}])
        backed = [d["i"] for d in ids]
        rewritten = collection.update_many({"$and": [{"_id": {"$in": backed}}, where]}, stages).matched_count
        raced = self._mark_raced(name, mine)
        gone = self._side_documents_of_deleted(run.step, name, mine, side) if side else 0
        if gone:
            count(stats, "deleted_meanwhile", gone)
        count(stats, "transformed", rewritten)
        if raced:
            count(stats, "conflicts", raced)
        return high, len(backed), rewritten

    def _side_documents(
        self, source: str, pipeline: list[dict[str, Any]], stages: list[dict[str, Any]], into: str
    ) -> None:
        self.db[source].aggregate(
            [*pipeline, *stages, {"$merge": {"into": into, "on": "_id", "whenMatched": "replace",
                                             "whenNotMatched": "insert"}}]
        )  # fmt: skip

    def _mark_raced(self, name: str, mine: dict[str, Any]) -> int:
        """Mark this batch's backups whose document is not what ``up`` made of the original kept: the
        application changed it between the backup and the rewrite (which then rewrote the application's
        version), or since, or deleted it. ``down`` gives those the step's inverse, never the original
        (``document_versions.left_alone``). Returns how many were marked."""
        self.db[BACKUP].aggregate(
            [
                {"$match": mine},
                {"$lookup": {"from": name, "localField": "_id.id", "foreignField": "_id", "as": "now"}},
                {"$match": {"$expr": {"$ne": [{"$arrayElemAt": ["$now", 0]}, "$after"]}}},
                {"$project": {"_id": 1, "raced": {"$literal": True}}},
                # mongopat_backup is mongopat's alone: nothing else writes it meanwhile.
                {"$merge": {"into": BACKUP, "on": "_id", "whenMatched": "merge", "whenNotMatched": "discard"}},
            ]
        )
        return self.db[BACKUP].count_documents({**mine, "raced": True})


def server_pending(step: Step) -> dict[str, Any]:
    """The filter of the documents the in-server path takes: the step's own, or the exact expression it
    gives where its filter would read a nested path through arrays."""
    operation = OPERATIONS[step.name]
    exact = operation.server_pending(step)
    return operation.pending(step) if exact is None else {"$expr": exact}


def _bracket(value: Any) -> str:
    """A value's BSON comparison bracket, as far as ranges of _id care (numbers are one)."""
    name = type(value).__name__
    return "number" if name in ("int", "Int64", "float", "Decimal128") else name
