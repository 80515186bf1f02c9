"""tree: ancestors and a path materialised from parent references."""

from __future__ import annotations

from typing import Any

from mongopat.migrate.operations.base import STR, AddsFields, Param, Step, StepType
from mongopat.migrate.transforms import Context, Document, Result


class Operation(AddsFields):
    type = StepType(
        "tree",
        "document",
        {
            "parent_field": Param(STR),
            "ancestors_field": Param(STR, False, "ancestors"),
            "path_field": Param(STR, False, "path"),
        },
        "materialise ancestors and a path from parent references (tree pattern)",
    )

    def transform(self, doc: Document, step: Step, ctx: Context) -> Result:
        ancestors = ancestors_of(doc.get("_id"), ctx.parents)
        doc[step.params["ancestors_field"]] = ancestors
        doc[step.params["path_field"]] = "/" + "".join(f"{a}/" for a in [*ancestors, doc.get("_id")])
        return Result(doc)

    def written_fields(self, step: Step) -> set[str]:
        p = step.params
        return {p["ancestors_field"], p["path_field"]}

    def added(self, step: Step) -> list[str]:
        return [step.params["ancestors_field"], step.params["path_field"]]


class TreeCycleError(ValueError):
    pass


def ancestors_of(node: Any, parents: dict[Any, Any]) -> list[Any]:
    """Root first; raises on a cycle. Unknown parents end the chain (they are kept as the root)."""
    chain: list[Any] = []
    seen = {node}
    current = parents.get(node)
    while current is not None:
        if current in seen:
            raise TreeCycleError(f"cycle in the tree through {current!r}")
        seen.add(current)
        chain.append(current)
        current = parents.get(current)
    return chain[::-1]
