"""document_versioning: a revision number (the history collection is dropped by down)."""

from __future__ import annotations

import copy

from mongopat.migrate.operations.base import STR, AddsFields, Param, Step, StepType
from mongopat.migrate.transforms import Context, Document, Result


class Operation(AddsFields):
    type = StepType(
        "document_versioning",
        "document",
        {"history_collection": Param(STR), "version_field": Param(STR, False, "revision")},
        "stamp a revision and write the first revision to a history collection (document versioning)",
        creates=("history_collection",),
    )

    def transform(self, doc: Document, step: Step, ctx: Context) -> Result:
        version_field = step.params["version_field"]
        if version_field not in doc:
            doc[version_field] = 1
        revision = {key: copy.deepcopy(value) for key, value in doc.items() if key != "_id"}
        history = {"_id": {"doc": doc.get("_id"), "revision": doc[version_field]}, **revision}
        return Result(doc, {step.params["history_collection"]: [history]})

    def written_fields(self, step: Step) -> set[str]:
        p = step.params
        return {p["version_field"]}

    def added(self, step: Step) -> list[str]:
        return [step.params["version_field"]]
