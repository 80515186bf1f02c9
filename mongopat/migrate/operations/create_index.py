"""create_index: an index created (dropped again by down)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mongopat.migrate.operations.base import DICT, STR, CollectionOperation, Param, Step, StepType

if TYPE_CHECKING:
    from mongopat.migrate.catalog import Catalog


class Operation(CollectionOperation):
    plan_order = 5
    type = StepType(
        "create_index",
        "collection",
        {"keys": Param(DICT), "name": Param(STR, False), "unique": Param(bool, False, False)},
        "create an index",
    )

    def indexes(self, step: Step) -> list[tuple[str, dict[str, int]]]:
        return [(step.collection, dict(step.params["keys"]))]

    def apply(self, step: Step, catalog: Catalog) -> None:
        spec: dict[str, Any] = {"key": dict(step.params["keys"])}
        if step.params.get("name"):
            spec["name"] = step.params["name"]
        if step.params.get("unique"):
            spec["unique"] = True
        catalog.record(index=catalog.create_index(step.collection, spec))

    def revert(self, step: Step, catalog: Catalog) -> None:
        name = catalog.stats.get("index")
        if name and step.collection in catalog.names() and _has(catalog, step.collection, name):
            catalog.drop_index(step.collection, name)

    def verify(self, step: Step, catalog: Catalog) -> list[str]:
        name = catalog.stats.get("index")
        if name is None:  # stamped, not run: an index on the same keys will do, whatever its name
            keys = dict(step.params["keys"])
            if any(dict(spec.get("key") or {}) == keys for spec in catalog.indexes(step.collection)):
                return []
            return [f"{step.collection}: no index on {keys}"]
        return [] if _has(catalog, step.collection, name) else [f"{step.collection}: index {name} is missing"]


def _has(catalog: Catalog, collection: str, name: Any) -> bool:
    return any(spec.get("name") == name for spec in catalog.indexes(collection))
