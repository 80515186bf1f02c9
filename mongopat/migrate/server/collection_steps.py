"""Collection steps on a live server (indexes, copies, renames, validators): each step's module applies,
reverts and verifies it through the server's catalog (``catalog.py``)."""

from __future__ import annotations

from typing import Any

from mongopat.migrate.operations import COLLECTION_OPERATIONS
from mongopat.migrate.runner import StepOutcome
from mongopat.migrate.server.steps import ServerSteps
from mongopat.migrate.steps import Step


class CollectionSteps(ServerSteps):
    def run(self, migration_id: str, index: int, step: Step, state: dict[str, Any]) -> StepOutcome:
        catalog = self.runner.catalog(migration_id, index, state)
        COLLECTION_OPERATIONS[step.name].apply(step, catalog)
        return StepOutcome(catalog.read, catalog.written, catalog.stats)

    def revert(self, migration_id: str, index: int, step: Step, state: dict[str, Any]) -> None:
        COLLECTION_OPERATIONS[step.name].revert(step, self.runner.catalog(migration_id, index, state))

    def verify(self, migration_id: str, index: int, step: Step, state: dict[str, Any]) -> list[str]:
        if state.get("state") != "applied":
            return []
        return COLLECTION_OPERATIONS[step.name].verify(step, self.runner.catalog(migration_id, index, state))

    def would(self, migration_id: str, index: int, step: Step) -> list[str]:
        return COLLECTION_OPERATIONS[step.name].dry_run(step, self.runner.catalog(migration_id, index, {}))
