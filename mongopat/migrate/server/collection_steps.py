"""Collection steps on a live server (indexes, copies, renames, validators): each step's module applies,
reverts and verifies it through the server's catalog (``catalog.py``)."""

from __future__ import annotations

from typing import Any

from mongopat.migrate.contracts import StepRun
from mongopat.migrate.operations import COLLECTION_OPERATIONS
from mongopat.migrate.runner import StepOutcome
from mongopat.migrate.server.steps import ServerSteps


class CollectionSteps(ServerSteps):
    def run(self, run: StepRun) -> StepOutcome:
        catalog = self.runner.catalog(run)
        COLLECTION_OPERATIONS[run.step.name].apply(run.step, catalog)
        return StepOutcome(catalog.read, catalog.written, catalog.stats)

    def revert(self, run: StepRun) -> None:
        COLLECTION_OPERATIONS[run.step.name].revert(run.step, self.runner.catalog(run))

    def verify(self, run: StepRun) -> list[str]:
        if run.state.get("state") != "applied":
            return []
        return COLLECTION_OPERATIONS[run.step.name].verify(run.step, self.runner.catalog(run))

    def pending_filter(self, run: StepRun) -> dict[str, Any] | None:
        # Asked of applied migrations, with the step's record as the changelog has it now.
        steps = (self.changelog.get(run.migration_id) or {}).get("steps") or []
        record: dict[str, Any] = dict(steps[run.index]) if run.index < len(steps) else {}
        return COLLECTION_OPERATIONS[run.step.name].pending(run.step, record)

    def catch_up(self, run: StepRun, outcome: StepOutcome) -> int:
        """Apply the step again from its checkpoint: what it carries over is what the application wrote since."""
        catalog = self.runner.catalog(run)
        COLLECTION_OPERATIONS[run.step.name].apply(run.step, catalog)
        outcome.stats.update(catalog.stats)
        return catalog.read

    def would(self, run: StepRun) -> list[str]:
        return COLLECTION_OPERATIONS[run.step.name].dry_run(run.step, self.runner.catalog(run))
