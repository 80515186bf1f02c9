"""What a live deployment records about its workload: ``top``, ``$queryStats`` and ``system.profile``.

Each source is optional: when one is not permitted or not available, a note says which privilege or
setting it needs and the others are still read. Nothing is ever written to the database.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pymongo.errors import OperationFailure, PyMongoError

from mongopat.draft.shapes import Observation, QueryShape, WriteShape, shape_of_command

UNAUTHORIZED = 13
PROFILE_LIMIT = 100_000


@dataclass
class SourceStatus:
    name: str
    used: bool
    detail: str
    entries: int = 0


@dataclass
class CollectionRates:
    reads_per_sec: float = 0.0
    inserts_per_sec: float = 0.0
    updates_per_sec: float = 0.0
    deletes_per_sec: float = 0.0
    interval: float = 0.0


@dataclass
class ServerEvidence:
    statuses: list[SourceStatus] = field(default_factory=list)
    rates: dict[str, CollectionRates] = field(default_factory=dict)
    # (source, shape) -> observation, with the seconds the observation covers
    observations: list[tuple[Observation, float | None]] = field(default_factory=list)


def _refusal(exc: Exception, privilege: str) -> str:
    if isinstance(exc, OperationFailure) and exc.code == UNAUTHORIZED:
        return f"not permitted: needs the {privilege}"
    text = str(exc).split(", full error:")[0]
    if "Unrecognized pipeline stage" in text:
        return "not available: $queryStats needs MongoDB 7.1+ or Atlas (and the queryStatsRead privilege)"
    return f"not available: {text[:160]}"


def read_top(
    client: Any, database: str, interval: float, sleep: Callable[[float], None] = time.sleep
) -> tuple[SourceStatus, dict[str, CollectionRates]]:
    """Per-collection operation rates from two ``top`` readings ``interval`` seconds apart."""
    try:
        first = client.admin.command("top")
        started = time.monotonic()
        sleep(interval)
        second = client.admin.command("top")
        elapsed = max(time.monotonic() - started, interval, 1e-6)
    except (PyMongoError, NotImplementedError, TypeError) as exc:
        reason = _refusal(exc, "'top' action on the cluster (role clusterMonitor)")
        return SourceStatus("top", False, reason), {}
    rates: dict[str, CollectionRates] = {}
    before, after = first.get("totals", {}), second.get("totals", {})
    prefix = database + "."
    for namespace, counters in after.items():
        if not isinstance(counters, dict) or not namespace.startswith(prefix):
            continue
        collection = namespace[len(prefix) :]
        if collection.startswith("system.") or collection.startswith("mongopat_"):
            continue
        old = before.get(namespace, {})

        def delta(name: str, counters=counters, old=old) -> float:
            return max(0, _count(counters, name) - _count(old, name)) / elapsed

        rates[collection] = CollectionRates(
            reads_per_sec=delta("queries") + delta("commands"),  # top counts aggregations as commands
            inserts_per_sec=delta("insert"),
            updates_per_sec=delta("update"),
            deletes_per_sec=delta("remove"),
            interval=elapsed,
        )
    detail = f"two readings {elapsed:.0f} s apart, {len(rates)} collections of {database}"
    return SourceStatus("top", True, detail, len(rates)), rates


def _count(counters: dict[str, Any], name: str) -> int:
    entry = counters.get(name)
    return int(entry.get("count", 0)) if isinstance(entry, dict) else 0


def read_query_stats(client: Any, database: str) -> tuple[SourceStatus, list[tuple[Observation, float | None]]]:
    try:
        entries = list(client.admin.aggregate([{"$queryStats": {}}]))
    except (PyMongoError, NotImplementedError, TypeError) as exc:
        reason = _refusal(exc, "queryStatsRead privilege (MongoDB 7.1+ or Atlas)")
        return SourceStatus("$queryStats", False, reason), []
    found = []
    for entry in entries:
        key = entry.get("key", {}) if isinstance(entry, dict) else {}
        shape_doc = key.get("queryShape", {}) if isinstance(key, dict) else {}
        namespace = shape_doc.get("cmdNs", {})
        if namespace.get("db") != database or not namespace.get("coll"):
            continue
        command = {k: v for k, v in shape_doc.items() if k not in ("cmdNs", "command")}
        command[shape_doc.get("command", "find")] = namespace["coll"]
        shape = shape_of_command(command)
        if not isinstance(shape, QueryShape):
            continue
        metrics = entry.get("metrics", {})
        observation = Observation(shape, "$queryStats")
        observation.count = int(metrics.get("execCount", 0))
        total = metrics.get("totalExecMicros", {})
        if isinstance(total, dict) and observation.count:
            observation.durations_ms.append(float(total.get("sum", 0)) / 1000 / observation.count)
            if total.get("max") is not None:
                observation.durations_ms.append(float(total["max"]) / 1000)
        observation.examined = int((metrics.get("docsExamined") or {}).get("sum", 0))
        observation.returned = int((metrics.get("docsReturned") or {}).get("sum", 0))
        first, last = metrics.get("firstSeenTimestamp"), metrics.get("latestSeenTimestamp")
        span = (last - first).total_seconds() if first is not None and last is not None else None
        found.append((observation, span))
    status = SourceStatus("$queryStats", True, f"{len(found)} query shapes on {database}", len(found))
    return status, found


def read_profile(client: Any, database: str) -> tuple[SourceStatus, list[tuple[Observation, float | None]]]:
    db = client[database]
    try:
        level = db.command("profile", -1).get("was", 0)
    except (PyMongoError, NotImplementedError, TypeError) as exc:
        return SourceStatus("system.profile", False, _refusal(exc, "'read' role on the database")), []
    try:
        cursor = db["system.profile"].find({}, sort=[("$natural", -1)], limit=PROFILE_LIMIT)
        entries = list(cursor)
    except (PyMongoError, NotImplementedError, TypeError) as exc:
        return SourceStatus("system.profile", False, _refusal(exc, "'read' role on the database")), []
    if not entries:
        hint = "profiling is off: db.setProfilingLevel(1) records slow operations" if not level else "no entries yet"
        return SourceStatus("system.profile", False, hint), []
    observations: dict[QueryShape | WriteShape, Observation] = {}
    first = last = None
    for entry in entries:
        namespace = entry.get("ns", "")
        if not isinstance(namespace, str) or not namespace.startswith(database + "."):
            continue
        collection = namespace[len(database) + 1 :]
        if collection.startswith("system.") or collection.startswith("$cmd"):
            continue
        command = entry.get("command", {})
        if entry.get("op") == "getmore":
            command = entry.get("originatingCommand", command)
        shape = shape_of_command(command, collection) if isinstance(command, dict) else None
        if shape is None and entry.get("op") in ("insert", "update", "remove"):
            shape = WriteShape({"remove": "delete"}.get(entry["op"], entry["op"]), collection)
        if shape is None:
            continue
        when = entry.get("ts")
        stamp = when.timestamp() if hasattr(when, "timestamp") else None
        if stamp is not None:
            first = stamp if first is None else min(first, stamp)
            last = stamp if last is None else max(last, stamp)
        observation = observations.get(shape) or observations.setdefault(shape, Observation(shape, "system.profile"))
        observation.add(stamp, entry.get("millis"), int(entry.get("docsExamined", 0) or 0),
                        int(entry.get("nreturned", 0) or 0), entry.get("planSummary"))  # fmt: skip
    span = (last - first) if first is not None and last is not None and last > first else None
    status = SourceStatus(
        "system.profile", True, f"{len(entries):,} entries, profiling level {level}", len(observations)
    )
    return status, [(o, span) for o in observations.values()]


def probe_server(
    client: Any, database: str, interval: float, sleep: Callable[[float], None] = time.sleep
) -> ServerEvidence:
    evidence = ServerEvidence()
    status, rates = read_top(client, database, interval, sleep)
    evidence.statuses.append(status)
    evidence.rates = rates
    for reader in (read_query_stats, read_profile):
        status, observations = reader(client, database)
        evidence.statuses.append(status)
        evidence.observations.extend(observations)
    return evidence
