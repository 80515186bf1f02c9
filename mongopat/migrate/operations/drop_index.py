"""drop_index: an index dropped; its definition is kept for down.

Each runner carries out collection steps its own way (commands on a server, files in a dump folder).
"""

from __future__ import annotations

from mongopat.migrate.operations.base import STR, Param, StepOperation, StepType


class Operation(StepOperation):
    type = StepType("drop_index", "collection", {"name": Param(STR)}, "drop an index (its definition is kept for down)")
