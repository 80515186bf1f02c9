"""rename_collection: a collection renamed (renamed back by down).

Each runner carries out collection steps its own way (commands on a server, files in a dump folder).
"""

from __future__ import annotations

from mongopat.migrate.operations.base import STR, Param, StepOperation, StepType


class Operation(StepOperation):
    type = StepType("rename_collection", "collection", {"to": Param(STR)}, "rename the collection")
