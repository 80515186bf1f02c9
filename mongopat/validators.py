"""``$jsonSchema`` validators drawn from an analysis, in the shape ``collMod`` takes.

Every analysed document satisfies the schema of its collection: each path gets the BSON types seen there
(an integer read from a JSON export, whose width the file does not keep, may be an int or a long), a field
present in every document (or every element of its array) is required, an array gets its items' types.
Nothing is bounded or enumerated that a sample cannot support: no ``enum``, no ``minimum``, no
``maxItems``, no ``additionalProperties: false``. A field whose names are data (a map) is an object of any
fields.
"""

from __future__ import annotations

from typing import Any

JSON_SCHEMA_VERSION = 1

# The report's type names are MongoDB's $type aliases, which $jsonSchema's bsonType takes as they are.
WIDTH_UNKNOWN = {"int": ["int", "long"]}  # an integer of a JSON export: stored as either


def _types(entries: list[dict[str, Any]], exact_ints: bool) -> list[str]:
    names: list[str] = []
    for entry in entries:
        for name in WIDTH_UNKNOWN.get(entry["type"], [entry["type"]]) if not exact_ints else [entry["type"]]:
            if name not in names:
                names.append(name)
    return names


class _Node:
    def __init__(self) -> None:
        self.types: list[str] = []
        self.count = 0
        self.children: dict[str, _Node] = {}
        self.items: _Node | None = None  # the elements of an array
        self.item_types: list[str] = []
        self.item_objects = 0  # elements that are documents: the base of their fields' "required"
        self.objects = 0  # values that are documents
        self.is_map = False

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.types:
            out["bsonType"] = self.types[0] if len(self.types) == 1 else self.types
        if "object" in self.types and not self.is_map and self.children:
            out.update(_properties(self.children, self.objects))
        if "array" in self.types and self.item_types:
            items: dict[str, Any] = {"bsonType": self.item_types[0] if len(self.item_types) == 1 else self.item_types}
            if self.items is not None and "object" in self.item_types and self.items.children:
                items.update(_properties(self.items.children, self.item_objects))
            out["items"] = items
        return out


def _properties(children: dict[str, _Node], base: int) -> dict[str, Any]:
    out: dict[str, Any] = {"properties": {name: node.schema() for name, node in children.items()}}
    required = [name for name, node in children.items() if base and node.count == base]
    if required:
        out["required"] = required
    return out


def collection_schema(collection: dict[str, Any], exact_ints: bool = False) -> dict[str, Any]:
    """The ``$jsonSchema`` of one analysed collection (a report's collection entry)."""
    root = _Node()
    root.types, root.objects = ["object"], collection.get("count_analysed") or _analysed(collection)
    for field in collection["fields"]:
        path = field["path"]
        if any(mark in path for mark in ("*", "$", "<")):
            continue
        node = root
        for part in path.split("."):
            if part.endswith("[]"):
                parent = node.children.setdefault(part[:-2], _Node())
                if parent.items is None:
                    parent.items = _Node()
                node = parent.items
            else:
                if node.is_map:
                    break
                node = node.children.setdefault(part, _Node())
        else:
            node.types = _types(field["types"], exact_ints)
            node.count = field["count"]
            node.objects = next((t["count"] for t in field["types"] if t["type"] == "object"), 0)
            node.is_map = bool(field.get("map"))
            array = field.get("array") or {}
            if array.get("element_types"):
                node.item_types = _types(array["element_types"], exact_ints)
                node.item_objects = next((t["count"] for t in array["element_types"] if t["type"] == "object"), 0)
    schema = root.schema()
    schema.pop("bsonType", None)
    return {"bsonType": "object", **schema}


def _analysed(collection: dict[str, Any]) -> int:
    sampling = collection.get("sampling") or {}
    return int(sampling.get("documents") or collection.get("count") or 0)


def validators_document(report: dict[str, Any]) -> dict[str, Any]:
    """Per collection, the ``collMod`` command that sets its validator (``moderate`` and ``error``: the
    settings a first validator on live data usually starts with)."""
    exact = report.get("source", {}).get("kind") in ("mongodb", "mongomock")  # a server keeps int and long apart
    collections = {}
    for collection in report["collections"]:
        if not collection.get("fields"):
            continue
        collections[collection["name"]] = {
            "collMod": collection["name"],
            "validator": {"$jsonSchema": collection_schema(collection, exact_ints=exact)},
            "validationLevel": "moderate",
            "validationAction": "error",
        }
    return {
        "json_schema_version": JSON_SCHEMA_VERSION,
        "note": "every analysed document satisfies its collection's schema; a sample may not show every shape",
        "collections": collections,
    }


def analysed(name: str, documents: list[dict[str, Any]]) -> dict[str, Any]:
    """The report entry of ``documents`` as one collection, analysed whole (the input of
    :func:`collection_schema`)."""
    import bson

    from mongopat.analysis.collection import AnalyzeOptions, CollectionAnalysis

    analysis = CollectionAnalysis(name, AnalyzeOptions())
    for document in documents:
        analysis.add(document, len(bson.encode(document)))
    analysis.flush()
    return analysis.to_dict()
