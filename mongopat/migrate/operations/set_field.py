"""set_field: a field set to a value (everywhere, or only where it is missing)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mongopat.guide.reads import ReadPlan
from mongopat.migrate.operations.base import (
    ANY,
    STR,
    DocumentOperation,
    Param,
    ServerInverse,
    Step,
    StepType,
    restore_field,
    top_level,
)
from mongopat.migrate.operations.server_paths import holds, plain, set_stages, value_at
from mongopat.migrate.transform_api import Context, Document, Result, copy_document, get_path, has_path, heads, set_path

if TYPE_CHECKING:
    from mongopat.guide.cost import Evidence


class Operation(DocumentOperation):
    type = StepType(
        "set_field",
        "document",
        {"field": Param(STR), "value": Param(ANY), "only_missing": Param(bool, False, False)},
        "set a field to a value (on every document, or only where it is missing)",
    )

    def rewrite_read(self, read: ReadPlan, step: Step, evidence: Evidence) -> None:
        name = step.params["field"]
        if read.collection == step.collection and read.uses(name):
            read.differs.add(name)
            which = "documents that had none" if step.params.get("only_missing") else "every document"
            read.notes.append(f"`{name}` is {step.params['value']!r} on {which}: results that depend on it change")

    def new_shape(self, step: Step) -> str:
        p = step.params
        return f"`{p['field']}` set to {p['value']!r}" + (
            " when the document has none" if p.get("only_missing") else ""
        )

    def transform(self, doc: Document, step: Step, ctx: Context) -> Result:
        if not (step.params["only_missing"] and has_path(doc, step.params["field"])):
            set_path(doc, step.params["field"], copy_document(step.params["value"]))
        return Result(doc)

    def server_stages(self, step: Step) -> list[dict[str, Any]] | None:
        # Only pending documents are given: those without the field, or (without only_missing) another value.
        field = step.params["field"]
        return set_stages(field, {"$literal": step.params["value"]}) if plain(field) else None

    def server_pending(self, step: Step) -> Any:
        field = step.params["field"]
        if "." not in field:
            return None
        missing = {"$not": [holds(field)]}
        if step.params["only_missing"]:
            return missing
        return {"$or": [missing, {"$ne": [value_at(field), {"$literal": step.params["value"]}]}]}

    changes_only_what_it_writes = True

    def read_fields(self, step: Step) -> frozenset[str] | None:
        return heads(step.params["field"])

    def written_fields(self, step: Step) -> set[str]:
        p = step.params
        return {p["field"]}

    def pending(self, step: Step) -> dict[str, Any]:
        field = step.params["field"]
        if step.params["only_missing"]:
            return {field: {"$exists": False}}
        return {"$or": [{field: {"$exists": False}}, {field: {"$ne": step.params["value"]}}]}

    def is_pending(self, doc: Document, step: Step) -> bool:
        field = step.params["field"]
        if not has_path(doc, field):
            return True
        return not step.params["only_missing"] and get_path(doc, field) != step.params["value"]

    def inverse(self, current: Document, original: Document, step: Step, side: list[Document]) -> Document | None:
        result = copy_document(current)
        field = step.params["field"]
        # A value the application wrote since is its own: only the value the step set goes back.
        if has_path(result, field) and get_path(result, field) == step.params["value"]:
            restore_field(result, original, field)
        return result

    def server_inverse(self, step: Step) -> ServerInverse | None:
        # The inverse above: the field goes where it still holds the value. Only a text or null value, which
        # $eq (in the simple collation, unset_in_server.py) compares as Python's == does: not a number
        # (Python's True == 1), a date or a container.
        field, value = step.params["field"], step.params["value"]
        if not top_level(field) or not (value is None or isinstance(value, str)):
            return None
        back = {"$cond": [{"$eq": [f"${field}", {"$literal": value}]}, "$$REMOVE", f"${field}"]}
        return ServerInverse([field], [{"$set": {field: back}}])
