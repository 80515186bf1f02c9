"""copy_collection: a collection copied under a new name (dropped by down)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mongopat.errors import OperationFailed
from mongopat.migrate.operations.base import STR, CollectionOperation, Param, Step, StepType

if TYPE_CHECKING:
    from mongopat.migrate.catalog import Catalog


class Operation(CollectionOperation):
    type = StepType("copy_collection", "collection", {"to": Param(STR)}, "copy the collection", creates=("to",))

    def apply(self, step: Step, catalog: Catalog) -> None:
        if step.collection not in catalog.names():
            raise OperationFailed(f"copy_collection: no collection {step.collection!r}")
        catalog.copy(step.collection, step.params["to"])

    def revert(self, step: Step, catalog: Catalog) -> None:
        if step.params["to"] in catalog.names():
            catalog.drop(step.params["to"])

    def verify(self, step: Step, catalog: Catalog) -> list[str]:
        to = step.params["to"]
        if catalog.count(to) < catalog.count(step.collection):
            return [f"{to}: fewer documents than {step.collection}"]
        return []
