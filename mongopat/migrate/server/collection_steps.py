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

    def pending_filter(self, migration_id: str, index: int, step: Step) -> dict[str, Any] | None:
        state = (self.changelog.get(migration_id) or {}).get("steps") or []
        return COLLECTION_OPERATIONS[step.name].pending(step, state[index] if index < len(state) else {})

    def catch_up(self, migration_id: str, index: int, step: Step, state: dict[str, Any], outcome: StepOutcome) -> int:
        """Apply the step again from its checkpoint: what it carries over is what the application wrote since."""
        catalog = self.runner.catalog(migration_id, index, state)
        COLLECTION_OPERATIONS[step.name].apply(step, catalog)
        outcome.stats.update(catalog.stats)
        return catalog.read

    def would(self, migration_id: str, index: int, step: Step) -> list[str]:
        return COLLECTION_OPERATIONS[step.name].dry_run(step, self.runner.catalog(migration_id, index, {}))
