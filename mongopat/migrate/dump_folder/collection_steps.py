"""Collection steps on a dump folder (indexes, copies, renames, validators): each step's module applies,
reverts and verifies it through the folder's catalog (``catalog.py``)."""

from __future__ import annotations

from mongopat.migrate.contracts import StepRun
from mongopat.migrate.dump_folder.rewrites import DumpSteps
from mongopat.migrate.operations import COLLECTION_OPERATIONS


class CollectionFiles(DumpSteps):
    def run(self, run: StepRun) -> None:
        if run.state.get("phase") == "done":
            return
        runner = self.runner
        catalog = runner.catalog(run)
        COLLECTION_OPERATIONS[run.step.name].apply(run.step, catalog)
        runner.changelog.step(
            run.migration_id, run.index, read=catalog.read, written=catalog.written, stats=catalog.stats
        )
        runner.changelog.add_counts(run.migration_id, catalog.read, catalog.written)
        runner.lock.renew()

    def revert(self, run: StepRun) -> None:
        catalog = self.runner.catalog(run)
        COLLECTION_OPERATIONS[run.step.name].revert(run.step, catalog)
        catalog.reverted()

    def verify(self, run: StepRun) -> list[str]:
        if run.state.get("state") == "pending":
            return []
        return COLLECTION_OPERATIONS[run.step.name].verify(run.step, self.runner.catalog(run))

    def would(self, run: StepRun) -> list[str]:
        return COLLECTION_OPERATIONS[run.step.name].dry_run(run.step, self.runner.catalog(run))
