"""Query shapes: a command with its values stripped and its operators kept.

``{"find": "orders", "filter": {"customerId": ObjectId(...), "createdAt": {"$gte": ...}}, "limit": 20}`` and the
same query for another customer are one shape: ``find orders filter {customerId: eq, createdAt: range}
limit 20``. Shapes are what the access-pattern file describes, so every source (logs, the profiler,
``$queryStats``) is reduced to them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

RANGE_OPS = {"$gt", "$gte", "$lt", "$lte"}
OPERATOR_NAMES = {
    "$eq": "eq", "$ne": "ne", "$in": "in", "$nin": "nin", "$exists": "exists", "$regex": "regex",
    "$elemMatch": "elemMatch", "$near": "geo", "$nearSphere": "geo", "$geoWithin": "geo", "$geoIntersects": "geo",
}  # fmt: skip
# How strongly an operator constrains a field, to keep the most telling one when a field has several.
_RANK = {"eq": 6, "in": 5, "range": 4, "elemMatch": 3, "regex": 2, "geo": 2, "exists": 1, "ne": 1, "nin": 1}


@dataclass(frozen=True)
class Lookup:
    source: str
    local: str
    foreign: str
    as_field: str = ""
    fields: tuple[str, ...] = ()  # what a later $project keeps of the joined document


@dataclass(frozen=True)
class Group:
    key: str | None
    compute: tuple[tuple[str, str, Any], ...]  # (output, operator, argument)


@dataclass(frozen=True)
class QueryShape:
    """What a read looks like, values stripped. Hashable: equal shapes merge."""

    command: str  # find, aggregate, count, distinct
    collection: str
    filter: tuple[tuple[str, str], ...] = ()
    sort: tuple[tuple[str, int], ...] = ()
    limit: int | None = None
    projection: tuple[str, ...] = ()
    lookups: tuple[Lookup, ...] = ()
    group: Group | None = None

    def filter_dict(self) -> dict[str, str]:
        return dict(self.filter)

    def name(self) -> str:
        parts = [self.command] + [f for f, _ in self.filter][:3]
        if self.lookups:
            parts.append("with_" + self.lookups[0].source)
        if self.group:
            parts.append("grouped")
        return "_".join(p.replace(".", "_").lstrip("$") for p in parts) or self.command


@dataclass(frozen=True)
class WriteShape:
    kind: str  # insert, update, delete
    collection: str


def _operator(value: Any) -> str:
    """The operator a filter value stands for (literal values are equality)."""
    if isinstance(value, dict) and value:
        keys = set(value)
        if keys & RANGE_OPS:
            return "range"
        if "$text" in keys:
            return "text"
        for key in keys:
            if key in OPERATOR_NAMES:
                return OPERATOR_NAMES[key]
        if not any(k.startswith("$") for k in keys):
            return "eq"  # equality on a whole sub-document
        return "eq" if "$eq" in keys else "ne" if "$not" in keys else "eq"
    return "eq"


def filter_fields(query: Any) -> dict[str, str]:
    """``{field: operator}`` for a MongoDB filter, flattening ``$and``/``$or``/``$nor``."""
    out: dict[str, str] = {}
    if not isinstance(query, dict):
        return out
    for key, value in query.items():
        if key in ("$and", "$or", "$nor") and isinstance(value, list):
            for part in value:
                for name, op in filter_fields(part).items():
                    _keep(out, name, op)
        elif key == "$text":
            _keep(out, "$text", "text")
        elif key == "$expr" or key.startswith("$"):
            continue
        else:
            _keep(out, key, _operator(value))
    return out


def _keep(out: dict[str, str], name: str, op: str) -> None:
    if name not in out or _RANK.get(op, 0) > _RANK.get(out[name], 0):
        out[name] = op


def _sort(spec: Any) -> tuple[tuple[str, int], ...]:
    if not isinstance(spec, dict):
        return ()
    return tuple(
        (str(k), 1 if v in (1, 1.0) or v is True else -1) for k, v in spec.items() if isinstance(v, (int, float))
    )


def _projection(spec: Any) -> tuple[str, ...]:
    if not isinstance(spec, dict):
        return ()
    return tuple(sorted(k for k, v in spec.items() if v not in (0, False) and k != "_id"))


def _limit(value: Any) -> int | None:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return abs(number) or None


def _accumulator(spec: Any) -> tuple[str, Any] | None:
    if not isinstance(spec, dict) or len(spec) != 1:
        return None
    ((op, argument),) = spec.items()
    name = op.lstrip("$")
    if name == "sum" and argument in (1, 1.0):
        return "count", True
    if name in ("sum", "avg", "min", "max") and isinstance(argument, str) and argument.startswith("$"):
        return name, argument[1:]
    return None


def shape_of_command(command: dict[str, Any], collection: str | None = None) -> QueryShape | WriteShape | None:
    """The shape of one command document (as logged, profiled or sent), or None for other commands."""
    if not isinstance(command, dict) or not command:
        return None
    if "find" in command:
        return QueryShape(
            "find",
            str(command["find"]),
            tuple(sorted(filter_fields(command.get("filter")).items())),
            _sort(command.get("sort")),
            _limit(command.get("limit")),
            _projection(command.get("projection")),
        )
    if "aggregate" in command:
        return _aggregate_shape(str(command["aggregate"]), command.get("pipeline") or [])
    if "count" in command:
        return QueryShape("count", str(command["count"]), tuple(sorted(filter_fields(command.get("query")).items())))
    if "distinct" in command:
        return QueryShape(
            "distinct", str(command["distinct"]), tuple(sorted(filter_fields(command.get("query")).items()))
        )
    for kind, key in (("insert", "insert"), ("update", "update"), ("delete", "delete")):
        if key in command:
            return WriteShape(kind, str(command[key]))
    if "findAndModify" in command or "findandmodify" in command:
        return WriteShape("update", str(command.get("findAndModify") or command.get("findandmodify")))
    if collection and "q" in command and "u" in command:  # an update statement, as the slow-query log shows it
        return WriteShape("update", collection)
    return None


def _aggregate_shape(collection: str, pipeline: list[Any]) -> QueryShape:
    filters: dict[str, str] = {}
    sort: tuple[tuple[str, int], ...] = ()
    limit = None
    projection: tuple[str, ...] = ()
    lookups: list[Lookup] = []
    group = None
    for position, stage in enumerate(pipeline if isinstance(pipeline, list) else []):
        if not isinstance(stage, dict) or len(stage) != 1:
            continue
        ((name, spec),) = stage.items()
        if name == "$match" and position == 0:
            filters = filter_fields(spec)
        elif name == "$sort" and not sort:
            sort = _sort(spec)
        elif name == "$limit" and limit is None:
            limit = _limit(spec)
        elif name == "$project" and not projection:
            projection = _projection(spec)
            for index, lookup in enumerate(lookups):  # what the read keeps of each joined document
                prefix = lookup.as_field + "."
                kept = tuple(p[len(prefix) :] for p in projection if lookup.as_field and p.startswith(prefix))
                if kept:
                    lookups[index] = Lookup(lookup.source, lookup.local, lookup.foreign, lookup.as_field, kept)
            joined = tuple(x.as_field + "." for x in lookups if x.as_field)
            projection = tuple(p for p in projection if not p.startswith(joined))
        elif name == "$lookup" and isinstance(spec, dict) and "from" in spec:
            local, foreign = str(spec.get("localField", "_id")), str(spec.get("foreignField", "_id"))
            lookups.append(Lookup(str(spec["from"]), local, foreign, str(spec.get("as", ""))))
        elif name == "$group" and isinstance(spec, dict) and group is None:
            key = spec.get("_id")
            compute = []
            for output, accumulator in spec.items():
                if output == "_id":
                    continue
                parsed = _accumulator(accumulator)
                if parsed:
                    compute.append((output, parsed[0], parsed[1]))
            group = Group(key[1:] if isinstance(key, str) and key.startswith("$") else None, tuple(compute))
    return QueryShape(
        "aggregate", collection, tuple(sorted(filters.items())), sort, limit, projection, tuple(lookups), group
    )


@dataclass
class Observation:
    """Executions of one shape seen by one source, with what they cost."""

    shape: QueryShape | WriteShape
    source: str
    count: int = 0
    durations_ms: list[float] = field(default_factory=list)
    examined: int = 0
    returned: int = 0
    collscans: int = 0
    first: float | None = None
    last: float | None = None

    def add(self, when: float | None, millis: float | None, examined: int, returned: int, plan: str | None) -> None:
        self.count += 1
        if millis is not None and len(self.durations_ms) < 10_000:
            self.durations_ms.append(float(millis))
        self.examined += examined
        self.returned += returned
        if plan and plan.startswith("COLLSCAN"):
            self.collscans += 1
        if when is not None:
            self.first = when if self.first is None else min(self.first, when)
            self.last = when if self.last is None else max(self.last, when)
