"""tree: ancestors and a path materialised from parent references."""

from __future__ import annotations

from mongopat.migrate.operations.base import AddsFields
from mongopat.migrate.steps import Step


class Operation(AddsFields):
    name = "tree"

    def added(self, step: Step) -> list[str]:
        return [step.params["ancestors_field"], step.params["path_field"]]
