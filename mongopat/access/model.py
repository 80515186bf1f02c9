"""What an application does with its collections: the parsed access-pattern file (version 1)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mongopat.expressions import Expression
from mongopat.yamlfile import Location

FILTER_OPERATORS = (
    "eq", "ne", "in", "nin", "range", "gt", "gte", "lt", "lte", "exists", "regex", "text", "geo", "elemMatch",
)  # fmt: skip
RANGE_OPERATORS = ("range", "gt", "gte", "lt", "lte")


@dataclass
class Lookup:
    source: str  # ``from``
    local: str
    foreign: str = "_id"
    fields: list[str] = field(default_factory=list)
    as_field: str | None = None

    @property
    def alias(self) -> str:
        """The field the joined documents land in: ``as``, or the singular of the collection's name."""
        if self.as_field:
            return self.as_field
        name = self.source
        if name.endswith("ies"):
            return name[:-3] + "y"
        return name[:-1] if name.endswith("s") and not name.endswith("ss") else name


@dataclass
class Aggregate:
    source: str
    local: str
    foreign: str
    compute: dict[str, dict[str, Any]]


@dataclass
class Embed:
    field: str
    sort: dict[str, int] = field(default_factory=dict)
    limit: int | None = None


@dataclass
class Query:
    name: str
    per_sec: float | None = None
    filter: dict[str, str] = field(default_factory=dict)
    sort: dict[str, int] = field(default_factory=dict)
    limit: int | None = None
    fields: list[str] = field(default_factory=list)
    derive: dict[str, Expression] = field(default_factory=dict)
    lookup: Lookup | None = None
    aggregate: Aggregate | None = None
    embed: Embed | None = None
    location: Location | None = None

    def filters_with(self, operators: tuple[str, ...]) -> list[str]:
        return [name for name, op in self.filter.items() if op in operators]


@dataclass
class CounterSpec:
    field: str
    increments_per_sec: float
    exact: bool = True


@dataclass
class History:
    keep_versions: bool = False
    restore: bool = False


@dataclass
class Writes:
    inserts_per_sec: float | None = None
    updates_per_sec: float | None = None
    deletes_per_sec: float | None = None

    def total(self) -> float:
        return sum(v for v in (self.inserts_per_sec, self.updates_per_sec, self.deletes_per_sec) if v)


@dataclass
class CollectionAccess:
    name: str
    writes: Writes = field(default_factory=Writes)
    queries: list[Query] = field(default_factory=list)
    counters: list[CounterSpec] = field(default_factory=list)
    history: History | None = None
    description: str | None = None
    # Not in the data yet: a migration creates it (else a collection the data lacks is a typo).
    created_by_migration: bool = False
    # The application watches the collection with a change stream (no time-series collection supports one).
    change_streams: bool = False
    location: Location | None = None

    def reads_per_sec(self) -> float:
        return sum(q.per_sec or 0 for q in self.queries)


@dataclass
class AccessFile:
    path: str
    version: int
    database: str | None
    collections: dict[str, CollectionAccess]
    thresholds: dict[str, dict[str, float]] = field(default_factory=dict)
    # The MongoDB version the advice is for ("7.0"): features that need a later one are not recommended.
    mongodb_version: str | None = None

    def collection(self, name: str) -> CollectionAccess | None:
        return self.collections.get(name)
