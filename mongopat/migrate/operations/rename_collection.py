"""rename_collection: a collection renamed (renamed back by down)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mongopat.errors import OperationFailed
from mongopat.migrate.operations.base import STR, CollectionOperation, Param, Step, StepType

if TYPE_CHECKING:
    from mongopat.guide.cost import Evidence
    from mongopat.guide.reads import ReadPlan
    from mongopat.guide.writes import WritePlan
    from mongopat.migrate.catalog import Catalog


class Operation(CollectionOperation):
    renames_collection = True
    type = StepType("rename_collection", "collection", {"to": Param(STR)}, "rename the collection")

    def apply(self, step: Step, catalog: Catalog) -> None:
        names, to = catalog.names(), step.params["to"]
        if step.collection not in names:
            if to in names:
                return  # renamed by a run that stopped before it could mark the step applied
            raise OperationFailed(f"rename_collection: no collection {step.collection!r}")
        if to in names:
            raise OperationFailed(f"rename_collection: {to} exists already")
        catalog.rename(step.collection, to)

    def revert(self, step: Step, catalog: Catalog) -> None:
        names, to = catalog.names(), step.params["to"]
        if to in names and step.collection not in names:
            catalog.rename(to, step.collection)

    def rewrite_read(self, read: ReadPlan, step: Step, evidence: Evidence) -> None:
        if read.collection == step.collection:
            read.collection = step.params["to"]
        for stage in read.stages:  # joins of the renamed collection
            for spec in stage.stages:
                for key in ("$lookup", "$graphLookup"):
                    if key in spec and spec[key].get("from") == step.collection:
                        spec[key]["from"] = step.params["to"]

    def writes(self, step: Step, evidence: Evidence) -> list[WritePlan]:
        from mongopat.guide.writes import moved_inserts

        new = step.params["to"]
        return moved_inserts(
            step.collection, new, evidence, f"insert a document into {step.collection}, named {new} after"
        )

    def during_read(self, before: ReadPlan, after: ReadPlan, step: Step) -> ReadPlan | None:
        return None  # the rename is one command: the application switches names when up has finished

    def deploy(self, step: Step) -> dict[str, list[str]]:
        old, new = step.collection, step.params["to"]
        return {
            "before": [],
            "during": [f"`{old}` becomes `{new}` at once: the application switches when `migrate up` has finished"],
            "after": [f"read and write `{new}` instead of `{old}`"],
        }
