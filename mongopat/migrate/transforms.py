"""Pure transforms: one function per document step, from a document to the new document plus any side
documents for other collections. No database here: the runtime gathers what a transform needs from other
documents (parents, referenced documents, aggregates) into a :class:`Context` and applies the result.

Side documents get deterministic ``_id``s, so writing them twice (a resumed batch) changes nothing.
"""

from __future__ import annotations

import copy
import datetime
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mongopat.expressions import evaluate, parse
from mongopat.migrate.steps import Step

Document = dict[str, Any]


@dataclass
class Context:
    """What a transform may know beyond the document itself, keyed by the document's own values."""

    parents: dict[Any, Any] = field(default_factory=dict)  # tree: _id -> parent _id
    references: dict[Any, Document] = field(default_factory=dict)  # extended reference: local value -> fields
    aggregates: dict[Any, Document] = field(default_factory=dict)  # pre-aggregation: local value -> results


@dataclass
class Result:
    document: Document
    side: dict[str, list[Document]] = field(default_factory=dict)


def get_path(document: Document, path: str) -> Any:
    value: Any = document
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _has(document: Document, path: str) -> bool:
    value: Any = document
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return False
        value = value[part]
    return True


def _set_path(document: Document, path: str, value: Any) -> None:
    parts = path.split(".")
    target = document
    for part in parts[:-1]:
        if not isinstance(target.get(part), dict):
            target[part] = {}
        target = target[part]
    target[parts[-1]] = value


def _pop_path(document: Document, path: str) -> Any:
    parts = path.split(".")
    target: Any = document
    for part in parts[:-1]:
        target = target.get(part) if isinstance(target, dict) else None
    if isinstance(target, dict):
        return target.pop(parts[-1], None)
    return None


def set_field(doc: Document, step: Step, ctx: Context) -> Result:
    if not (step.params["only_missing"] and _has(doc, step.params["field"])):
        _set_path(doc, step.params["field"], copy.deepcopy(step.params["value"]))
    return Result(doc)


def unset_field(doc: Document, step: Step, ctx: Context) -> Result:
    _pop_path(doc, step.params["field"])
    return Result(doc)


def rename_field(doc: Document, step: Step, ctx: Context) -> Result:
    if _has(doc, step.params["from"]):
        _set_path(doc, step.params["to"], _pop_path(doc, step.params["from"]))
    return Result(doc)


def computed(doc: Document, step: Step, ctx: Context) -> Result:
    _set_path(doc, step.params["field"], evaluate(parse(step.params["expression"]), doc))
    return Result(doc)


def attribute(doc: Document, step: Step, ctx: Context) -> Result:
    pairs = [{"k": name, "v": doc.pop(name)} for name in step.params["fields"] if name in doc]
    existing = doc.get(step.params["into"])
    doc[step.params["into"]] = (existing if isinstance(existing, list) else []) + pairs
    return Result(doc)


def map_to_array(doc: Document, step: Step, ctx: Context) -> Result:
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
    _set_path(doc, params["field"], elements)
    return Result(doc)


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
    _set_path(doc, params["field"], restored)
    return doc


def _matches(doc: Document, rule: dict[str, Any]) -> bool:
    if "when_has" in rule and not _has(doc, rule["when_has"]):
        return False
    return not ("when_missing" in rule and _has(doc, rule["when_missing"]))


def polymorphic(doc: Document, step: Step, ctx: Context) -> Result:
    target = step.params["type_field"]
    if target not in doc:
        for rule in step.params["rules"]:
            if _matches(doc, rule):
                doc[target] = rule["type"]
                break
        else:
            if step.params["default"] is not None:
                doc[target] = step.params["default"]
    return Result(doc)


def schema_versioning(doc: Document, step: Step, ctx: Context) -> Result:
    target = step.params["field"]
    if target not in doc:
        version = step.params["default_version"]
        for rule in step.params["rules"]:
            if _matches(doc, rule):
                version = rule["version"]
                break
        doc[target] = version
    return Result(doc)


def approximation(doc: Document, step: Step, ctx: Context) -> Result:
    name = step.params["field"]
    value = get_path(doc, name)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        _set_path(doc, name, 0)
    _set_path(doc, f"{name}Factor", step.params["factor"])
    return Result(doc)


class TreeCycleError(ValueError):
    pass


def ancestors_of(node: Any, parents: dict[Any, Any]) -> list[Any]:
    """Root first; raises on a cycle. Unknown parents end the chain (they are kept as the root)."""
    chain: list[Any] = []
    seen = {node}
    current = parents.get(node)
    while current is not None:
        if current in seen:
            raise TreeCycleError(f"cycle in the tree through {current!r}")
        seen.add(current)
        chain.append(current)
        current = parents.get(current)
    return chain[::-1]


def tree(doc: Document, step: Step, ctx: Context) -> Result:
    ancestors = ancestors_of(doc.get("_id"), ctx.parents)
    doc[step.params["ancestors_field"]] = ancestors
    doc[step.params["path_field"]] = "/" + "".join(f"{a}/" for a in [*ancestors, doc.get("_id")])
    return Result(doc)


def extended_reference(doc: Document, step: Step, ctx: Context) -> Result:
    key = get_path(doc, step.params["local"])
    referenced = ctx.references.get(hashable_key(key))
    if referenced is not None:
        doc[step.params["as"]] = {name: referenced[name] for name in step.params["fields"] if name in referenced}
    return Result(doc)


def pre_aggregation(doc: Document, step: Step, ctx: Context) -> Result:
    key = get_path(doc, step.params["local"])
    results = ctx.aggregates.get(hashable_key(key))
    doc[step.params["into"]] = dict(results) if results is not None else empty_aggregates(step.params["compute"])
    return Result(doc)


def empty_aggregates(compute: dict[str, dict[str, Any]]) -> Document:
    return {name: 0 if next(iter(spec)) in ("sum", "count") else None for name, spec in compute.items()}


def document_versioning(doc: Document, step: Step, ctx: Context) -> Result:
    version_field = step.params["version_field"]
    if version_field not in doc:
        doc[version_field] = 1
    revision = {key: copy.deepcopy(value) for key, value in doc.items() if key != "_id"}
    history = {"_id": {"doc": doc.get("_id"), "revision": doc[version_field]}, **revision}
    return Result(doc, {step.params["history_collection"]: [history]})


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


def subset(doc: Document, step: Step, ctx: Context) -> Result:
    name = step.params["field"]
    elements = doc.get(name)
    if not isinstance(elements, list):
        return Result(doc)
    full = [
        {"_id": {"parent": doc.get("_id"), "index": index}, "parentId": doc.get("_id"), "index": index,
         **(element if isinstance(element, dict) else {"value": element})}
        for index, element in enumerate(elements)
    ]  # fmt: skip
    doc[name] = _sorted(elements, step.params["sort"])[: step.params["keep"]]
    doc[f"{name}Count"] = len(elements)
    return Result(doc, {step.params["full_collection"]: full})


def outlier(doc: Document, step: Step, ctx: Context) -> Result:
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


def hashable_key(value: Any) -> Any:
    """``value`` as a dict key: itself when hashable, its repr otherwise (documents, arrays). The runtime
    keys the maps of a :class:`Context` with it and the transforms look them up with it."""
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value


DOCUMENT_TRANSFORMS: dict[str, Callable[[Document, Step, Context], Result]] = {
    "set_field": set_field, "unset_field": unset_field, "rename_field": rename_field, "computed": computed,
    "attribute": attribute, "map_to_array": map_to_array, "polymorphic": polymorphic,
    "schema_versioning": schema_versioning,
    "approximation": approximation, "tree": tree, "extended_reference": extended_reference,
    "pre_aggregation": pre_aggregation, "document_versioning": document_versioning, "subset": subset,
    "outlier": outlier,
}  # fmt: skip


def transform(doc: Document, step: Step, ctx: Context | None = None) -> Result:
    """Apply a document step to a copy of ``doc`` (the input is never modified)."""
    return DOCUMENT_TRANSFORMS[step.name](copy.deepcopy(doc), step, ctx or Context())


# -- bucket (regroup) -----------------------------------------------------------------------------

_EPOCH = datetime.datetime(1970, 1, 1)


def _epoch(value: Any) -> float | None:
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return (value - _EPOCH).total_seconds()
    return None


class BucketBuilder:
    """Groups readings into buckets of one series and one time window, at most ``max_bucket_size`` each.

    Buckets are identified by ``{s: series, w: window start, n: sequence}``; a bucket that is full is
    continued in the next sequence number. Readings already in a bucket (same ``_id``) are not added
    again, so replaying readings after a crash is harmless. ``load`` seeds a bucket from storage.
    """

    def __init__(self, step: Step, load: Callable[[Any, datetime.datetime], Document | None] | None = None) -> None:
        self.series_key = step.params["series_key"]
        self.time_field = step.params["time_field"]
        self.window = step.params["window_seconds"]
        self.measurements = step.params["measurements"] or []
        self.capacity = step.params["max_bucket_size"]
        self.load = load
        self.open: dict[tuple[Any, datetime.datetime], Document] = {}
        self.ids: dict[tuple[Any, datetime.datetime], set[Any]] = {}
        self.rejected: list[Document] = []
        # Buckets that filled up and were replaced by their next sequence: the caller must write them.
        self.completed: list[Document] = []

    def window_start(self, when: datetime.datetime) -> datetime.datetime:
        seconds = _epoch(when)
        assert seconds is not None
        return _EPOCH + datetime.timedelta(seconds=seconds - seconds % self.window)

    def add(self, doc: Document) -> Document | None:
        """Add one reading; returns the bucket it went to (None when the reading has no time or series)."""
        when = doc.get(self.time_field)
        series = doc.get(self.series_key)
        if _epoch(when) is None or series is None:
            self.rejected.append(doc)
            return None
        start = self.window_start(when)
        key = (hashable_key(series), start)
        bucket = self.open.get(key)
        if bucket is None:
            bucket = (self.load(series, start) if self.load else None) or self._new(series, start, 0)
            self.open[key] = bucket
            self.ids[key] = {reading.get("_id") for reading in bucket["readings"]}
        if doc.get("_id") in self.ids[key]:
            return bucket
        if bucket["count"] >= self.capacity:
            if bucket["readings"]:
                self.completed.append(bucket)
            bucket = self._new(series, start, bucket["_id"]["n"] + 1)
            self.open[key] = bucket
            self.ids[key] = set()
        reading = dict(doc)
        del reading[self.series_key]
        bucket["readings"].append(reading)
        bucket["count"] += 1
        self.ids[key].add(doc.get("_id"))
        for name in self.measurements:
            value = doc.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                low, high = bucket["min"].get(name), bucket["max"].get(name)
                bucket["min"][name] = value if low is None else min(low, value)
                bucket["max"][name] = value if high is None else max(high, value)
        return bucket

    def _new(self, series: Any, start: datetime.datetime, sequence: int) -> Document:
        return {
            "_id": {"s": series, "w": start, "n": sequence},
            self.series_key: series,
            "start": start,
            "end": start + datetime.timedelta(seconds=self.window),
            "count": 0,
            "min": {},
            "max": {},
            "readings": [],
        }


def bucket_documents(documents: list[Document], step: Step) -> list[Document]:
    """All buckets for ``documents`` (for tests and previews; the runtime streams)."""
    builder = BucketBuilder(step)
    buckets: dict[Any, Document] = {}
    for doc in documents:
        bucket = builder.add(doc)
        if bucket is not None:
            buckets[repr(bucket["_id"])] = bucket
    return list(buckets.values())


def unbucket(bucket: Document, step: Step) -> list[Document]:
    """The readings of a bucket as documents again (verification: nothing lost, nothing invented)."""
    series_key = step.params["series_key"]
    return [{**reading, series_key: bucket.get(series_key)} for reading in bucket.get("readings", [])]
