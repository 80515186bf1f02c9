"""Step mappings of migration files checked against the step types (``mongopat/migrate/operations/``).

Three kinds of step:

- ``document``: each document of the collection is rewritten in place by the pure ``transform`` of its
  module, possibly writing side documents to new collections (history, overflow, the full list of a
  subset);
- ``regroup``: documents are grouped into new documents of the same collection (bucket: many readings ->
  few buckets);
- ``collection``: an operation on a collection or index (create/drop index, copy/rename collection).
"""

from __future__ import annotations

from typing import Any

from mongopat.migrate.operations import STEP_OPERATIONS
from mongopat.migrate.operations.base import Param, Step, StepError, StepType

__all__ = ["STEP_TYPES", "Param", "Step", "StepError", "StepType", "build_step", "collection_name_problem"]


# What a step is lives with each step type (mongopat/migrate/operations/); this module validates step
# mappings against those types.
STEP_TYPES: dict[str, StepType] = {name: operation.type for name, operation in STEP_OPERATIONS.items()}


def build_step(data: dict[str, Any], default_collection: str | None = None) -> Step:
    """Validate a step mapping (``{"step": "bucket", "collection": ..., params...}``)."""
    if not isinstance(data, dict):
        raise StepError("a step is a mapping with a 'step' key")
    name = data.get("step")
    step_type = STEP_TYPES.get(name) if isinstance(name, str) else None
    if step_type is None or not isinstance(name, str):
        import difflib

        close = difflib.get_close_matches(str(name), STEP_TYPES, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else f" (one of: {', '.join(STEP_TYPES)})"
        raise StepError(f"unknown step type {name!r}{hint}")
    collection = data.get("collection", default_collection)
    if not isinstance(collection, str) or not collection:
        raise StepError(f"{name}: 'collection' is required")
    if collection.startswith("mongopat_"):
        raise StepError(f"{name}: collections named mongopat_* hold mongopat's bookkeeping and cannot be migrated")
    problem = collection_name_problem(collection)
    if problem:
        raise StepError(f"{name}: collection {collection!r} {problem}")
    params: dict[str, Any] = {}
    for key, value in data.items():
        if key in ("step", "collection"):
            continue
        if key not in step_type.params:
            raise StepError(f"{name}: unknown parameter {key!r} (parameters: {', '.join(step_type.params)})")
        params[key] = value
    for key, param in step_type.params.items():
        if key not in params or params[key] is None:
            if param.required:
                raise StepError(f"{name}: parameter {key!r} is required")
            params[key] = param.default
            continue
        value = params[key]
        if param.kind is not object and (
            not isinstance(value, param.kind) or isinstance(value, bool) and param.kind in (int, (int, float))
        ):
            expected = param.kind.__name__ if isinstance(param.kind, type) else "number"
            raise StepError(f"{name}: parameter {key!r} must be a {expected}, got {value!r}")
    _check_positive(name, params)
    STEP_OPERATIONS[name].check(params)
    for key in (*step_type.creates, "from", "to"):
        other = params.get(key)
        if key in step_type.params and isinstance(other, str):
            problem = collection_name_problem(other)
            if problem:
                raise StepError(f"{name}: {key} {other!r} {problem}")
    return Step(step_type, collection, params)


# MongoDB's limit for a namespace (database.collection) is 255 bytes; the collection alone cannot be longer.
MAX_NAME_BYTES = 255


def collection_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a collection's (MongoDB's naming rules, and a file of its own in a dump folder),
    or None."""
    if not name:
        return "is empty"
    if "\0" in name:
        return "contains a null character"
    if "$" in name:
        return "contains '$', which MongoDB does not allow in collection names"
    if name.startswith("system."):
        return "is a system collection"
    if "/" in name or "\\" in name:
        return "contains a path separator (on a dump folder it would leave the folder)"
    if name.startswith("."):
        return "starts with '.' (not a collection name; on a dump folder a hidden or parent path)"
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        return f"is longer than the {MAX_NAME_BYTES} bytes MongoDB allows for a namespace"
    return None


def _check_positive(name: str, params: dict[str, Any]) -> None:
    for key in ("keep", "threshold", "window_seconds", "factor", "max_bucket_size"):
        if key in params and isinstance(params[key], int) and params[key] < 1:
            raise StepError(f"{name}: parameter {key!r} must be at least 1")
