"""map_to_array: a sub-document keyed by values turned into an array of documents holding the key."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mongopat.guide.reads import ReadPlan
from mongopat.migrate.operations.base import (
    DICT,
    STR,
    DocumentOperation,
    Param,
    ServerUnmade,
    Step,
    StepError,
    StepType,
    top_level,
)
from mongopat.migrate.operations.server_paths import NOT_OK, keys_of, plain, set_stages, value_at
from mongopat.migrate.transform_api import Context, Document, Result, copy_document, get_path, heads, set_path

if TYPE_CHECKING:
    from mongopat.guide.cost import Evidence


class Operation(DocumentOperation):
    plan_order = 1
    type = StepType(
        "map_to_array",
        "document",
        {
            "field": Param(STR),
            "layout": Param(STR, False, "merge"),
            "key_field": Param(STR, False, "k"),
            "value_field": Param(STR, False, "v"),
            "key_in_value": Param(bool, False, False),
            "index": Param(DICT, False),
        },
        "turn a sub-document keyed by values (ids, dates) into an array of documents (attribute pattern)",
    )

    def rewrite_read(self, read: ReadPlan, step: Step, evidence: Evidence) -> None:
        name = step.params["field"]
        if read.collection != step.collection or not read.uses(name):
            return
        read.reshape([{"$set": {name: as_map(step.params, f"${name}")}}], [name])

    def server_unmade(self, step: Step) -> dict[str, ServerUnmade]:
        # The map again from its array: transform keeps every key, in order, and every value as it was.
        p = step.params
        name = p["field"]
        if not (top_level(name) and plain(name)):
            return {}
        key = f"$$element.{p['key_field']}"
        # An element $arrayToObject takes: a document holding a string key without a NUL byte (and, for
        # layout pair, a value; a missing one is told by the field's name: conformance table).
        element = [
            {"$eq": [{"$type": "$$element"}, "object"]},
            {"$eq": [{"$type": key}, "string"]},
            {"$eq": [{"$indexOfBytes": [key, "\u0000"]}, -1]},
        ]
        if p["layout"] == "pair":
            element.append({"$in": [p["value_field"], keys_of({"$objectToArray": "$$element"})]})
        # Each test only where the ones before hold ($cond, lazy on every server): no $objectToArray of what
        # is not a document.
        every: Any = True
        for test in reversed(element):
            every = {"$cond": [test, every, False]}
        each = {"$map": {"input": "$$wv", "as": "element", "in": every}}
        taken = {"$cond": [{"$isArray": "$$wv"}, {"$allElementsTrue": [each]}, False]}
        return {name: ServerUnmade({"$cond": [taken, {"ok": True, "v": as_map(p, "$$wv")}, NOT_OK]})}

    def indexes(self, step: Step) -> list[tuple[str, dict[str, int]]]:
        return [(step.collection, dict(step.params["index"]))] if step.params.get("index") else []

    def during_read(self, before: ReadPlan, after: ReadPlan, step: Step) -> ReadPlan:
        return after.copy()  # a document of the old shape goes through the rewritten read unchanged

    def new_shape(self, step: Step) -> str:
        p = step.params
        return f"`{p['field']}` an array of documents, each holding its key in `{p['key_field']}`"

    def read_fields(self, step: Step) -> frozenset[str] | None:
        return heads(step.params["field"])

    def transform(self, doc: Document, step: Step, ctx: Context) -> Result:
        """``{"m": {"<id>": {...}}}`` -> ``{"m": [{"k": "<id>", ...}]}`` in key order, so :func:`array_to_map`
        gives back the same document. Layout ``merge`` puts the key into each value (a document); ``pair``
        makes ``{k, v}`` of any value; with ``key_in_value`` the values already hold their key in ``key_field``.
        A map that is not a sub-document any more (converted, or never one) is left as it is."""
        params = step.params
        value = get_path(doc, params["field"])
        if not isinstance(value, dict):
            return Result(doc)
        key_field = params["key_field"]
        elements = []
        for key, item in value.items():
            if params["layout"] == "pair":
                elements.append({key_field: key, params["value_field"]: item})
                continue
            if not isinstance(item, dict):
                raise ValueError(
                    f"map_to_array: {params['field']}.{key} of document {doc.get('_id')!r} is not a document "
                    "(layout 'merge' needs documents; use layout 'pair')"
                )
            if params["key_in_value"]:
                if item.get(key_field) != key:
                    raise ValueError(
                        f"map_to_array: {params['field']}.{key}.{key_field} of document {doc.get('_id')!r} is "
                        f"{item.get(key_field)!r}, not its key (key_in_value needs it to be the key)"
                    )
                elements.append(item)
            else:
                if key_field in item:
                    raise ValueError(
                        f"map_to_array: {params['field']}.{key} of document {doc.get('_id')!r} already has a field "
                        f"{key_field!r} (choose another key_field, or key_in_value when it holds the key)"
                    )
                elements.append({key_field: key, **item})
        set_path(doc, params["field"], elements)
        return Result(doc)

    def check(self, params: dict[str, Any]) -> None:
        if params["layout"] not in ("merge", "pair"):
            raise StepError(f"map_to_array: layout must be 'merge' or 'pair', got {params['layout']!r}")
        if params["layout"] == "pair" and params["key_in_value"]:
            raise StepError("map_to_array: key_in_value goes with layout 'merge'")
        if params["layout"] == "pair" and params["key_field"] == params["value_field"]:
            raise StepError("map_to_array: key_field and value_field must differ")

    def server_stages(self, step: Step) -> list[dict[str, Any]] | None:
        """Each pair of ``$objectToArray`` (stored order, as Python's ``items()``) made an element: ``{k, v}``
        for layout ``pair``; for ``merge`` the key put first into the value (``$mergeObjects``), or the
        value itself with ``key_in_value``. A map :meth:`transform` refuses is declined
        (:meth:`server_declines`): the client side's pass stops the run with its error, which a server
        cannot raise."""
        p = step.params
        keys = (p["key_field"], p["value_field"])
        if not plain(p["field"]) or not all(top_level(name) for name in keys):
            return None
        if p["layout"] == "pair":
            element: Any = {keys[0]: "$$this.k", keys[1]: "$$this.v"}
        elif p["key_in_value"]:
            element = "$$this.v"
        else:
            element = {"$mergeObjects": [{keys[0]: "$$this.k"}, "$$this.v"]}
        elements = {"$map": {"input": {"$objectToArray": value_at(p["field"])}, "in": element}}
        return set_stages(p["field"], elements)

    def server_declines(self, step: Step) -> Any:
        """A map with a value :meth:`transform` refuses in layout ``merge``: one that is no document, or
        holds ``key_field`` (with ``key_in_value``: does not hold the key there). The field names are read
        with ``$objectToArray``, where a missing field is absent on every server."""
        p = step.params
        if p["layout"] == "pair":
            return None
        key_field = p["key_field"]
        names = keys_of({"$objectToArray": "$$this.v"})
        if p["key_in_value"]:
            refused: Any = {
                "$or": [{"$not": [{"$in": [key_field, names]}]}, {"$ne": [f"$$this.v.{key_field}", "$$this.k"]}]
            }
        else:
            refused = {"$in": [key_field, names]}
        no_document = {"$ne": [{"$type": "$$this.v"}, "object"]}
        each = {"$map": {"input": {"$objectToArray": value_at(p["field"])},
                         "in": {"$cond": [no_document, True, refused]}}}  # fmt: skip
        return {"$cond": [{"$eq": [{"$type": value_at(p["field"])}, "object"]}, {"$anyElementTrue": [each]}, False]}

    def server_pending(self, step: Step) -> Any:
        field = step.params["field"]
        return {"$eq": [{"$type": value_at(field)}, "object"]} if "." in field else None

    def written_fields(self, step: Step) -> set[str]:
        p = step.params
        return {p["field"]}

    def pending(self, step: Step) -> dict[str, Any]:
        # $type matches an array by its elements: an array of documents is "object" too, hence the $not.
        field = step.params["field"]
        return {"$and": [{field: {"$type": "object"}}, {field: {"$not": {"$type": "array"}}}]}

    def is_pending(self, doc: Document, step: Step) -> bool:
        return isinstance(get_path(doc, step.params["field"]), dict)

    def inverse(self, current: Document, original: Document, step: Step, side: list[Document]) -> Document | None:
        elements = get_path(current, step.params["field"])
        result = array_to_map(copy_document(current), step)
        if isinstance(elements, list) and not isinstance(get_path(result, step.params["field"]), dict):
            return None  # an element the application added without a key: no map holds it
        return result


def array_to_map(doc: Document, step: Step) -> Document:
    """The inverse of :func:`map_to_array` (an array that is not one of its outputs is left as it is)."""
    params = step.params
    elements = get_path(doc, params["field"])
    if not isinstance(elements, list):
        return doc
    key_field = params["key_field"]
    restored: dict[str, Any] = {}
    for element in elements:
        if not isinstance(element, dict) or not isinstance(element.get(key_field), str):
            return doc
        if params["layout"] == "pair":
            restored[element[key_field]] = element.get(params["value_field"])
        elif params["key_in_value"]:
            restored[element[key_field]] = element
        else:
            restored[element[key_field]] = {name: item for name, item in element.items() if name != key_field}
    set_path(doc, params["field"], restored)
    return doc


def as_map(params: dict[str, Any], value: Any) -> dict[str, Any]:
    """The expression making the map again of ``value`` where it is an array :meth:`Operation.transform`
    made (the key of each element, and the rest of it as the key's value); any other value as it is."""
    key = f"$$element.{params['key_field']}"
    if params["layout"] == "pair":
        item: Any = f"$$element.{params['value_field']}"
    elif params["key_in_value"]:
        item = "$$element"
    else:
        others = {"$ne": ["$$pair.k", params["key_field"]]}
        item = {"$arrayToObject": {"$filter": {"input": {"$objectToArray": "$$element"}, "as": "pair", "cond": others}}}
    pairs = {"$map": {"input": value, "as": "element", "in": {"k": key, "v": item}}}
    return {"$cond": [{"$isArray": value}, {"$arrayToObject": pairs}, value]}
