"""unset_field: a field removed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mongopat.guide.reads import ReadPlan
from mongopat.migrate.operations.base import STR, DocumentOperation, Param, Step, StepType
from mongopat.migrate.operations.server_paths import holds, plain, unset_stages
from mongopat.migrate.transform_api import (
    Context,
    Document,
    Result,
    copy_document,
    get_path,
    has_path,
    heads,
    pop_path,
    set_path,
)

if TYPE_CHECKING:
    from mongopat.guide.cost import Evidence


class Operation(DocumentOperation):
    type = StepType("unset_field", "document", {"field": Param(STR)}, "remove a field")

    def rewrite_read(self, read: ReadPlan, step: Step, evidence: Evidence) -> None:
        name = step.params["field"]
        if read.collection == step.collection and read.uses(name):
            read.differs.add(name)
            read.notes.append(f"`{name}` is gone: the read no longer returns it, and a filter on it matches no value")

    def new_shape(self, step: Step) -> str:
        return f"no `{step.params['field']}`"

    def deploy(self, step: Step) -> dict[str, list[str]]:
        name = step.params["field"]
        return {
            "before": [f"`{step.collection}`: stop reading and writing `{name}`"],
            "during": [],
            "after": [],
        }

    def transform(self, doc: Document, step: Step, ctx: Context) -> Result:
        pop_path(doc, step.params["field"])
        return Result(doc)

    def server_stages(self, step: Step) -> list[dict[str, Any]] | None:
        field = step.params["field"]
        return unset_stages(field) if plain(field) else None

    def server_pending(self, step: Step) -> Any:
        field = step.params["field"]
        return holds(field) if "." in field else None

    changes_only_what_it_writes = True

    def read_fields(self, step: Step) -> frozenset[str] | None:
        return heads(step.params["field"])

    def written_fields(self, step: Step) -> set[str]:
        p = step.params
        return {p["field"]}

    def removed_fields(self, step: Step) -> set[str]:
        p = step.params
        return {p["field"]}

    def pending(self, step: Step) -> dict[str, Any]:
        return {step.params["field"]: {"$exists": True}}

    def is_pending(self, doc: Document, step: Step) -> bool:
        return has_path(doc, step.params["field"])

    def inverse(self, current: Document, original: Document, step: Step, side: list[Document]) -> Document | None:
        result = copy_document(current)
        field = step.params["field"]
        if has_path(original, field) and not has_path(result, field):  # one the application set again stays
            set_path(result, field, copy_document(get_path(original, field)))
        return result
