"""MongoDB's structured JSON logs (4.4+): the "Slow query" entries, grouped by query shape.

Files are streamed line by line (plain or gzip), so memory does not depend on the log's size. Lines that
are not JSON, are truncated, or are not slow-query entries are counted and skipped.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mongopat.compressed import READ_ERRORS, open_sniffed, unreadable
from mongopat.draft.shapes import Observation, QueryShape, WriteShape, shape_of_command
from mongopat.errors import SourceError
from mongopat.sources.extjson import JSONDecodeError, loads

SLOW_QUERY_ID = 51803  # the "Slow query" message id in MongoDB's structured log


@dataclass
class LogScan:
    files: list[str] = field(default_factory=list)
    lines: int = 0
    slow_queries: int = 0
    malformed: int = 0
    other: int = 0
    cut_short: list[str] = field(default_factory=list)  # gzip files whose data ends early: what was read counts
    first: float | None = None
    last: float | None = None
    observations: dict[tuple[str, QueryShape | WriteShape], Observation] = field(default_factory=dict)

    @property
    def span_seconds(self) -> float | None:
        if self.first is None or self.last is None or self.last <= self.first:
            return None
        return self.last - self.first


def _timestamp(entry: dict[str, Any]) -> float | None:
    when = entry.get("t")
    text = when.get("$date") if isinstance(when, dict) else when
    if not isinstance(text, str):
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def scan_logs(paths: list[str], database: str | None = None, progress: Callable[[int], None] | None = None) -> LogScan:
    """Read every file; keep slow-query entries of ``database`` (all databases when None)."""
    scan = LogScan(files=list(paths))
    done = 0
    for name in paths:
        path = Path(name)
        if not path.exists():
            raise SourceError(f"log file not found: {path}")
        with open_sniffed(path, "log ") as handle:
            try:
                for line in handle:
                    done += len(line)
                    scan.lines += 1
                    _scan_line(scan, line, database)
                    if progress is not None and scan.lines % 5000 == 0:
                        progress(done)
            except READ_ERRORS as exc:  # a truncated gzip member (a log still being written): keep what was read
                if not isinstance(exc, EOFError):
                    raise unreadable(path, exc, f"after line {scan.lines:,}", what="log ") from None
                scan.malformed += 1
                scan.cut_short.append(f"{path} ends early after line {scan.lines:,}")
    if progress is not None:
        progress(done)
    return scan


def _scan_line(scan: LogScan, line: bytes, database: str | None) -> None:
    try:
        entry = loads(line)
    except (JSONDecodeError, ValueError):
        scan.malformed += 1
        return
    if not isinstance(entry, dict):
        scan.malformed += 1
        return
    attr = entry.get("attr")
    if entry.get("id") != SLOW_QUERY_ID or not isinstance(attr, dict):
        scan.other += 1
        return
    namespace = attr.get("ns")
    if not isinstance(namespace, str) or "." not in namespace:
        scan.other += 1
        return
    db, _, collection = namespace.partition(".")
    if (database and db != database) or collection.startswith("$cmd") or collection.startswith("system."):
        scan.other += 1
        return
    command = attr.get("command")
    if attr.get("type") == "getMore" or (isinstance(command, dict) and "getMore" in command):
        command = attr.get("originatingCommand", {})  # a getMore continues its query: same shape
    shape = shape_of_command(command, collection) if isinstance(command, dict) else None
    if shape is None:
        if attr.get("type") in ("update", "remove", "insert"):
            shape = WriteShape({"remove": "delete"}.get(attr["type"], attr["type"]), collection)
        else:
            scan.other += 1
            return
    when = _timestamp(entry)
    if when is not None:
        scan.first = when if scan.first is None else min(scan.first, when)
        scan.last = when if scan.last is None else max(scan.last, when)
    scan.slow_queries += 1
    key = (db, shape)
    observation = scan.observations.get(key)
    if observation is None:
        observation = scan.observations[key] = Observation(shape, "log")
    observation.add(
        when,
        _number(attr.get("durationMillis")),
        int(_number(attr.get("docsExamined")) or 0),
        int(_number(attr.get("nreturned")) or 0),
        attr.get("planSummary") if isinstance(attr.get("planSummary"), str) else None,
    )


def _number(value: Any) -> float | None:
    if isinstance(value, dict):  # {"$numberLong": "12"}
        value = next(iter(value.values()), None)
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
