"""drop_index: an index dropped (its spec is kept first, and down creates it again)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mongopat.errors import OperationFailed
from mongopat.migrate.operations.base import STR, CollectionOperation, Param, Step, StepType

if TYPE_CHECKING:
    from mongopat.migrate.catalog import Catalog


class Operation(CollectionOperation):
    plan_order = 5
    type = StepType("drop_index", "collection", {"name": Param(STR)}, "drop an index")

    def apply(self, step: Step, catalog: Catalog) -> None:
        name = step.params["name"]
        spec = next((dict(i) for i in catalog.indexes(step.collection) if i.get("name") == name), None)
        if spec is None:
            if catalog.stats.get("spec"):
                return  # dropped by a run that stopped before it could mark the step applied
            raise OperationFailed(f"drop_index: no index {name!r} on {step.collection}")
        catalog.record(spec=spec)  # before the drop: down needs it
        catalog.drop_index(step.collection, name)

    def revert(self, step: Step, catalog: Catalog) -> None:
        spec = dict(catalog.stats.get("spec") or {})
        if spec and not any(i.get("name") == spec.get("name") for i in catalog.indexes(step.collection)):
            catalog.create_index(step.collection, spec)
