"""Combine what the sources recorded into a draft access-pattern file: rates, merged shapes, evidence."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from mongopat.draft.logs import LogScan
from mongopat.draft.server import ServerEvidence, SourceStatus
from mongopat.draft.shapes import Observation, QueryShape, WriteShape

# A shape is flagged when it examines this many documents per document returned, or scans a collection.
EXAMINED_RATIO_FLAG = 100
HOT_LOOKUP_PER_SEC = 10


@dataclass
class DraftQuery:
    name: str
    spec: dict[str, Any]
    comment: str
    flags: list[str] = field(default_factory=list)
    per_sec: float | None = None


@dataclass
class DraftCollection:
    name: str
    writes: dict[str, float] = field(default_factory=dict)
    writes_comment: str = ""
    queries: list[DraftQuery] = field(default_factory=list)


@dataclass
class Draft:
    database: str
    statuses: list[SourceStatus]
    collections: dict[str, DraftCollection]
    notes: list[str] = field(default_factory=list)

    def has_evidence(self) -> bool:
        return any(s.used and s.entries for s in self.statuses)

    def flags(self) -> list[dict[str, Any]]:
        return [
            {"collection": c.name, "query": q.name, "flag": flag, "per_sec": q.per_sec}
            for c in self.collections.values()
            for q in c.queries
            for flag in q.flags
        ]


def round_rate(value: float) -> float:
    """Two significant figures: 1234.5 -> 1200, 0.01234 -> 0.012."""
    if value <= 0:
        return 0
    digits = 1 - int(math.floor(math.log10(value)))
    rounded = round(value, digits)
    return int(rounded) if rounded >= 10 else rounded


def rate_value(per_sec: float) -> float | str:
    """A rate as the access file writes it: per second when at least 1/s, else per minute/hour/day."""
    for unit, factor in (("s", 1), ("min", 60), ("h", 3600), ("day", 86400)):
        if per_sec * factor >= 1 or unit == "day":
            value = round_rate(per_sec * factor)
            return value if unit == "s" else f"{value:g}/{unit}"
    return per_sec


def _duration(seconds: float) -> str:
    for unit, size in (("day", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def _p95(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def _evidence(observation: Observation, span: float | None) -> tuple[str, list[str]]:
    parts = [f"{observation.count:,} executions"]
    if span:
        parts[0] += f" over {_duration(span)}"
    parts[0] += f" in {observation.source}"
    p95 = _p95(observation.durations_ms)
    if p95 is not None:
        parts.append(f"p95 {p95:,.0f} ms")
    flags = []
    if observation.examined:
        ratio = observation.examined / max(observation.returned, 1)
        parts.append(f"examined/returned {ratio:,.0f}")
        if ratio >= EXAMINED_RATIO_FLAG:
            flags.append(f"examines {ratio:,.0f} documents per document returned")
    if observation.collscans:
        parts.append(f"COLLSCAN x{observation.collscans}")
        flags.append("collection scan (COLLSCAN)")
    return ", ".join(parts), flags


def _query_spec(
    shape: QueryShape, known: set[str], references: dict[tuple[str, str], str] | None = None
) -> tuple[str, dict[str, Any], str]:
    """(collection the query belongs to, its access-file mapping, how it was placed when not plainly)."""
    spec: dict[str, Any] = {}
    if shape.filter:
        spec["filter"] = dict(shape.filter)
    if shape.sort:
        spec["sort"] = dict(shape.sort)
    if shape.limit:
        spec["limit"] = shape.limit
    if shape.projection:
        spec["fields"] = list(shape.projection)
    owner = shape.collection
    if shape.lookups:
        lookup = shape.lookups[0]
        spec["lookup"] = {"from": lookup.source, "local": lookup.local, "foreign": lookup.foreign}
        if lookup.fields:
            spec["lookup"]["fields"] = list(lookup.fields)
        if lookup.as_field:
            spec["lookup"]["as"] = lookup.as_field
    placed = ""
    if shape.group is not None and shape.group.key and shape.group.compute:
        key = shape.group.key
        computes = ", ".join(
            f"{out} = count" if op == "count" else f"{out} = {op}({arg})" for out, op, arg in shape.group.compute
        )
        measured = (references or {}).get((shape.collection, key))
        parent = measured or _parent_of(key, known)
        if parent is None or parent == shape.collection:
            # Kept where it runs, with what it computes: a read is never dropped for want of a parent.
            fields = [key, *(arg for _out, op, arg in shape.group.compute if op != "count" and isinstance(arg, str))]
            spec.setdefault("fields", list(dict.fromkeys(fields)))
            placed = (
                f"$group by {key} computing {computes}; no collection that {key} refers to is known, so it "
                f"stays under {shape.collection} (move it to an aggregate entry of that collection once known)"
            )
            return owner, spec, placed
        compute = {out: ({"count": True} if op == "count" else {op: arg}) for out, op, arg in shape.group.compute}
        spec = {"filter": {"_id": "eq"}, "aggregate": {"from": shape.collection, "local": "_id",
                                                     "foreign": key, "compute": compute}}  # fmt: skip
        owner = parent
        how = "the measured reference" if measured else "the field's name (no measured reference)"
        placed = f"$group of {shape.collection} by {key} computing {computes}; attached to {parent} by {how}"
    return owner, spec, placed


def _parent_of(key: str, known: set[str]) -> str | None:
    """``accountId`` -> ``accounts`` when such a collection is known."""
    base = key[:-2] if key.endswith("Id") else key[:-3] if key.endswith("_id") else None
    if not base:
        return None
    for candidate in (base + "s", base + "es", base[:-1] + "ies" if base.endswith("y") else None, base):
        if candidate and candidate in known:
            return candidate
    return None


def build_draft(
    database: str,
    server: ServerEvidence | None,
    logs: LogScan | None,
    data_rates: dict[str, tuple[float, str]] | None,
    statuses: list[SourceStatus],
    known_collections: list[str] | None = None,
    references: dict[tuple[str, str], str] | None = None,
) -> Draft:
    """``references`` maps (collection, field) to the collection its values were measured to refer to:
    aggregates are attached by them first, by field names only as a fallback."""
    collections: dict[str, DraftCollection] = {}

    def collection(name: str) -> DraftCollection:
        return collections.setdefault(name, DraftCollection(name))

    observed: list[tuple[Observation, float | None]] = []
    if server is not None:
        observed.extend(server.observations)
        for name, rates in server.rates.items():
            entry = collection(name)
            for key in ("inserts_per_sec", "updates_per_sec", "deletes_per_sec"):
                value = getattr(rates, key)
                if value > 0:
                    entry.writes[key] = value
            if entry.writes:
                entry.writes_comment = f"top: measured over {rates.interval:.0f} s"
    if logs is not None:
        observed.extend((o, logs.span_seconds) for o in logs.observations.values())
    known = set(collections) | {o.shape.collection for o, _ in observed} | set(data_rates or {})
    known |= set(known_collections or ())
    # One entry per (collection, shape): the source that saw it most often wins; others are named.
    best: dict[tuple[str, Any], tuple[Observation, float | None, list[str]]] = {}
    write_rates: dict[str, dict[str, tuple[float, str]]] = {}
    for observation, span in observed:
        shape = observation.shape
        if isinstance(shape, WriteShape):
            if span:
                key = f"{shape.kind}s_per_sec" if shape.kind != "delete" else "deletes_per_sec"
                rate = observation.count / span
                current = write_rates.setdefault(shape.collection, {}).get(key)
                if current is None or rate > current[0]:
                    write_rates[shape.collection][key] = (
                        rate,
                        f"{observation.count:,} slow {shape.kind}s in {observation.source}",
                    )
            continue
        owner, spec, _placed = _query_spec(shape, known, references)
        key = (owner, repr(sorted(spec.items(), key=str)))
        if key in best:
            previous, previous_span, others = best[key]
            if observation.count > previous.count:
                best[key] = (observation, span, [*others, previous.source])
            else:
                others.append(observation.source)
            continue
        best[key] = (observation, span, [])
    for (owner, _), (observation, span, others) in sorted(
        best.items(), key=lambda item: (item[0][0], -item[1][0].count)
    ):
        _, spec, placed = _query_spec(observation.shape, known, references)
        comment, flags = _evidence(observation, span)
        if placed:
            comment += f"; {placed}"
        if others:
            comment += f"; also seen in {', '.join(sorted(set(others)))}"
        per_sec = observation.count / span if span else None
        if per_sec is not None:
            spec["per_sec"] = rate_value(per_sec)
        if "lookup" in spec and (per_sec or 0) >= HOT_LOOKUP_PER_SEC:
            flags.append(f"$lookup on a hot path ({per_sec:,.0f}/s)")
        entry = collection(owner)
        name = _unique_name(observation.shape.name(), {q.name for q in entry.queries})
        entry.queries.append(DraftQuery(name, spec, comment, flags, per_sec))
    for name, rates in write_rates.items():
        entry = collection(name)
        for key, (rate, why) in rates.items():
            if key not in entry.writes:
                entry.writes[key] = rate
                entry.writes_comment = (
                    entry.writes_comment + "; " if entry.writes_comment else ""
                ) + f"{why} (a lower bound)"
    for name, (rate, why) in (data_rates or {}).items():
        entry = collection(name)
        if "inserts_per_sec" not in entry.writes and rate > 0:
            entry.writes["inserts_per_sec"] = rate
            entry.writes_comment = (entry.writes_comment + "; " if entry.writes_comment else "") + why
    for entry in list(collections.values()):  # lookups must name collections of the file
        for query in entry.queries:
            for key in ("lookup", "aggregate"):
                if key in query.spec:
                    collection(query.spec[key]["from"])
    notes = []
    if logs is not None and logs.slow_queries:
        notes.append(
            "rates from slow-query logs and the profiler count only slow operations: read them as lower bounds"
        )
    return Draft(database, statuses, dict(sorted(collections.items())), notes)


def _unique_name(base: str, taken: set[str]) -> str:
    name, index = base, 2
    while name in taken:
        name, index = f"{base}_{index}", index + 1
    return name
