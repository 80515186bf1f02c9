"""attribute: sparse fields pivoted into an array of ``{k, v}`` pairs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mongopat.guide.placeholders import is_param, param
from mongopat.guide.reads import ReadPlan, Stage
from mongopat.guide.writes import WritePlan, changed, command
from mongopat.migrate.operations.base import (
    DICT,
    LIST,
    STR,
    DocumentOperation,
    Param,
    Step,
    StepType,
    check_top_level,
    has_field,
    top_level,
)
from mongopat.migrate.transform_api import Context, Document, Result, copy_document, heads

if TYPE_CHECKING:
    from mongopat.guide.cost import Evidence


class Operation(DocumentOperation):
    plan_order = 1
    type = StepType(
        "attribute",
        "document",
        {"fields": Param(LIST), "into": Param(STR, False, "attributes"), "index": Param(DICT, False)},
        "pivot fields into an array of {k, v} pairs (attribute pattern)",
    )

    def rewrite_read(self, read: ReadPlan, step: Step, evidence: Evidence) -> None:
        if read.collection != step.collection:
            return
        pivoted, into = step.params["fields"], step.params["into"]
        used = [name for name in pivoted if read.uses(name)]
        if not used:
            return
        # Conditions an element can answer on its own move into $elemMatch (the {k, v} index serves them);
        # others (ne, exists...) are applied again on the restored fields.
        pairs: list[dict[str, Any]] = []
        kept: dict[str, Any] = {}
        residual: dict[str, Any] = {}
        for name, cond in read.match.items():
            if name in pivoted:
                if _element_condition(cond):
                    pairs.append({into: {"$elemMatch": {"k": name, "v": cond}}})
                else:
                    residual[name] = cond
            else:
                kept[name] = cond
        if len(pairs) == 1:
            kept.update(pairs[0])
        elif pairs:
            kept["$and"] = pairs
        read.match = kept
        restore = {name: f"$_attributes.{name}" for name in pivoted}
        stages: list[dict[str, Any]] = [
            {"$set": {"_attributes": {"$arrayToObject": {"$ifNull": [f"${into}", []]}}}},
            {"$set": restore},
            {"$project": {"_attributes": 0}},
        ]
        if residual:
            stages.append({"$match": residual})
            read.insert_early(Stage("reshape", stages, list(restore)))
        else:
            read.reshape(stages, list(restore))

    def indexes(self, step: Step) -> list[tuple[str, dict[str, int]]]:
        return [(step.collection, dict(step.params["index"]))] if step.params.get("index") else []

    def during_read(self, before: ReadPlan, after: ReadPlan, step: Step) -> ReadPlan:
        into, pivoted = step.params["into"], step.params["fields"]
        during = before.copy()
        if after.match != before.match:
            during.match = {"$or": [before.match, after.match]}
        restore = {name: {"$ifNull": [f"$_attributes.{name}", f"${name}"]} for name in pivoted}
        stages: list[dict[str, Any]] = [
            {"$set": {"_attributes": {"$arrayToObject": {"$ifNull": [f"${into}", []]}}}},
            {"$set": restore},
            {"$project": {"_attributes": 0}},
        ]
        during.insert_early(Stage("reshape", stages, list(restore)))
        return during

    def update_write(self, step: Step, per_sec: float) -> WritePlan | None:
        """A pivoted field set: its pair's value where the pair exists, a new pair where it does not (the
        second command matches only then). Shown for the first field; the others are the same."""
        if not step.params["fields"]:
            return None
        name = step.params["fields"][0]
        into = step.params["into"]
        before = [
            command(step.collection, "updateOne", filter={"_id": param("_id")}, update={"$set": {name: param("value")}})
        ]
        after = [
            command(
                step.collection,
                "updateOne",
                filter={"_id": param("_id"), f"{into}.k": name},
                update={"$set": {f"{into}.$.v": param("value")}},
            ),
            command(
                step.collection,
                "updateOne",
                filter={"_id": param("_id"), f"{into}.k": {"$ne": name}},
                update={"$push": {into: {"k": name, "v": param("value")}}},
            ),
        ]

        def binder(sample: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
            values = {"_id": sample.document["_id"], "value": changed(sample.document.get(name))}
            return values, values

        return WritePlan(
            step.collection,
            "update_attribute",
            f"set `{name}` (or any pivoted field) of a document of {step.collection}",
            before,
            after,
            {"_id": "the document's _id", "value": f"the new {name}"},
            per_sec,
            {"before": 1, "after": 1},
            binder,
            sample_filter={name: {"$exists": True}},
        )

    def new_shape(self, step: Step) -> str:
        p = step.params
        return f"{', '.join(p['fields'])} as {{k, v}} elements of `{p['into']}`"

    def deploy(self, step: Step) -> dict[str, list[str]]:
        p = step.params
        return {
            "before": [f"`{step.collection}`: reads match and read both the fields and `{p['into']}`"],
            "during": [f"`{step.collection}`: documents of both shapes until `migrate up` has finished"],
            "after": [f"`{step.collection}`: read and write the attributes in `{p['into']}` only"],
        }

    def check(self, params: dict[str, Any]) -> None:
        check_top_level("attribute", params, "fields", "into")

    def read_fields(self, step: Step) -> frozenset[str] | None:
        return heads(*step.params["fields"], step.params["into"])

    def transform(self, doc: Document, step: Step, ctx: Context) -> Result:
        pairs = [{"k": name, "v": doc.pop(name)} for name in step.params["fields"] if name in doc]
        existing = doc.get(step.params["into"])
        doc[step.params["into"]] = (existing if isinstance(existing, list) else []) + pairs
        return Result(doc)

    def server_stages(self, step: Step) -> list[dict[str, Any]] | None:
        """The pairs of the fields present, in the order listed, after the array's own elements (an
        ``into`` that is not an array is replaced), then the fields removed: ``into`` keeps its place, or
        goes last, as in the transform."""
        fields, into = list(step.params["fields"]), step.params["into"]
        if not top_level(into, *fields) or into in fields or len(set(fields)) != len(fields):
            return None
        pairs = [{"$cond": [has_field(name), {"k": {"$literal": name}, "v": f"${name}"}, None]} for name in fields]
        kept = {"$cond": [{"$isArray": f"${into}"}, f"${into}", []]}
        present = {"$filter": {"input": pairs, "cond": {"$ne": ["$$this", None]}}}
        return [{"$set": {into: {"$concatArrays": [kept, present]}}}, {"$unset": fields}]

    def written_fields(self, step: Step) -> set[str]:
        p = step.params
        return {*p["fields"], p["into"]}

    def removed_fields(self, step: Step) -> set[str]:
        p = step.params
        return set(p["fields"])

    def pending(self, step: Step) -> dict[str, Any]:
        return {"$or": [{name: {"$exists": True}} for name in step.params["fields"]]}

    def is_pending(self, doc: Document, step: Step) -> bool:
        return any(name in doc for name in step.params["fields"])

    def inverse(self, current: Document, original: Document, step: Step, side: list[Document]) -> Document | None:
        """The pivoted pairs (with the values the application wrote since) back into fields; pairs of other
        keys stay in the array."""
        result = copy_document(current)
        into, fields = step.params["into"], set(step.params["fields"])
        pairs = result.get(into)
        if not isinstance(pairs, list):
            return result
        kept = []
        for pair in pairs:
            if isinstance(pair, dict) and pair.get("k") in fields and set(pair) <= {"k", "v"}:
                if pair["k"] in result:
                    return None  # the application wrote the field itself too: which value wins is its call
                result[pair["k"]] = pair.get("v")
            else:
                kept.append(pair)
        if kept or into in original:
            result[into] = kept
        else:
            del result[into]
        return result


def _element_condition(cond: Any) -> bool:
    if not isinstance(cond, dict) or is_param(cond):
        return True
    return set(cond) <= {"$in", "$gt", "$gte", "$lt", "$lte", "$eq"}
