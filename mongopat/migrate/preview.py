"""A document before and after a migration step, for people to see what a recommendation does.

The "before" document is the collection's example (kept only with ``--show-values``) or, by default, a
synthetic document built from the measured field paths and types with placeholder values, so no real
value is shown unless asked for.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

from bson import Decimal128, Int64, ObjectId, json_util

from mongopat.migrate.operations import STEP_OPERATIONS
from mongopat.migrate.steps import Step
from mongopat.migrate.transform_api import Context

PLACEHOLDERS: dict[str, Any] = {
    "string": "<string>",
    "int": 0,
    "long": Int64(0),
    "double": 0.0,
    "decimal": Decimal128("0"),
    "bool": False,
    "date": datetime.datetime(2026, 1, 1),
    "objectId": ObjectId("000000000000000000000001"),
    "null": None,
}


def _placeholder(type_name: str, path: str) -> Any:
    if type_name == "string":
        return f"<{path.rsplit('.', 1)[-1].rstrip('[]')}>"
    return PLACEHOLDERS.get(type_name, f"<{type_name}>")


def synthetic_document(collection: dict[str, Any]) -> dict[str, Any]:
    """One document with every measured path, placeholder values of each path's main type."""
    root: dict[str, Any] = {}
    containers: dict[str, Any] = {"": root}
    for entry in collection.get("fields", []):
        path = entry["path"]
        types = entry.get("types") or []
        main = types[0]["type"] if types else "null"
        if path.endswith("[]"):
            continue  # nested arrays: their parent entry describes them
        parent_path, _, name = path.rpartition(".")
        container = containers.get(parent_path)
        if not isinstance(container, dict):
            continue
        if main == "object":
            value: Any = {}
            containers[path] = value
        elif main == "array":
            elements = (entry.get("array") or {}).get("element_types") or []
            element_type = elements[0]["type"] if elements else "null"
            if element_type == "object":
                element: dict[str, Any] = {}
                containers[path + "[]"] = element
                value = [element]
            else:
                value = [_placeholder(element_type, path)]
        else:
            value = _placeholder(main, path)
        container[name] = value
    return root


def example_document(collection: dict[str, Any], show_values: bool) -> dict[str, Any]:
    if show_values and collection.get("example") is not None:
        return json_util.loads(json.dumps(collection["example"]))
    return synthetic_document(collection)


def preview(step: Step, before: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """(documents before, documents after, a note) for one step."""
    return STEP_OPERATIONS[step.name].preview(step, before)


def to_json_text(document: dict[str, Any]) -> str:
    return json_util.dumps(document, json_options=json_util.RELAXED_JSON_OPTIONS, indent=2)


def dry_run_examples(step: Step, samples: list[dict[str, Any]], ctx: Context | None) -> list[dict[str, Any]]:
    """Before/after pairs for ``migrate up --dry-run``: the real transform on real samples for document
    steps (``ctx`` gathered by the runner), a preview for the others."""
    return STEP_OPERATIONS[step.name].examples(step, samples, ctx) if samples else []
