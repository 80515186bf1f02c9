"""What a migration step is, apart from how it runs: its type, parameters and their validation.

Three kinds of step:

- ``document``: each document of the collection is rewritten in place by a pure transform
  (:mod:`mongopat.migrate.transforms`), possibly writing side documents to new collections (history,
  overflow, the full list of a subset);
- ``regroup``: documents are grouped into new documents of the same collection (bucket: many readings ->
  few buckets);
- ``collection``: an operation on a collection or index (create/drop index, copy/rename collection).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mongopat.expressions import ExpressionError, parse


class StepError(ValueError):
    """A step's parameters are wrong; the message names the parameter."""


@dataclass(frozen=True)
class Param:
    kind: type | tuple[type, ...]
    required: bool = True
    default: Any = None
    help: str = ""


@dataclass(frozen=True)
class StepType:
    name: str
    kind: str  # document, regroup, collection
    params: dict[str, Param]
    summary: str
    # Collections the step creates (parameter names holding their names), dropped by ``down``.
    creates: tuple[str, ...] = ()


STR, INT, NUM, LIST, DICT, ANY = str, int, (int, float), list, dict, object

STEP_TYPES: dict[str, StepType] = {
    step.name: step
    for step in (
        StepType(
            "set_field",
            "document",
            {"field": Param(STR), "value": Param(ANY), "only_missing": Param(bool, False, False)},
            "set a field to a value (on every document, or only where it is missing)",
        ),
        StepType("unset_field", "document", {"field": Param(STR)}, "remove a field"),
        StepType("rename_field", "document", {"from": Param(STR), "to": Param(STR)}, "rename a field"),
        StepType(
            "computed",
            "document",
            {"field": Param(STR), "expression": Param(STR)},
            "store a value computed from the document (computed pattern)",
        ),
        StepType(
            "attribute",
            "document",
            {"fields": Param(LIST), "into": Param(STR, False, "attributes"), "index": Param(DICT, False)},
            "pivot fields into an array of {k, v} pairs (attribute pattern)",
        ),
        StepType(
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
        ),
        StepType(
            "polymorphic",
            "document",
            {"type_field": Param(STR, False, "type"), "rules": Param(LIST), "default": Param(ANY, False)},
            "set a type field from which fields a document has (polymorphic pattern)",
        ),
        StepType(
            "schema_versioning",
            "document",
            {
                "field": Param(STR, False, "schemaVersion"),
                "default_version": Param(INT, False, 1),
                "rules": Param(LIST, False, []),
            },
            "stamp a schema version on every document (schema versioning pattern)",
        ),
        StepType(
            "approximation",
            "document",
            {"field": Param(STR), "factor": Param(INT)},
            "initialise an approximate counter and record its factor (approximation pattern)",
        ),
        StepType(
            "tree",
            "document",
            {
                "parent_field": Param(STR),
                "ancestors_field": Param(STR, False, "ancestors"),
                "path_field": Param(STR, False, "path"),
            },
            "materialise ancestors and a path from parent references (tree pattern)",
        ),
        StepType(
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
        ),
        StepType(
            "pre_aggregation",
            "document",
            {
                "from": Param(STR),
                "local": Param(STR, False, "_id"),
                "foreign": Param(STR),
                "compute": Param(DICT),
                "into": Param(STR),
            },
            "store aggregates of related documents (pre-aggregation pattern)",
        ),
        StepType(
            "document_versioning",
            "document",
            {"history_collection": Param(STR), "version_field": Param(STR, False, "revision")},
            "stamp a revision and write the first revision to a history collection (document versioning)",
            creates=("history_collection",),
        ),
        StepType(
            "subset",
            "document",
            {"field": Param(STR), "keep": Param(INT), "sort": Param(DICT, False, {}), "full_collection": Param(STR)},
            "keep the first N elements embedded, the full list in its own collection (subset pattern)",
            creates=("full_collection",),
        ),
        StepType(
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
        ),
        StepType(
            "bucket",
            "regroup",
            {
                "series_key": Param(STR),
                "time_field": Param(STR),
                "window_seconds": Param(INT),
                "measurements": Param(LIST, False, []),
                "max_bucket_size": Param(INT, False, 1000),
                "alternative": Param(ANY, False),
            },
            "group documents by series and time window into bucket documents (bucket pattern)",
        ),
        StepType(
            "create_index",
            "collection",
            {"keys": Param(DICT), "name": Param(STR, False), "unique": Param(bool, False, False)},
            "create an index",
        ),
        StepType("drop_index", "collection", {"name": Param(STR)}, "drop an index (its definition is kept for down)"),
        StepType("copy_collection", "collection", {"to": Param(STR)}, "copy the collection", creates=("to",)),
        StepType("rename_collection", "collection", {"to": Param(STR)}, "rename the collection"),
    )
}


@dataclass
class Step:
    type: StepType
    collection: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.type.name

    def created_collections(self) -> list[str]:
        return [self.params[key] for key in self.type.creates if self.params.get(key)]

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.name, "collection": self.collection, **self.params}


def build_step(data: dict[str, Any], default_collection: str | None = None) -> Step:
    """Validate a step mapping (``{"step": "bucket", "collection": ..., params...}``)."""
    if not isinstance(data, dict):
        raise StepError("a step is a mapping with a 'step' key")
    name = data.get("step")
    step_type = STEP_TYPES.get(name) if isinstance(name, str) else None
    if step_type is None:
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
    _check_semantics(name, params)
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


def _check_semantics(name: str, params: dict[str, Any]) -> None:
    if name == "computed":
        try:
            parse(params["expression"])
        except ExpressionError as exc:
            raise StepError(f"computed: invalid expression: {exc}") from None
    for key in ("keep", "threshold", "window_seconds", "factor", "max_bucket_size"):
        if key in params and isinstance(params[key], int) and params[key] < 1:
            raise StepError(f"{name}: parameter {key!r} must be at least 1")
    if name in ("polymorphic", "schema_versioning"):
        for rule in params.get("rules") or []:
            if not isinstance(rule, dict) or not ({"when_has", "when_missing"} & set(rule)):
                raise StepError(f"{name}: each rule needs 'when_has' or 'when_missing', got {rule!r}")
    if name == "map_to_array":
        if params["layout"] not in ("merge", "pair"):
            raise StepError(f"map_to_array: layout must be 'merge' or 'pair', got {params['layout']!r}")
        if params["layout"] == "pair" and params["key_in_value"]:
            raise StepError("map_to_array: key_in_value goes with layout 'merge'")
        if params["layout"] == "pair" and params["key_field"] == params["value_field"]:
            raise StepError("map_to_array: key_field and value_field must differ")
    if name == "pre_aggregation":
        for output, spec in params["compute"].items():
            if (
                not isinstance(spec, dict)
                or len(spec) != 1
                or next(iter(spec)) not in ("sum", "count", "avg", "min", "max")
            ):
                raise StepError(f"pre_aggregation: compute.{output} must be one of sum, count, avg, min, max")
