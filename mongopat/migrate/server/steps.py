"""What every kind of step gets from the server backend (:class:`~mongopat.migrate.server.runner.Runner`):
its database, options, changelog, lock and throttle, the scan in ``_id`` order, the catch-up passes and
the checkpoint after each batch. The kinds are ``document_steps.py``, ``bucket_steps.py`` and
``collection_steps.py``.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from pymongo.errors import OperationFailure

from mongopat.migrate.bookkeeping import BACKUP
from mongopat.migrate.catalog import index_name
from mongopat.migrate.contracts import MigrationLock, StepRun
from mongopat.migrate.operations import STEP_OPERATIONS
from mongopat.migrate.runner import KindRunner, RunOptions, StepOutcome
from mongopat.migrate.server.document_versions import step_backups
from mongopat.migrate.steps import Step

if TYPE_CHECKING:
    from mongopat.migrate.bookkeeping import Changelog
    from mongopat.migrate.server.runner import Runner
    from mongopat.migrate.throttling import Throttle

# BSON sort order of _id type brackets: $gt only matches within a bracket, so the scan hops between them.
TYPE_BRACKETS = [
    "minKey",
    "null",
    "number",
    "string",
    "object",
    "array",
    "binData",
    "objectId",
    "bool",
    "date",
    "timestamp",
    "regex",
    "maxKey",
]
PYTHON_BRACKET = {
    "NoneType": "null",
    "int": "number",
    "Int64": "number",
    "float": "number",
    "Decimal128": "number",
    "str": "string",
    "dict": "object",
    "SON": "object",
    "list": "array",
    "bytes": "binData",
    "Binary": "binData",
    "ObjectId": "objectId",
    "bool": "bool",
    "datetime": "date",
    "Timestamp": "timestamp",
    "Regex": "regex",
    "MinKey": "minKey",
    "MaxKey": "maxKey",
}


class ServerSteps(KindRunner):
    """One kind of step on a live server."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    @property
    def db(self) -> Any:
        return self.runner.db

    @property
    def options(self) -> RunOptions:
        return self.runner.options

    @property
    def changelog(self) -> Changelog:
        return self.runner.changelog

    @property
    def lock(self) -> MigrationLock:
        return self.runner.lock

    @property
    def throttle(self) -> Throttle:
        return self.runner.throttle

    def backups_kept(self, run: StepRun) -> int:
        """The backups the step keeps in ``mongopat_backup``, one per document it rewrote."""
        return int(self.db[BACKUP].count_documents(step_backups(run.migration_id, run.index)))

    def _collection(self, name: str) -> Any:
        return self.runner.raw_collection(name)

    def collection_options(self, name: str) -> dict[str, Any]:
        """The options ``listCollections`` gives ``name`` (its validator, its default collation...); empty
        when it has none, is not there, or the user may not list collections."""
        try:
            found = list(self.db.list_collections(filter={"name": name}))
        except OperationFailure:
            return {}
        return dict((found[0].get("options") or {}) if found else {})

    def create_own_index(
        self, run: StepRun, keys: dict[str, Any], stats: dict[str, Any], named_in: str = "indexes_added", **options: Any
    ) -> None:
        """Create one of the step's indexes on its own collection. One it did not find is named in
        ``stats[named_in]``, recorded before it is created (a crash in between leaves a name whose drop
        finds nothing): ``down`` drops only those, never an index the collection had before. An index the
        step only works with while it runs is named in ``work_indexes`` (``drop_work_indexes``)."""
        wanted = list(keys.items())
        collection = self.db[run.step.collection]
        if any(list(dict(spec["key"]).items()) == wanted for spec in collection.list_indexes()):
            return
        added = stats.setdefault(named_in, [])
        if index_name(keys) not in added:
            added.append(index_name(keys))
            self.changelog.step(run.migration_id, run.index, stats=stats)
        collection.create_index(wanted, name=index_name(keys), **options)

    def drop_own_indexes(self, step: Step, stats: dict[str, Any]) -> None:
        """Drop the indexes the step added to its own collection (``create_own_index``)."""
        added = set(stats.get("indexes_added") or [])
        for collection, keys in STEP_OPERATIONS[step.name].indexes(step):
            if collection == step.collection and index_name(dict(keys)) in added:
                # It may be gone already (dropped by hand, or by a down that stopped after it).
                with contextlib.suppress(OperationFailure, KeyError, ValueError):
                    self.db[collection].drop_index(list(dict(keys).items()))

    def drop_work_indexes(self, run: StepRun, stats: dict[str, Any]) -> None:
        """Drop the indexes the step made to work with (``create_own_index`` into ``work_indexes``; one gone
        already: nothing to do)."""
        for name in stats.pop("work_indexes", None) or []:
            with contextlib.suppress(OperationFailure):
                self.db[run.step.collection].drop_index(name)
        self.changelog.step(run.migration_id, run.index, stats=stats)

    def missing_indexes(self, run: StepRun) -> list[str]:
        """The step's indexes (``indexes()`` of its module) that its collections lack; none asked of a
        stamped step, whose data was put in shape by someone else."""
        if (run.state.get("stats") or {}).get("stamped"):
            return []
        return self.runner.catalog(run).missing_indexes(STEP_OPERATIONS[run.step.name].indexes(run.step))

    # -- what only a server has: an application writing the old shape after up --------------------

    def pending_filter(self, run: StepRun) -> dict[str, Any] | None:
        """The documents the step leaves in the old shape, or None for a step without any."""
        return None

    def old_shape(self, run: StepRun) -> int | None:
        where = self.pending_filter(run)
        return None if where is None else self.db[run.step.collection].count_documents(where)

    def catch_up(self, run: StepRun, outcome: StepOutcome) -> int:
        """Migrate what the application wrote in the old shape since the step was applied; returns the
        documents migrated."""
        return 0

    def transformed_sample(self, step: Step, size: int) -> list[Any]:
        """A random sample of the step's collection as the step would leave it (nothing written)."""
        return []
