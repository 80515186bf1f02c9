"""A read as an index planner sees it: which fields it compares for equality, which it sorts on, which it
bounds by a range, and which it only filters (``$ne``, ``$nin``, ``$exists``, a regular expression).

Built from a query of the access-pattern file or from the ``$match`` of a guide's read (the same read
rewritten for a new shape), so both get the same advice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mongopat.access.model import AccessFile, Query

EQUALITY = ("eq", "elemMatch")
RANGES = ("range", "gt", "gte", "lt", "lte")
# Bounded by an index, but by two intervals or a prefix at best: they come after the ranges.
FILTERS = ("ne", "nin", "exists", "regex")
# MongoDB explodes an $in of at most this many values into point scans merged in sort order, so that an
# index with the $in field before the sort keys still gives the sort; past it the $in acts as a range.
IN_EXPLODE_LIMIT = 200


@dataclass
class ReadShape:
    """What an index can do for one read."""

    name: str
    collection: str
    operators: dict[str, str] = field(default_factory=dict)  # field -> eq, in, range, ne, text, geo, ...
    sort: list[tuple[str, int]] = field(default_factory=list)
    limit: int | None = None
    projection: list[str] = field(default_factory=list)
    per_sec: float | None = None
    # (collection, read) of the declared read whose join makes this one
    joined_from: tuple[str, str] | None = None

    def fields_with(self, operators: tuple[str, ...]) -> list[str]:
        return [name for name, op in self.operators.items() if op in operators]

    @property
    def equalities(self) -> list[str]:
        return self.fields_with(EQUALITY)

    @property
    def ins(self) -> list[str]:
        return self.fields_with(("in",))

    @property
    def ranges(self) -> list[str]:
        return self.fields_with(RANGES)

    @property
    def filters(self) -> list[str]:
        return self.fields_with(FILTERS)

    @property
    def text(self) -> str | None:
        return next(iter(self.fields_with(("text",))), None)

    @property
    def geo(self) -> str | None:
        return next(iter(self.fields_with(("geo",))), None)

    def describe(self) -> str:
        """``{st: eq, ts: range} sort ts:1 limit 10``: the read in one line."""
        parts = ["{" + ", ".join(f"{name}: {op}" for name, op in self.operators.items()) + "}"]
        if self.sort:
            parts.append("sort " + ", ".join(f"{name}:{direction}" for name, direction in self.sort))
        if self.limit:
            parts.append(f"limit {self.limit}")
        return " ".join(parts)


def from_query(collection: str, query: Query) -> ReadShape:
    """The shape of a query of the access-pattern file."""
    return ReadShape(
        name=query.name,
        collection=collection,
        operators=dict(query.filter),
        sort=list(query.sort.items()),
        limit=query.limit,
        projection=list(query.fields),
        per_sec=query.per_sec,
    )


def from_match(
    name: str,
    collection: str,
    match: dict[str, Any],
    sort: dict[str, int] | None = None,
    limit: int | None = None,
    per_sec: float | None = None,
) -> ReadShape:
    """The shape of a ``$match`` (placeholders or values), its ``$sort`` and ``$limit``."""
    operators: dict[str, str] = {}

    def collect(node: dict[str, Any], prefix: str = "") -> None:
        for key, condition in node.items():
            if key == "$and":
                for item in condition:
                    collect(item, prefix)
            elif isinstance(condition, dict) and isinstance(condition.get("$elemMatch"), dict):
                inner = condition["$elemMatch"]
                if "$param" in inner or all(k.startswith("$") for k in inner):
                    operators.setdefault(prefix + key, "elemMatch")
                else:  # conditions on the elements' fields: one key each (items.sku)
                    collect(inner, f"{prefix}{key}.")
            elif key == "$text":
                operators["$text"] = "text"
            elif not key.startswith("$"):
                operators.setdefault(prefix + key, _operator(condition))
            elif key == "$or":
                continue  # an $or needs an index per branch: not advised here

    collect(match)
    return ReadShape(name, collection, operators, list((sort or {}).items()), limit, per_sec=per_sec)


def _operator(condition: Any) -> str:
    if not isinstance(condition, dict) or "$param" in condition:
        return "eq"
    keys = set(condition)
    if keys <= {"$eq"}:
        return "eq"
    if keys <= {"$in"}:
        return "in"
    if "$elemMatch" in keys:
        return "elemMatch"
    if keys & {"$geoWithin", "$geoIntersects", "$near", "$nearSphere"}:
        return "geo"
    if keys <= {"$gt", "$gte", "$lt", "$lte"}:
        return "range"
    for op in ("ne", "nin", "exists", "regex"):
        if f"${op}" in keys:
            return op
    return "range"


def declared_reads(access: AccessFile) -> dict[str, list[ReadShape]]:
    """Every read of the access file by collection, with the reads its joins make on other collections: a
    ``lookup`` reads the joined collection by its foreign field once per document, as an ``aggregate``
    reads every related document."""
    found: dict[str, list[ReadShape]] = {}
    for name, spec in access.collections.items():
        for query in spec.queries:
            found.setdefault(name, []).append(from_query(name, query))
            joins = [j for j in (query.lookup, query.aggregate) if j is not None]
            for join in joins:
                if join.foreign == "_id":
                    continue  # the _id index serves it
                found.setdefault(join.source, []).append(
                    ReadShape(
                        name=f"{query.name} (joined from {name})",
                        collection=join.source,
                        operators={join.foreign: "eq"},
                        per_sec=query.per_sec,
                        joined_from=(name, query.name),
                    )
                )
    return found
