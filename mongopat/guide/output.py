"""The guide as data: the ``--format json`` document (``guide_version`` 1, documented in the README)."""

from __future__ import annotations

from typing import Any

from mongopat.guide import GUIDE_VERSION
from mongopat.guide.build import PHASES, MigrationGuide, parameters
from mongopat.guide.writes import WritePlan


def guide_document(guides: list[MigrationGuide], notes: list[str]) -> dict[str, Any]:
    return {"guide_version": GUIDE_VERSION, "migrations": [migration_entry(g) for g in guides], "notes": notes}


def migration_entry(guide: MigrationGuide) -> dict[str, Any]:
    migration = guide.migration
    return {
        "id": migration.id,
        "description": migration.description,
        "collections": migration.collections,
        "reads": [
            {
                "collection": read.before.collection,
                "query": read.name,
                "changed": read.changed,
                "parameters": parameters(read.before),
                "before": {"collection": read.before.collection, "pipeline": read.before.pipeline()},
                "after": {"collection": read.after.collection, "pipeline": read.after.pipeline()},
                "during": None
                if read.during is None
                else {"collection": read.during.collection, "pipeline": read.during.pipeline()},
                "documents_examined": {**read.examined, "basis": read.basis},
                "notes": read.after.notes,
            }
            for read in guide.reads
        ],
        "writes": [write_entry(write) for write in guide.writes],
        "indexes": guide.indexes,
        "deploy": [{"phase": phase, "action": action} for phase in PHASES for action in guide.deploy.get(phase, [])],
        "notes": guide.notes,
    }


def write_entry(write: WritePlan) -> dict[str, Any]:
    return {
        "collection": write.collection,
        "operation": write.operation,
        "description": write.description,
        "parameters": [{"name": name, "description": text} for name, text in write.parameters.items()],
        "per_sec": write.per_sec,
        "before": write.before,
        "after": write.after,
        "documents_written": write.documents_written,
        "approximate": write.approximate,
    }
