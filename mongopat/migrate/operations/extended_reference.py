"""extended_reference: fields of the referenced document copied next to the reference."""

from __future__ import annotations

from typing import Any

from mongopat.migrate.operations.base import LIST, STR, AddsFields, Param, Step, StepType
from mongopat.migrate.transforms import Context, Document, Result, get_path, has_path, hashable_key


class Operation(AddsFields):
    type = StepType(
        "extended_reference",
        "document",
        {
            "from": Param(STR),
            "local": Param(STR),
            "foreign": Param(STR, False, "_id"),
            "fields": Param(LIST),
            "as": Param(STR),
        },
        "copy fields of the referenced document (extended reference pattern)",
    )

    def transform(self, doc: Document, step: Step, ctx: Context) -> Result:
        key = get_path(doc, step.params["local"])
        referenced = ctx.references.get(hashable_key(key))
        if referenced is not None:
            doc[step.params["as"]] = {name: referenced[name] for name in step.params["fields"] if name in referenced}
        return Result(doc)

    def written_fields(self, step: Step) -> set[str]:
        p = step.params
        return {p["as"]}

    def added(self, step: Step) -> list[str]:
        return [step.params["as"]]

    def pending(self, step: Step) -> dict[str, Any]:
        # A document without the reference has nothing to copy: not pending. One whose referenced document is
        # missing stays pending, and is reported as such.
        return {step.params["as"]: {"$exists": False}, step.params["local"]: {"$exists": True}}

    def is_pending(self, doc: Document, step: Step) -> bool:
        return not has_path(doc, step.params["as"]) and has_path(doc, step.params["local"])
