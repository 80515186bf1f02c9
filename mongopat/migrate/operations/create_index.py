"""create_index: an index created (dropped again by down).

Each runner carries out collection steps its own way (commands on a server, files in a dump folder).
"""

from __future__ import annotations

from mongopat.migrate.operations.base import DICT, STR, Param, Step, StepOperation, StepType


class Operation(StepOperation):
    type = StepType(
        "create_index",
        "collection",
        {"keys": Param(DICT), "name": Param(STR, False), "unique": Param(bool, False, False)},
        "create an index",
    )

    def indexes(self, step: Step) -> list[tuple[str, dict[str, int]]]:
        return [(step.collection, dict(step.params["keys"]))]
