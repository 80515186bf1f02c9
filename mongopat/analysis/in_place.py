"""Patterns a collection already follows, read off its report entry (fields, sizes, references).

Each recogniser is a pure function of the collection's report dict and returns what it found with the
figures the common-mistake rules check (bucket lengths and bytes, subset lengths, copied fields). The
analysis stores the result in the report (``patterns_in_place``); ``recommend`` names them and does not
recommend them again.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Collection = dict[str, Any]

COUNT_NAMES = ("count", "n", "nReadings", "nreadings", "n_readings", "size", "nsamples", "num", "total_count")
PAIR_NAMES = (("k", "v"), ("key", "value"), ("name", "value"), ("key", "val"))
VERSION_NAMES = ("schemaVersion", "schema_version", "_schemaVersion", "_v", "version_schema")
OVERFLOW_FLAGS = ("has_overflow", "hasOverflow", "has_extras", "hasExtras", "overflow")
NUMERIC = ("double", "int", "long", "decimal")


def _fields(collection: Collection) -> dict[str, dict[str, Any]]:
    return {f["path"]: f for f in collection.get("fields", [])}


def _dominant(field: dict[str, Any] | None) -> str | None:
    if not field or not field.get("types"):
        return None
    top = field["types"][0]
    return top["type"] if top["share"] >= 0.9 else None


def _top_level(fields: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in fields.values() if f["depth"] == 1]


def _children(fields: dict[str, dict[str, Any]], prefix: str) -> dict[str, dict[str, Any]]:
    """Direct children of ``prefix`` (``readings[]`` or ``customer``), by their last name."""
    return {
        path[len(prefix) + 1 :]: field
        for path, field in fields.items()
        if path.startswith(prefix + ".") and "." not in path[len(prefix) + 1 :]
    }


# Dates that stamp a document's life (Mongoose's createdAt/updatedAt, audit fields) are not a time window.
AUDIT_DATE = re.compile(r"^_?(created|updated|modified|deleted|last_?modified|inserted)(_?at|_?on|_?date)?$", re.I)
# Fields of an element that name who or what it is about: a list of participants, not readings.
IDENTITY_NAME = re.compile(r"(?:Id|_id|ID|Ids|_ids|Ref|_ref)$|^(user|member|participant|author|owner|role)s?$", re.I)


def _measurements(children: dict[str, dict[str, Any]]) -> list[str]:
    """Numeric fields of an array's elements whose values vary: what readings measure."""
    return [
        name
        for name, child in children.items()
        if _dominant(child) in NUMERIC and ((child.get("cardinality") or {}).get("distinct") or 0) > 1
    ]


def _identities(children: dict[str, dict[str, Any]]) -> list[str]:
    """Fields naming who or what an element is about (a reading's own ``_id`` names only the reading)."""
    return [
        name
        for name, child in children.items()
        if name != "_id" and (_dominant(child) == "objectId" or IDENTITY_NAME.search(name))
    ]


def bucket(collection: Collection) -> dict[str, Any] | None:
    """Documents each holding an array of readings with a count or a time window: elements that are
    measurements over time (a time per element and numeric values that vary, no identities: a list of
    participants with ``joinedAt`` is not a bucket), or plain numbers. GeoJSON, vectors and coordinate
    pairs are not readings (``array.kind``)."""
    fields = _fields(collection)
    top = _top_level(fields)
    dates = [f["path"] for f in top if _dominant(f) == "date" and not AUDIT_DATE.match(f["path"])]
    counts = [f["path"] for f in top if f["path"] in COUNT_NAMES and _dominant(f) in ("int", "long")]
    # A count beside a window (start and end) is a bucket's own header: then buckets of one reading are
    # buckets too (too small ones, MP207's to report); without both, an array must hold several readings.
    header = bool(counts) and len(dates) >= 2
    for field in top:
        array = field.get("array")
        if not array or (array.get("p50") or 0) < (1 if header else 2) or array.get("kind"):
            continue
        element = array["element_types"][0]["type"] if array.get("element_types") else None
        children = _children(fields, field["path"] + "[]")
        times = [name for name, child in children.items() if _dominant(child) == "date"]
        measured = _measurements(children)
        objects = element == "object"
        readings = bool(times and measured and not _identities(children)) if objects else element in NUMERIC
        if not readings or not (counts or len(dates) >= 2):
            continue
        size = collection.get("document_size", {})
        return {
            "pattern": "bucket",
            "fields": [field["path"], *counts[:1], *dates[:2]],
            "evidence": {
                "array": field["path"],
                "time_field": f"{field['path']}[].{times[0]}" if times else None,
                "count_field": counts[0] if counts else None,
                "window_fields": dates[:2],
                "measurements": [f"{field['path']}[].{name}" for name in measured],
                "readings_p50": array.get("p50"),
                "readings_p95": array.get("p95"),
                "readings_max": array.get("max"),
                "bucket_bytes_p50": size.get("p50"),
                "bucket_bytes_p95": size.get("p95"),
                "bucket_bytes_max": size.get("max"),
            },
        }
    return None


def attribute(collection: Collection) -> dict[str, Any] | None:
    """An array of ``{k, v}`` documents (or ``{key, value}``, ``{name, value}``)."""
    fields = _fields(collection)
    for field in _top_level(fields):
        if not field.get("array"):
            continue
        children = _children(fields, field["path"] + "[]")
        for key, value in PAIR_NAMES:
            if key in children and value in children and len(children) <= 3:
                if (children[key].get("presence") or 0) < 0.9 or (children[value].get("presence") or 0) < 0.9:
                    continue
                card = children[key].get("cardinality") or {}
                return {
                    "pattern": "attribute",
                    "fields": [field["path"]],
                    "evidence": {
                        "array": field["path"],
                        "key_field": key,
                        "value_field": value,
                        "distinct_keys": card.get("distinct"),
                        "pairs_p50": field["array"].get("p50"),
                        "pairs_max": field["array"].get("max"),
                    },
                }
    return None


def extended_reference(collection: Collection, others: dict[str, Collection] | None = None) -> list[dict[str, Any]]:
    """Sub-documents that hold a reference to another collection and copies of some of its fields. With
    ``others`` (the report's collections by name), only fields the target holds count as copies: a
    profiler's ``query`` filter names a student, it copies nothing of the student."""
    fields = _fields(collection)
    found = []
    references = collection.get("references", [])
    for field in _top_level(fields):
        if _dominant(field) != "object" or field["path"] == "_id":
            continue  # a compound _id ({parent, page}) names the document, it copies nothing
        children = _children(fields, field["path"])
        for reference in references:
            ref_field = reference["field"]
            inner = ref_field.startswith(field["path"] + ".") and ref_field.count(".") == 1
            beside = ref_field in (f"{field['path']}Id", f"{field['path']}_id", f"{field['path']}ID")
            if reference["target"] == collection.get("name") or not (inner or beside):
                continue
            copied = sorted(name for name in children if f"{field['path']}.{name}" != ref_field and name != "_id")
            target = (others or {}).get(reference["target"])
            if target is not None:
                held = {f["path"] for f in target.get("fields", []) if f["depth"] == 1}
                copied = [name for name in copied if name in held]
            if not copied:
                continue
            found.append(
                {
                    "pattern": "extended_reference",
                    "fields": [field["path"], ref_field],
                    "evidence": {
                        "object": field["path"],
                        "reference": ref_field,
                        "target": reference["target"],
                        "copied_fields": copied,
                        "match_rate": reference.get("match_rate"),
                    },
                }
            )
            break
    return found


def subset(collection: Collection) -> list[dict[str, Any]]:
    """An array next to a count of the whole list (``reviews`` with ``reviewsCount``): a subset embedded."""
    fields = _fields(collection)
    found = []
    for field in _top_level(fields):
        array = field.get("array")
        if not array:
            continue
        name = field["path"]
        for count_name in (f"{name}Count", f"{name}_count", f"num{name[:1].upper()}{name[1:]}", f"total_{name}"):
            count = fields.get(count_name)
            if count is None or _dominant(count) not in ("int", "long"):
                continue
            found.append(
                {
                    "pattern": "subset",
                    "fields": [name, count_name],
                    "evidence": {
                        "array": name,
                        "count_field": count_name,
                        "embedded_p50": array.get("p50"),
                        "embedded_max": array.get("max"),
                    },
                }
            )
            break
    return found


def schema_versioning(collection: Collection) -> dict[str, Any] | None:
    fields = _fields(collection)
    for name in VERSION_NAMES:
        field = fields.get(name)
        if field is not None and _dominant(field) in ("int", "long", "string", "double"):
            card = field.get("cardinality") or {}
            return {
                "pattern": "schema_versioning",
                "fields": [name],
                "evidence": {"field": name, "presence": field.get("presence"), "versions": card.get("distinct")},
            }
    return None


def outlier(collection: Collection) -> dict[str, Any] | None:
    fields = _fields(collection)
    for name in OVERFLOW_FLAGS:
        field = fields.get(name)
        if field is not None and _dominant(field) == "bool":
            return {"pattern": "outlier", "fields": [name], "evidence": {"flag": name, "presence": field["presence"]}}
    return None


def tree(collection: Collection) -> dict[str, Any] | None:
    fields = _fields(collection)
    ancestors = fields.get("ancestors")
    if ancestors is None or not ancestors.get("array"):
        return None
    same = [r for r in collection.get("references", []) if r["target"] == collection.get("name")]
    if not same:
        return None
    return {
        "pattern": "tree",
        "fields": ["ancestors"],
        "evidence": {"ancestors": "ancestors", "depth_max": ancestors["array"].get("max")},
    }


def approximation(collection: Collection) -> list[dict[str, Any]]:
    """A counter stored with the factor it is incremented by (``likes`` and ``likesFactor``)."""
    fields = _fields(collection)
    found = []
    for path, field in fields.items():
        if not path.endswith("Factor") or _dominant(field) not in ("int", "long"):
            continue
        counter = path[: -len("Factor")]
        if _dominant(fields.get(counter)) in NUMERIC:
            card = field.get("cardinality") or {}
            factors = [item["value"] for item in card.get("top") or []]
            found.append(
                {
                    "pattern": "approximation",
                    "fields": [counter, path],
                    "evidence": {"counter": counter, "factors": factors},
                }
            )
    return found


RECOGNISERS: tuple[Callable[[Collection], Any], ...] = (
    bucket, attribute, extended_reference, subset, schema_versioning, outlier, tree, approximation,
)  # fmt: skip


def patterns_in_place(collection: Collection, others: dict[str, Collection] | None = None) -> list[dict[str, Any]]:
    """Every pattern the collection already follows, each ``{pattern, fields, evidence}``; ``others``, the
    report's collections by name, lets the recognisers that compare with a referenced collection do so."""
    found: list[dict[str, Any]] = []
    for recognise in RECOGNISERS:
        result = extended_reference(collection, others) if recognise is extended_reference else recognise(collection)
        if isinstance(result, list):
            found.extend(result)
        elif result is not None:
            found.append(result)
    return found
