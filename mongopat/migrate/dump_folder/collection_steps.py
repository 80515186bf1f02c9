"""Collection steps on a dump folder (indexes, copies, renames, validators): each step's module applies,
reverts and verifies it through the folder's catalog (``catalog.py``)."""

from __future__ import annotations

from typing import Any

from mongopat.migrate.dump_folder.rewrites import DumpSteps
from mongopat.migrate.operations import COLLECTION_OPERATIONS
from mongopat.migrate.steps import Step


class CollectionFiles(DumpSteps):
    def run(self, migration_id: str, index: int, step: Step, state: dict[str, Any]) -> None:
        if state.get("phase") == "done":
            return
        runner = self.runner
        catalog = runner.catalog(migration_id, index, step, state)
        COLLECTION_OPERATIONS[step.name].apply(step, catalog)
        runner.changelog.step(migration_id, index, read=catalog.read, written=catalog.written, stats=catalog.stats)
        runner.changelog.add_counts(migration_id, catalog.read, catalog.written)
        runner.lock.renew()

    def revert(self, migration_id: str, index: int, step: Step, state: dict[str, Any]) -> None:
        catalog = self.runner.catalog(migration_id, index, step, state)
        COLLECTION_OPERATIONS[step.name].revert(step, catalog)
        catalog.reverted()

    def verify(self, migration_id: str, index: int, step: Step, state: dict[str, Any]) -> list[str]:
        if state.get("state") == "pending":
            return []
        return COLLECTION_OPERATIONS[step.name].verify(step, self.runner.catalog(migration_id, index, step, state))

    def would(self, migration_id: str, index: int, step: Step) -> list[str]:
        return COLLECTION_OPERATIONS[step.name].dry_run(step, self.runner.catalog(migration_id, index, step, {}))
