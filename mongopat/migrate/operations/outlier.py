"""outlier: array elements past a threshold moved into overflow documents."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from mongopat.guide.placeholders import param
from mongopat.guide.reads import ReadPlan
from mongopat.guide.writes import WritePlan, command
from mongopat.migrate.operations.base import (
    INT,
    ORIGINAL,
    STR,
    DocumentOperation,
    Param,
    Step,
    StepType,
    WrittenFiles,
    check_top_level,
    has_field,
    restore_field,
    top_level,
)
from mongopat.migrate.transform_api import Context, Document, Result, copy_document, heads

if TYPE_CHECKING:
    from mongopat.guide.cost import Evidence


class Operation(DocumentOperation):
    plan_order = 3
    type = StepType(
        "outlier",
        "document",
        {
            "field": Param(STR),
            "threshold": Param(INT),
            "overflow_collection": Param(STR),
            "flag_field": Param(STR, False, "has_overflow"),
        },
        "move array elements past a threshold into overflow documents (outlier pattern)",
        creates=("overflow_collection",),
    )

    def rewrite_read(self, read: ReadPlan, step: Step, evidence: Evidence) -> None:
        p = step.params
        name = p["field"]
        if read.collection != step.collection or not read.uses(name):
            return
        whole = {
            "$cond": [{"$isArray": f"$_doc.{name}"}, {"$concatArrays": [f"$_doc.{name}", "$_tail"]}, f"$_doc.{name}"]
        }
        stages: list[dict[str, Any]] = [
            {
                "$lookup": {
                    "from": p["overflow_collection"],
                    "localField": "_id",
                    "foreignField": "parentId",
                    "as": "_pages",
                }
            },
            {"$unwind": {"path": "$_pages", "preserveNullAndEmptyArrays": True}},
            {
                "$unwind": {
                    "path": f"$_pages.{name}",
                    "includeArrayIndex": "_position",
                    "preserveNullAndEmptyArrays": True,
                }
            },
            {"$sort": {"_pages.page": 1, "_position": 1}},
            {"$group": {"_id": "$_id", "_doc": {"$first": "$$ROOT"}, "_tail": {"$push": f"$_pages.{name}"}}},
            {"$set": {f"_doc.{name}": whole}},
            {"$replaceRoot": {"newRoot": "$_doc"}},
            {"$project": {"_pages": 0, "_position": 0}},
        ]
        read.reshape(stages, [name], reorders=True)
        read.notes.append(
            f"documents flagged `{p['flag_field']}` get the rest of `{name}` from {p['overflow_collection']}; a read "
            f"that needs only the first {p['threshold']} elements can drop these stages"
        )

    def indexes(self, step: Step) -> list[tuple[str, dict[str, int]]]:
        return [(name, {"parentId": 1}) for name in step.created_collections()]

    def during_read(self, before: ReadPlan, after: ReadPlan, step: Step) -> ReadPlan:
        return after.copy()  # a document of the old shape goes through the rewritten read unchanged

    def side_documents(self, step: Step, evidence: Evidence) -> float | None:
        mean = evidence.mean_length(step.collection, step.params["field"])
        if mean is None:
            return None
        return max(0.0, (mean - step.params["threshold"]) / step.params["threshold"])  # pages past the head

    def update_write(self, step: Step, per_sec: float) -> WritePlan | None:
        """An element added: to the head while it has room, else to the last page while it has room, else
        to a new page; a document whose head is full is flagged first (its element goes to a page)."""
        p = step.params
        name, limit, overflow, flag = p["field"], p["threshold"], p["overflow_collection"], p["flag_field"]
        last = f"{name}.{limit - 1}"  # present when the head, or a page, is full
        push = {"$push": {name: param("element")}}
        before = [command(step.collection, "updateOne", filter={"_id": param("_id")}, update=push)]
        page = {"_id": {"parent": param("_id"), "page": param("page")}, "parentId": param("_id"), "page": param("page")}
        after = [
            command(
                step.collection,
                "updateOne",
                filter={"_id": param("_id"), last: {"$exists": True}},
                update={"$set": {flag: True}},
            ),
            command(step.collection, "updateOne", filter={"_id": param("_id"), last: {"$exists": False}}, update=push),
            command(
                overflow,
                "updateOne",
                filter={"parentId": param("_id"), last: {"$exists": False}},
                update=push,
                unless_matched=True,
            ),
            command(overflow, "insertOne", document={**page, name: [param("element")]}, unless_matched=True),
        ]

        def binder(sample: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
            elements = sample.document.get(name)
            if not isinstance(elements, list) or not elements:
                return None
            element = copy_document(elements[-1])
            pages = sample.after[overflow].count_documents({"parentId": sample.document["_id"]})
            values = {"_id": sample.document["_id"], "element": element}
            return values, {**values, "page": pages + 1}

        return WritePlan(
            step.collection,
            "add_element",
            f"add an element to `{name}` of a document of {step.collection}",
            before,
            after,
            {
                "_id": "the document's _id",
                "element": "the new element",
                "page": f"the number of its pages in {overflow}, plus one (used only when every page is full)",
            },
            per_sec,
            {"before": 1, "after": 2},
            binder,
            sample_filter={f"{name}.{limit}": {"$exists": True}},  # documents with overflow, and one of any kind
        )

    def new_shape(self, step: Step) -> str:
        p = step.params
        return (
            f"at most {p['threshold']} elements in `{p['field']}`, the rest in pages of {p['overflow_collection']} "
            f"and `{p['flag_field']}`: true"
        )

    def deploy(self, step: Step) -> dict[str, list[str]]:
        p = step.params
        return {
            "before": [
                f"`{step.collection}`: reads that need all of `{p['field']}` join {p['overflow_collection']} when "
                f"`{p['flag_field']}` is set; an element added past {p['threshold']} goes to the last page"
            ],
            "during": [f"`{step.collection}`: a long `{p['field']}` may still be whole in a document not flagged"],
            "after": [],
        }

    side_collections = ("overflow_collection",)

    def new_shape_marker(self, step: Step) -> str | None:
        return step.params["flag_field"]

    def file_stats(self, documents: list[Document], step: Step) -> dict[str, int]:
        lists = [doc.get(step.params["field"]) for doc in documents]
        return {"elements": sum(len(found) for found in lists if isinstance(found, list))}

    changes_only_the_top_level = True

    only_copies_the_id = True

    def check(self, params: dict[str, Any]) -> None:
        check_top_level("outlier", params, "field", "flag_field")

    def read_fields(self, step: Step) -> frozenset[str] | None:
        return heads("_id", step.params["field"], step.params["flag_field"])

    def transform(self, doc: Document, step: Step, ctx: Context) -> Result:
        name, limit = step.params["field"], step.params["threshold"]
        elements = doc.get(name)
        if not isinstance(elements, list) or len(elements) <= limit:
            return Result(doc)
        overflow = [
            {"_id": {"parent": doc.get("_id"), "page": page}, "parentId": doc.get("_id"), "page": page,
             name: elements[start : start + limit]}
            for page, start in enumerate(range(limit, len(elements), limit), 1)
        ]  # fmt: skip
        doc[name] = elements[:limit]
        doc[step.params["flag_field"]] = True
        return Result(doc, {step.params["overflow_collection"]: overflow})

    def server_stages(self, step: Step) -> list[dict[str, Any]] | None:
        p = step.params
        if not top_level(p["field"], p["flag_field"]):
            return None
        return [{"$set": {p["field"]: {"$slice": [f"${p['field']}", p["threshold"]]}, p["flag_field"]: True}}]

    def server_pending(self, step: Step) -> Any:
        # The filter's "field.N exists" also matches a document whose field is an object with a key "N".
        name, limit = f"${step.params['field']}", step.params["threshold"]
        longer = {"$cond": [{"$isArray": name}, {"$gt": [{"$size": name}, limit]}, False]}
        return {"$and": [longer, {"$not": [has_field(step.params["flag_field"])]}]}

    def server_side_documents(self, step: Step) -> dict[str, list[dict[str, Any]]] | None:
        """The original's elements past the threshold, a page of ``threshold`` of them per document."""
        if self.server_stages(step) is None:
            return None
        name, limit = step.params["field"], step.params["threshold"]
        elements = f"${ORIGINAL}.{name}"
        number = {"$toInt": {"$divide": ["$$start", limit]}}  # the page: 1 from the threshold on
        page = {"$let": {"vars": {"p": number}, "in": {"_id": {"parent": "$_id", "page": "$$p"}, "parentId": "$_id",
                                                         "page": "$$p",
                                                         name: {"$slice": [elements, "$$start", limit]}}}}  # fmt: skip
        pages = {"$map": {"input": {"$range": [limit, {"$size": elements}, limit]}, "as": "start", "in": page}}
        stages: list[dict[str, Any]] = [{"$project": {"_id": 0, "e": pages}}, {"$unwind": "$e"}, {"$replaceWith": "$e"}]
        return {step.params["overflow_collection"]: stages}

    def side_document_fields(self, step: Step) -> dict[str, frozenset[str]]:
        return {step.params["overflow_collection"]: frozenset(("_id", "parentId", "page"))}

    def written_fields(self, step: Step) -> set[str]:
        p = step.params
        return {p["field"], p["flag_field"]}

    def pending(self, step: Step) -> dict[str, Any]:
        # Arrays longer than the threshold in documents not flagged yet; a flagged document's new elements are
        # the application's to place (the outlier pattern's write path).
        field, limit = step.params["field"], step.params["threshold"]
        return {f"{field}.{limit}": {"$exists": True}, step.params["flag_field"]: {"$exists": False}}

    def is_pending(self, doc: Document, step: Step) -> bool:
        elements = doc.get(step.params["field"])
        return (
            isinstance(elements, list)
            and len(elements) > step.params["threshold"]
            and step.params["flag_field"] not in doc
        )

    def inverse(self, current: Document, original: Document, step: Step, side: list[Document]) -> Document | None:
        """Overflow pages merged back after the embedded elements the step kept; elements the application
        pushed since (embedded or into a page) are kept too."""
        field, limit = step.params["field"], step.params["threshold"]
        result = copy_document(current)
        embedded = result.get(field) if isinstance(result.get(field), list) else []
        moved = [e for page in sorted(side, key=lambda p: p.get("page", 0)) for e in page.get(field) or []]
        result[field] = embedded[:limit] + moved + embedded[limit:]
        restore_field(result, original, step.params["flag_field"])
        return result

    def verify_files(self, step: Step, stats: dict[str, Any], written: WrittenFiles) -> list[str]:
        """Every element is still there: kept embedded or moved to an overflow page."""
        field = step.params["field"]
        elements = partial(_field_length, field)
        kept = written.total(step.collection, elements)
        moved = written.total(step.params["overflow_collection"], elements)
        expected = stats.get("elements", 0)
        if kept + moved != expected:
            return [f"{step.collection}.{field}: {kept} kept + {moved} moved, expected {expected}"]
        return []


def _field_length(field: str, document: Document) -> int:
    """Elements of a top-level array; a field of another type holds none (a string's length is not
    elements)."""
    value = document.get(field)
    return len(value) if isinstance(value, list) else 0
