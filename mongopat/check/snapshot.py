"""Schema snapshots: the analysed shape, committed to the repository, and what changed since.

A snapshot keeps, per collection, each field path's types, its presence and its array length (p95),
and the indexes. Comparing a new analysis with it reports new and vanished fields, type changes,
presence shifts past a tolerance, array lengths that grew or shrank past a factor, and index changes.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

from mongopat.errors import InputError

SNAPSHOT_VERSION = 1
MAJOR_TYPE_SHARE = 0.05  # types below this share are noise, not part of the shape


def presence_band(presence: float | None) -> str:
    if presence is None:
        return "n/a"
    if presence >= 0.999:
        return "always"
    if presence >= 0.5:
        return "mostly"
    if presence >= 0.05:
        return "sometimes"
    return "rarely"


def build_snapshot(report: dict[str, Any]) -> dict[str, Any]:
    collections = {}
    for collection in report["collections"]:
        fields = {}
        for entry in collection["fields"]:
            array = entry.get("array")
            fields[entry["path"]] = {
                "types": sorted(t["type"] for t in entry["types"] if t["share"] >= MAJOR_TYPE_SHARE),
                "presence": entry["presence"],
                "presence_band": presence_band(entry["presence"]),
                "array_p95": array["p95"] if array else None,
            }
        collections[collection["name"]] = {
            "fields": fields,
            "indexes": sorted(json.dumps(i["key"]) for i in collection.get("indexes", [])),
        }
    return {
        "snapshot_version": SNAPSHOT_VERSION,
        "database": report["source"]["database"],
        "taken_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "collections": collections,
    }


def load_snapshot(path: str | Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(
            f"snapshot not found: {path}", hint="write one with mongopat check --write-snapshot FILE"
        ) from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not a snapshot: {exc}") from None
    if not isinstance(data, dict) or data.get("snapshot_version") != SNAPSHOT_VERSION:
        raise InputError(f"{path}: not a mongopat snapshot (snapshot_version {SNAPSHOT_VERSION} expected)")
    return data


def compare(
    old: dict[str, Any], new: dict[str, Any], presence_tolerance: float, length_factor: float
) -> list[dict[str, Any]]:
    """Changes from ``old`` to ``new``: each a dict with kind, severity, collection, field, message."""
    changes: list[dict[str, Any]] = []

    def add(kind: str, severity: str, collection: str, field: str | None, message: str, **evidence: Any) -> None:
        changes.append(
            {
                "kind": kind,
                "severity": severity,
                "collection": collection,
                "field": field,
                "message": message,
                "evidence": evidence,
            }
        )

    for name in sorted(set(old["collections"]) | set(new["collections"])):
        before, after = old["collections"].get(name), new["collections"].get(name)
        if before is None:
            add("new-collection", "warning", name, None, f"collection {name} is new")
            continue
        if after is None:
            add("vanished-collection", "error", name, None, f"collection {name} is gone")
            continue
        for path in sorted(set(before["fields"]) | set(after["fields"])):
            was, now = before["fields"].get(path), after["fields"].get(path)
            if was is None:
                add(
                    "new-field",
                    "warning",
                    name,
                    path,
                    f"{name}.{path} is new ({now['presence_band']}, {', '.join(now['types'])})",
                    presence=now["presence"],
                    types=now["types"],
                )
                continue
            if now is None:
                add(
                    "vanished-field",
                    "error",
                    name,
                    path,
                    f"{name}.{path} is gone (was {was['presence_band']})",
                    presence=was["presence"],
                )
                continue
            if was["types"] != now["types"]:
                add(
                    "type-change",
                    "error",
                    name,
                    path,
                    f"{name}.{path} types changed: {', '.join(was['types'])} -> {', '.join(now['types'])}",
                    before=was["types"],
                    after=now["types"],
                )
            if (
                was["presence"] is not None
                and now["presence"] is not None
                and abs(now["presence"] - was["presence"]) > presence_tolerance
            ):
                add(
                    "presence-shift",
                    "warning",
                    name,
                    path,
                    f"{name}.{path} presence moved from {was['presence']:.0%} to {now['presence']:.0%}",
                    before=was["presence"],
                    after=now["presence"],
                    tolerance=presence_tolerance,
                )
            old_len, new_len = was.get("array_p95"), now.get("array_p95")
            if (
                old_len is not None
                and new_len is not None
                and max(old_len, 1)
                and (new_len > max(old_len, 1) * length_factor or new_len * length_factor < old_len)
            ):
                add(
                    "length-shift",
                    "warning",
                    name,
                    path,
                    f"{name}.{path} array p95 moved from {old_len} to {new_len}",
                    before=old_len,
                    after=new_len,
                    factor=length_factor,
                )
        for index in sorted(set(before["indexes"]) - set(after["indexes"])):
            add("index-removed", "warning", name, None, f"{name}: index {index} is gone", key=json.loads(index))
        for index in sorted(set(after["indexes"]) - set(before["indexes"])):
            add("index-added", "info", name, None, f"{name}: index {index} is new", key=json.loads(index))
    return changes
