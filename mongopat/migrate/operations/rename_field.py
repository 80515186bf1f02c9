"""rename_field: a field moved to a new name."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mongopat.guide.placeholders import param
from mongopat.guide.reads import ReadPlan, Stage, rename_in_match
from mongopat.guide.writes import WritePlan, changed, command
from mongopat.migrate.operations.base import STR, DocumentOperation, Param, ServerUnmade, Step, StepType
from mongopat.migrate.operations.server_paths import (
    NOT_OK,
    holds,
    keys_of,
    move_stages,
    place_of,
    plain,
    put_at,
    within,
)
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
    type = StepType("rename_field", "document", {"from": Param(STR), "to": Param(STR)}, "rename a field")

    def rewrite_read(self, read: ReadPlan, step: Step, evidence: Evidence) -> None:
        old, new = step.params["from"], step.params["to"]
        if read.collection != step.collection or not read.uses(old):
            return
        read.match = rename_in_match(read.match, old, new)
        sort = read.find("sort")
        if sort is not None:
            renamed = {_renamed(key, old, new): direction for key, direction in sort.stages[0]["$sort"].items()}
            sort.stages = [{"$sort": renamed}]
        read.sources = {name: _renamed(source, old, new) for name, source in read.sources.items()}
        read.reshape([{"$set": {old: f"${new}"}}], [old])

    def during_read(self, before: ReadPlan, after: ReadPlan, step: Step) -> ReadPlan:
        old, new = step.params["from"], step.params["to"]
        during = before.copy()
        if after.match != before.match:
            during.match = {"$or": [before.match, after.match]}
        during.insert_early(Stage("reshape", [{"$set": {old: {"$ifNull": [f"${new}", f"${old}"]}}}], [old]))
        return during

    def update_write(self, step: Step, per_sec: float) -> WritePlan | None:
        """An update of the field sets it under its new name."""
        old, new = step.params["from"], step.params["to"]

        def update(name: str) -> list[dict[str, Any]]:
            return [
                command(
                    step.collection, "updateOne", filter={"_id": param("_id")}, update={"$set": {name: param("value")}}
                )
            ]

        def binder(sample: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
            values = {"_id": sample.document["_id"], "value": changed(get_path(sample.document, old))}
            return values, values

        return WritePlan(
            step.collection,
            "update_renamed",
            f"set `{old}` of a document of {step.collection}",
            update(old),
            update(new),
            {"_id": "the document's _id", "value": f"the new {old}"},
            per_sec,
            {"before": 1, "after": 1},
            binder,
            sample_filter={old: {"$exists": True}},
        )

    def new_shape(self, step: Step) -> str:
        return f"`{step.params['from']}` named `{step.params['to']}`"

    def deploy(self, step: Step) -> dict[str, list[str]]:
        old, new = step.params["from"], step.params["to"]
        return {
            "before": [f"`{step.collection}`: read `{new}` when present, else `{old}`; write `{new}`"],
            "during": [f"`{step.collection}`: documents of both names until `migrate up` has finished"],
            "after": [f"`{step.collection}`: drop the fallback to `{old}`"],
        }

    def transform(self, doc: Document, step: Step, ctx: Context) -> Result:
        if has_path(doc, step.params["from"]):
            set_path(doc, step.params["to"], pop_path(doc, step.params["from"]))
        return Result(doc)

    def server_stages(self, step: Step) -> list[dict[str, Any]] | None:
        # As set_path after pop_path: an existing new name keeps its place, a new one goes last.
        old, new = step.params["from"], step.params["to"]
        if not plain(old, new) or old == new:
            return None
        return move_stages(old, new)

    def server_pending(self, step: Step) -> Any:
        old = step.params["from"]
        return holds(old) if "." in old else None

    def server_unmade(self, step: Step) -> dict[str, ServerUnmade]:
        # A key renamed inside a sub-document: the top-level field is the old key again, at the place it had
        # (the new one went last). Renames between two sub-documents or to the top level are not taken.
        old, new = step.params["from"].split("."), step.params["to"].split(".")
        if not plain(step.params["from"], step.params["to"]) or len(old) < 2 or old[:-1] != new[:-1] or old == new:
            return {}
        return {old[0]: ServerUnmade(within(old[1:-1], _renamed_back(old[-1], new[-1])), place_of(old[1:]))}

    changes_only_what_it_writes = True

    def read_fields(self, step: Step) -> frozenset[str] | None:
        return heads(step.params["from"], step.params["to"])

    def written_fields(self, step: Step) -> set[str]:
        p = step.params
        return {p["from"], p["to"]}

    def removed_fields(self, step: Step) -> set[str]:
        p = step.params
        return {p["from"]}

    def pending(self, step: Step) -> dict[str, Any]:
        return {step.params["from"]: {"$exists": True}}

    def is_pending(self, doc: Document, step: Step) -> bool:
        return has_path(doc, step.params["from"])

    def inverse(self, current: Document, original: Document, step: Step, side: list[Document]) -> Document | None:
        result = copy_document(current)
        old, new = step.params["from"], step.params["to"]
        if has_path(result, new) and not has_path(result, old):
            set_path(result, old, pop_path(result, new))
        return result


def _renamed(path: str, old: str, new: str) -> str:
    if path == old:
        return new
    return new + path[len(old) :] if path.startswith(old + ".") else path


def _renamed_back(old: str, new: str) -> dict[str, Any]:
    """``{ok, v}``: the sub-document ``$$wv`` with its key ``new`` named ``old`` again, at place ``$$at``
    among the others; not ``ok`` where it is no document, lacks ``new``, holds ``old`` or has fewer than
    ``$$at`` other keys."""
    names = keys_of("$$p")
    rest = {"$filter": {"input": "$$p", "as": "f", "cond": {"$ne": ["$$f.k", new]}}}
    moved = {"$let": {"vars": {"e": {"$arrayElemAt": ["$$p", "$$j"]}}, "in": "$$e.v"}}
    made = {"ok": True, "v": {"$arrayToObject": put_at("$$r", old, moved)}}
    fits = {"$and": [{"$gte": ["$$j", 0]}, {"$not": [{"$in": [old, names]}]}, {"$gte": ["$$at", 0]},
                     {"$lte": ["$$at", {"$size": "$$r"}]}]}  # fmt: skip
    found = {"$let": {"vars": {"j": {"$indexOfArray": [names, new]}, "r": rest}, "in": {"$cond": [fits, made, NOT_OK]}}}
    pairs = {"$let": {"vars": {"p": {"$objectToArray": "$$wv"}}, "in": found}}
    return {"$cond": [{"$eq": [{"$type": "$$wv"}, "object"]}, pairs, NOT_OK]}
