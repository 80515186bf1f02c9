"""extended_reference: fields of the referenced document copied next to the reference."""

from __future__ import annotations

import math
from datetime import datetime
from typing import TYPE_CHECKING, Any

from bson import ObjectId

from mongopat.guide.placeholders import param
from mongopat.guide.reads import ReadPlan, Stage, without_overlaps
from mongopat.guide.writes import WritePlan, changed, command
from mongopat.migrate.operations.base import (
    LIST,
    STR,
    AddsFields,
    Param,
    RangeValues,
    Step,
    StepType,
    local_values,
)
from mongopat.migrate.operations.server_order import declined_key
from mongopat.migrate.operations.server_paths import holds, plain, set_stages, value_at
from mongopat.migrate.transform_api import (
    Context,
    ContextSource,
    Document,
    Result,
    get_path,
    has_path,
    hashable_key,
    heads,
    set_path,
)

if TYPE_CHECKING:
    from mongopat.guide.cost import Evidence

# Inside the server a document's reference is looked up in a table of the range's referenced documents
# (``let`` variables, MongoDB 5.0) by ``$indexOfArray``, whose equality is Python's dict lookup for these
# BSON types only (numbers equal across int, long and double on both). A boolean (True == 1 in Python), NaN,
# Decimal128, a document or an array as the reference is declined: the client side looks it up.
TAKEN_TYPES = ["string", "objectId", "int", "long", "date", "null", "missing"]
# The referenced documents' foreign values Python keys as the server compares them (no boolean, NaN fails
# $eq against a taken key, no Decimal128: the server finds Decimal128("1") for 1, Python's dict does not).
FOREIGN_TYPES = ["string", "objectId", "int", "long", "double", "date"]
KEYS, COPIES = "mongopat_keys", "mongopat_copies"


class Operation(AddsFields):
    plan_order = 0
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

    def rewrite_read(self, read: ReadPlan, step: Step, evidence: Evidence) -> None:
        if read.collection != step.collection:
            return
        p = step.params
        stage = read.find("lookup")
        lookup = stage.spec if stage is not None else None
        if (
            stage is None
            or lookup is None
            or (lookup.source, lookup.local, lookup.foreign) != (p["from"], p["local"], p["foreign"])
        ):
            return
        if not lookup.fields or not set(lookup.fields) <= set(p["fields"]):
            read.notes.append(f"the join reads fields of {p['from']} the step does not copy: it stays a join")
            return
        index = read.stages.index(stage)
        alias = lookup.alias
        if alias == p["as"]:
            del read.stages[index]
        else:
            read.stages[index] = Stage("reshape", [{"$set": {alias: f"${p['as']}"}}], [alias])
        read.joined.add(alias)
        read.notes.append(f"the join of {p['from']} is read from the copies in `{p['as']}`: one document, not an array")

    def writes(self, step: Step, evidence: Evidence) -> list[WritePlan]:
        plans = super().writes(step, evidence)
        per_sec = evidence.per_sec(step.params["from"], "updates")
        if per_sec:
            plans.append(self._referenced_update(step, per_sec, evidence))
        return plans

    def _referenced_update(self, step: Step, per_sec: float, evidence: Evidence) -> WritePlan:
        """An update of a copied field of the referenced document updates every copy, in the same deploy."""
        p = step.params
        source, local, foreign, alias = p["from"], p["local"], p["foreign"], p["as"]
        changes = {name: param(name) for name in p["fields"]}
        before = [command(source, "updateOne", filter={foreign: param(foreign)}, update={"$set": changes})]
        copies = {f"{alias}.{name}": param(name) for name in p["fields"]}
        after = [
            *before,
            command(step.collection, "updateMany", filter={local: param(foreign)}, update={"$set": copies}),
        ]

        def binder(sample: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
            values = {foreign: get_path(sample.document, foreign)}
            values.update({name: changed(sample.document.get(name)) for name in p["fields"]})
            return values, values

        from mongopat.guide.cost import rounded  # the guide's cost model: loaded by the guide, not by a migration

        per_key = evidence.per_key(step.collection, local)
        return WritePlan(
            source,
            "update_referenced",
            f"update {', '.join(f'`{n}`' for n in p['fields'])} of a document of {source}",
            before,
            after,
            {foreign: f"the {source} document's {foreign}", **{n: f"its new {n}" for n in p["fields"]}},
            per_sec,
            {"before": 1, "after": rounded(1 + per_key) if per_key else None},
            binder,
        )

    def new_shape(self, step: Step) -> str:
        p = step.params
        return f"`{p['as']}` = {{{', '.join(p['fields'])}}} of the {p['from']} document its `{p['local']}` references"

    def deploy(self, step: Step) -> dict[str, list[str]]:
        p = step.params
        return {
            "before": [
                f"`{step.collection}`: inserts copy {', '.join(p['fields'])} of {p['from']} into `{p['as']}`",
                f"`{p['from']}`: updates of {', '.join(p['fields'])} also update the copies (`updateMany`)",
            ],
            "during": [f"`{step.collection}`: join {p['from']} where `{p['as']}` is missing"],
            "after": [f"`{step.collection}`: read `{p['as']}` instead of joining {p['from']}"],
        }

    def context(self, step: Step, documents: list[Document] | None, source: ContextSource) -> Context:
        p = step.params
        found = source.documents(p["from"], p["foreign"], local_values(documents, p["local"]), p["fields"])
        return Context(references={hashable_key(get_path(d, p["foreign"])): d for d in found})

    def read_fields(self, step: Step) -> frozenset[str] | None:
        return heads(step.params["local"], step.params["as"])

    def transform(self, doc: Document, step: Step, ctx: Context) -> Result:
        key = get_path(doc, step.params["local"])
        referenced = ctx.references.get(hashable_key(key))
        if referenced is not None:
            copy = {name: referenced[name] for name in step.params["fields"] if name in referenced}
            set_path(doc, step.params["as"], copy)
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

    # -- inside the server: the referenced documents of a range, sent as a table ----------------------

    def server_stages(self, step: Step) -> list[dict[str, Any]] | None:
        p = step.params
        if not plain(p["local"], p["as"]) or any(name.startswith("$") for name in p["fields"]):
            return None
        # A nested reference is read as get_path reads it (never through an array), the copy set as
        # set_path sets it; only documents with a copy are rewritten (RangeValues.takes), so $$REMOVE is
        # never set.
        found = {"$indexOfArray": [f"$${KEYS}", value_at(p["local"])]}
        copy = {"$cond": [{"$gte": ["$$at", 0]}, {"$arrayElemAt": [f"$${COPIES}", "$$at"]}, "$$REMOVE"]}
        return set_stages(p["as"], {"$let": {"vars": {"at": found}, "in": copy}})

    def server_pending(self, step: Step) -> Any:
        p = step.params
        if "." not in p["local"] + p["as"]:
            return None
        return {"$and": [{"$not": [holds(p["as"])]}, holds(p["local"])]}

    def server_settle_stages(self, step: Step) -> list[dict[str, Any]] | None:
        """The copy read inside the server: ``$lookup`` of the referenced collection, kept where the
        foreign value equals the reference (``$eq``: no array holding it, as Python's dict), the last found
        (a later document wins, as in :meth:`context`), the step's fields in the step's order."""
        p = step.params
        if self.server_stages(step) is None:
            return None
        found, local = "__mongopat_referenced", value_at(p["local"])
        matching = {"$filter": {"input": f"${found}", "cond": {"$eq": [f"$$this.{p['foreign']}", local]}}}
        # The fields read as field paths of the document (where a missing one is "missing" to $type on
        # every server), not of a $let variable (test_conformance.py: SecantusDB says "null" there).
        pairs = [
            {"$cond": [{"$eq": [{"$type": f"${found}.{name}"}, "missing"]}, [], [[name, f"${found}.{name}"]]]}
            for name in p["fields"]
            if "." not in name  # Python never copies a dotted name: the projection nests it
        ]
        copy = {"$cond": [{"$eq": [f"${found}", None]}, "$$REMOVE", {"$arrayToObject": {"$concatArrays": pairs}}]}
        return [
            {"$lookup": {"from": p["from"], "localField": p["local"], "foreignField": p["foreign"], "as": found}},
            {"$set": {found: {"$ifNull": [{"$arrayElemAt": [matching, -1]}, None]}}},
            *set_stages(p["as"], copy),
            {"$unset": found},
        ]

    def server_declines(self, step: Step) -> Any:
        return declined_key(value_at(step.params["local"]), [*TAKEN_TYPES, "double"])

    def server_range_key(self, step: Step) -> Any:
        return value_at(step.params["local"])

    def server_range_stages(self, step: Step) -> list[dict[str, Any]]:
        """Each reference's document found inside the server, as :meth:`context` keys them: of a foreign
        value Python compares alike (see FOREIGN_TYPES), equal to the reference (``$eq``: no array holding
        it), the last found (a later document wins), with the fields copied. Only the references that
        find one travel, with their document, which is read no other way."""
        p = step.params
        typed = {"$expr": {"$in": [{"$type": f"${p['foreign']}"}, FOREIGN_TYPES]}}
        pipeline = [{"$match": typed}, {"$project": without_overlaps(dict.fromkeys([p["foreign"], *p["fields"]], 1))}]
        lookup = {"from": p["from"], "localField": "_id", "foreignField": p["foreign"], "pipeline": pipeline}
        equal = {"$filter": {"input": "$__found", "cond": {"$eq": [f"$$this.{p['foreign']}", "$_id"]}}}
        stages: list[dict[str, Any]] = [
            {"$lookup": {**lookup, "as": "__found"}},
            {"$project": {"_id": 1, "d": {"$arrayElemAt": [equal, -1]}}},
            {"$match": {"d": {"$exists": True}}},
        ]
        foreign = p["foreign"]
        if "." not in foreign and foreign not in heads(*p["fields"]):
            stages.append({"$unset": f"d.{foreign}"})  # the key itself, read to compare: it travels as _id
        return stages

    def server_range_values(self, step: Step, groups: list[Document], source: ContextSource) -> RangeValues:
        """The range's references that find a document (``groups``: each with it, ``d``), each with the
        copy :meth:`transform` writes."""
        fields = step.params["fields"]
        taken = [(group["_id"], group["d"]) for group in groups if _compared_alike(group["_id"])]
        variables = {
            KEYS: {"$literal": [key for key, _found in taken]},
            COPIES: {"$literal": [{name: found[name] for name in fields if name in found} for _key, found in taken]},
        }
        return RangeValues(variables, {"$in": [value_at(step.params["local"]), f"$${KEYS}"]})


def _compared_alike(value: Any) -> bool:
    """Whether Python's dict lookup and the server's ``$indexOfArray`` take ``value`` as equal to the same
    references (see TAKEN_TYPES)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, float):
        return not math.isnan(value)
    return isinstance(value, (str, ObjectId, int, datetime))
