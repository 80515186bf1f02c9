"""subset: the first N elements kept embedded, the full list in its own collection."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mongopat.guide.placeholders import param
from mongopat.guide.reads import ReadPlan, Stage
from mongopat.guide.writes import WritePlan, command
from mongopat.migrate.operations.base import (
    DICT,
    INT,
    ORIGINAL,
    STR,
    DocumentOperation,
    Param,
    Step,
    StepType,
    WrittenFiles,
    restore_field,
)
from mongopat.migrate.operations.server_order import first_in_order, ordered_differently
from mongopat.migrate.operations.server_paths import holds, plain, set_stages, value_at
from mongopat.migrate.transform_api import Context, Document, Result, copy_document, get_path, has_path, heads, set_path

if TYPE_CHECKING:
    from mongopat.guide.cost import Evidence


class Operation(DocumentOperation):
    plan_order = 3
    type = StepType(
        "subset",
        "document",
        {"field": Param(STR), "keep": Param(INT), "sort": Param(DICT, False, {}), "full_collection": Param(STR)},
        "keep the first N elements embedded, the full list in its own collection (subset pattern)",
        creates=("full_collection",),
    )

    def rewrite_read(self, read: ReadPlan, step: Step, evidence: Evidence) -> None:
        p = step.params
        name = p["field"]
        if read.collection != step.collection or not read.uses(name):
            return
        stage = read.find("embed")
        embed = stage.spec if stage is not None else None
        served = embed is not None and embed.field == name and embed.limit and embed.limit <= p["keep"]
        if served and stage is not None and embed is not None and dict(embed.sort) == dict(p["sort"] or {}):
            index = read.stages.index(stage)
            read.stages[index] = Stage("embed", [{"$set": {name: {"$slice": [f"${name}", embed.limit]}}}], embed)
            read.notes.append(f"the {embed.limit} elements shown are the first embedded ones: no sort on read")
            return
        # The read needs the whole list: it is in the full collection, one document per element.
        full = p["full_collection"]
        bookkeeping = {
            "$and": [
                {"$ne": ["$$pair.k", "parentId"]},
                {"$ne": ["$$pair.k", "index"]},
                {
                    "$or": [
                        {"$ne": ["$$pair.k", "_id"]},
                        {"$ne": ["$$pair.v", {"parent": "$$element.parentId", "index": "$$element.index"}]},
                    ]
                },
            ]
        }
        element = {
            "$arrayToObject": {"$filter": {"input": {"$objectToArray": "$$element"}, "as": "pair", "cond": bookkeeping}}
        }
        elements = {"$map": {"input": "$_full", "as": "element", "in": element}}
        # A document the step has not migrated yet (while up runs) has no count and keeps its whole list.
        migrated = {"$gt": [{"$ifNull": [f"$_doc.{name}Count", -1]}, -1]}
        stages: list[dict[str, Any]] = [
            {"$lookup": {"from": full, "localField": "_id", "foreignField": "parentId", "as": "_full"}},
            {"$unwind": {"path": "$_full", "preserveNullAndEmptyArrays": True}},
            {"$sort": {"_full.index": 1}},
            {"$group": {"_id": "$_id", "_doc": {"$first": "$$ROOT"}, "_full": {"$push": "$_full"}}},
            {"$set": {f"_doc.{name}": {"$cond": [migrated, elements, f"$_doc.{name}"]}}},
            {"$replaceRoot": {"newRoot": "$_doc"}},
            {"$project": {"_full": 0}},
        ]
        read.reshape(stages, [name], reorders=True)
        read.extra += evidence.mean_length(step.collection, name) or 1
        read.notes.append(f"the read needs every element of `{name}`: they are joined from {full}")

    def indexes(self, step: Step) -> list[tuple[str, dict[str, int]]]:
        return [(name, {"parentId": 1}) for name in step.created_collections()]

    def during_read(self, before: ReadPlan, after: ReadPlan, step: Step) -> ReadPlan:
        # The embedded elements of a migrated document are the first ones in the step's order: today's sort
        # and slice give the same result on them. A read of the whole list joins only migrated documents.
        embed_before, embed_after = before.find("embed"), after.find("embed")
        served = embed_before is not None and embed_after is not None and embed_after.stages != embed_before.stages
        return before.copy() if served else after.copy()

    def update_write(self, step: Step, per_sec: float) -> WritePlan | None:
        """An element added to the list: pushed in the step's order and cut at ``keep``, counted, and
        inserted into the full collection at the next index."""
        p = step.params
        name, full = p["field"], p["full_collection"]
        push: dict[str, Any] = {"$each": [param("element")], "$slice": p["keep"]}
        if p["sort"]:
            push["$sort"] = dict(p["sort"])
        before = [
            command(
                step.collection, "updateOne", filter={"_id": param("_id")}, update={"$push": {name: param("element")}}
            )
        ]
        after = [
            command(
                step.collection,
                "updateOne",
                filter={"_id": param("_id")},
                update={"$push": {name: push}, "$inc": {f"{name}Count": 1}},
            ),
            command(full, "insertOne", document=param("fullDocument", shape="new")),
        ]

        def binder(sample: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
            parent = sample.document["_id"]
            current = sample.after[step.collection].find_one({"_id": parent})
            elements = get_path(sample.document, name)
            if current is None or not isinstance(elements, list) or not elements or not isinstance(elements[-1], dict):
                return None
            element = newest(elements, p["sort"])
            index = get_path(current, f"{name}Count") if has_path(current, f"{name}Count") else len(elements)
            full_document = {"_id": {"parent": parent, "index": index}, "parentId": parent, "index": index, **element}
            values = {"_id": parent, "element": element}
            return values, {**values, "fullDocument": full_document}

        return WritePlan(
            step.collection,
            "add_element",
            f"add an element to `{name}` of a document of {step.collection}",
            before,
            after,
            {
                "_id": "the document's _id",
                "element": "the new element",
                "fullDocument": f"the element for {full}: `_id` {{parent, index}}, `parentId`, `index` = the "
                f"document's `{name}Count` before the push, and the element's fields",
            },
            per_sec,
            {"before": 1, "after": 2},
            binder,
        )

    def side_documents(self, step: Step, evidence: Evidence) -> float | None:
        return evidence.mean_length(step.collection, step.params["field"])  # one per element

    def new_shape(self, step: Step) -> str:
        p = step.params
        return (
            f"`{p['field']}` the first {p['keep']} elements, `{p['field']}Count` their number, and each element "
            f"in {p['full_collection']}"
        )

    def deploy(self, step: Step) -> dict[str, list[str]]:
        p = step.params
        name = p["field"]
        return {
            "before": [
                f"`{step.collection}`: adding an element pushes it with `$sort`/`$slice: {p['keep']}` and "
                f"`$inc` `{name}Count`, and inserts it into {p['full_collection']}"
            ],
            "during": [f"`{step.collection}`: a document without `{name}Count` still embeds every element"],
            "after": [f"`{step.collection}`: read the whole list from {p['full_collection']} only when it is needed"],
        }

    side_collections = ("full_collection",)

    def new_shape_marker(self, step: Step) -> str | None:
        return f"{step.params['field']}Count"

    def file_stats(self, documents: list[Document], step: Step) -> dict[str, int]:
        # Only a document the step takes gives its elements to the full list (one already in the new shape
        # is left as it is).
        name, taken = step.params["field"], self.pending_of(documents, step)
        lists = [get_path(doc, name) for doc, pending in zip(documents, taken, strict=True) if pending]
        return {"elements": sum(map(len, lists))}

    changes_only_the_top_level = True

    only_copies_the_id = True

    def read_fields(self, step: Step) -> frozenset[str] | None:
        return heads("_id", step.params["field"], f"{step.params['field']}Count")

    def transform(self, doc: Document, step: Step, ctx: Context) -> Result:
        name = step.params["field"]
        elements = get_path(doc, name)
        if not isinstance(elements, list):
            return Result(doc)
        parent = doc.get("_id")
        full = [
            {"_id": {"parent": parent, "index": index}, "parentId": parent, "index": index,
             **(element if isinstance(element, dict) else {"value": element})}
            for index, element in enumerate(elements)
        ]  # fmt: skip
        set_path(doc, name, _sorted(elements, step.params["sort"])[: step.params["keep"]])
        set_path(doc, f"{name}Count", len(elements))
        return Result(doc, {step.params["full_collection"]: full})

    def server_stages(self, step: Step) -> list[dict[str, Any]] | None:
        name, sort, keep = step.params["field"], step.params["sort"], step.params["keep"]
        if not plain(name) or (sort and (keep < 1 or not _readable(*sort))):
            return None
        # Only pending documents are given, whose every prefix of a nested field is a sub-document: the field
        # path reads the list itself.
        first = first_in_order(f"${name}", sort, keep) if sort else {"$slice": [f"${name}", keep]}
        count = {"$size": f"${name}"}
        if "." not in name:
            return [{"$set": {name: first, f"{name}Count": count}}]  # one $set: both read the list as it was
        # The count first, from the whole list; the list keeps its place, the new count goes last.
        return [*set_stages(f"{name}Count", count), *set_stages(name, first)]

    def server_declines(self, step: Step) -> Any:
        sort = step.params["sort"]
        return ordered_differently(f"${step.params['field']}", sort) if sort else None

    def server_pending(self, step: Step) -> Any:
        name = step.params["field"]
        return {"$and": [{"$isArray": value_at(name)}, {"$not": [holds(f"{name}Count")]}]}

    def server_side_documents(self, step: Step) -> dict[str, list[dict[str, Any]]] | None:
        """Every element of the original's list, at its index, with its parent (a value that is not a
        document as ``value``)."""
        if self.server_stages(step) is None:
            return None
        elements = f"${ORIGINAL}.{step.params['field']}"
        element = {
            "$let": {
                "vars": {"x": {"$arrayElemAt": [elements, "$$i"]}},
                "in": {"$cond": [{"$eq": [{"$type": "$$x"}, "object"]}, "$$x", {"value": "$$x"}]},
            }
        }
        place = {"_id": {"parent": "$_id", "index": "$$i"}, "parentId": "$_id", "index": "$$i"}
        full = {"$map": {"input": {"$range": [0, {"$size": elements}]}, "as": "i",
                         "in": {"$mergeObjects": [place, element]}}}  # fmt: skip
        stages: list[dict[str, Any]] = [{"$project": {"_id": 0, "e": full}}, {"$unwind": "$e"}, {"$replaceWith": "$e"}]
        return {step.params["full_collection"]: stages}

    def side_document_fields(self, step: Step) -> dict[str, frozenset[str]]:
        return {step.params["full_collection"]: frozenset(("_id", "parentId", "index"))}

    def written_fields(self, step: Step) -> set[str]:
        p = step.params
        return {p["field"], f"{p['field']}Count"}

    def pending(self, step: Step) -> dict[str, Any]:
        field = step.params["field"]
        return {f"{field}Count": {"$exists": False}, field: {"$type": "array"}}

    def is_pending(self, doc: Document, step: Step) -> bool:
        name = step.params["field"]
        return isinstance(get_path(doc, name), list) and not has_path(doc, f"{name}Count")

    def pending_of(self, documents: list[Document], step: Step) -> list[bool]:
        name = step.params["field"]
        if "." in name:
            return super().pending_of(documents, step)
        marker = f"{name}Count"  # is_pending's test of a top-level list, without a call per document
        return [isinstance(doc.get(name), list) and marker not in doc for doc in documents]

    def inverse(self, current: Document, original: Document, step: Step, side: list[Document]) -> Document | None:
        """The full list back in place, in its order, with the elements the application added since, to the
        embedded subset or to the full list, after it."""
        field = step.params["field"]
        result = copy_document(current)
        full = [_element(item) for item in sorted(side, key=lambda item: item.get("index", 0))]
        embedded = get_path(result, field) if isinstance(get_path(result, field), list) else []
        added = [element for element in embedded if element not in full]
        set_path(result, field, full + added)
        restore_field(result, original, f"{field}Count")
        return result

    def verify_files(self, step: Step, stats: dict[str, Any], written: WrittenFiles) -> list[str]:
        """The full list holds every element the documents had."""
        expected = stats.get("elements", 0)
        if written.count(step.params["full_collection"]) != expected:
            return [f"{step.params['full_collection']}: expected {expected} elements"]
        return []


def _element(item: Document) -> Any:
    """A full-list document back to the element it was (a document, or a wrapped scalar)."""
    element = {key: value for key, value in item.items() if key not in ("_id", "parentId", "index")}
    return element["value"] if set(element) == {"value"} else element


def _readable(*paths: str) -> bool:
    """Whether the server reads each sort path of an element as a field path: a nested one too, where a
    prefix that is an array gives an array the server declines (``server_order.ordered_differently``) and
    a prefix that is no document gives nothing, the None Python reads."""
    return all(part and not part.startswith("$") for path in paths for part in path.split("."))


def _sort_key(spec: dict[str, int]) -> Callable[[Any], tuple]:
    def key(element: Any) -> tuple:
        values = []
        for name, _direction in spec.items():
            value = get_path(element, name) if isinstance(element, dict) else None
            values.append((value is None, value))
        return tuple(values)

    return key


def _sorted(elements: list[Any], spec: dict[str, int]) -> list[Any]:
    if not spec:
        return list(elements)
    # One direction for the whole sort: the first field's (mixed directions are rare in subsets).
    reverse = next(iter(spec.values())) == -1
    try:
        return sorted(elements, key=_sort_key(spec), reverse=reverse)
    except TypeError:  # values of mixed types: keep the stored order
        return list(elements)


def newest(elements: list[Any], sort: dict[str, int]) -> Document:
    """A new element like the last one, first in the step's order (a proof adds it to a list)."""
    element = copy_document(elements[-1])
    for key, direction in (sort or {}).items():
        values: list[Any] = [e.get(key) for e in elements if isinstance(e, dict) and e.get(key) is not None]
        if values and all(isinstance(v, datetime.datetime) for v in values):
            step_ = datetime.timedelta(minutes=1)
            element[key] = max(values) + step_ if direction == -1 else min(values) - step_
        elif values and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            element[key] = max(values) + 1 if direction == -1 else min(values) - 1
    if "_id" in element:
        element["_id"] = f"{element['_id']}-new"
    return element
