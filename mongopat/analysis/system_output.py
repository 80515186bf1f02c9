"""Collections the server writes, not the application: the profiler's output and the oplog.

A dump of ``system.profile`` or of the oplog, saved under any name, holds the server's own documents:
their shape is MongoDB's, not a design the team can change, so no pattern is advised on them. They are
told by the fields MongoDB documents for each (and by a ``system.`` name).
"""

from __future__ import annotations

from typing import Any

SIGNATURES = (
    ("profiler", frozenset(("op", "ns", "millis", "ts"))),
    ("oplog", frozenset(("op", "ns", "o", "ts"))),
)


def system_output(name: str, fields: list[dict[str, Any]]) -> str | None:
    """``profiler``, ``oplog``, ``system`` (another ``system.*`` collection) or None."""
    top = {field["path"] for field in fields if field["depth"] == 1}
    for kind, signature in SIGNATURES:
        if signature <= top:
            return kind
    return "system" if name.startswith("system.") else None


def note(kind: str) -> str:
    what = {"profiler": "the database profiler's output (system.profile)", "oplog": "oplog entries"}
    return f"holds {what.get(kind, 'a system collection')}: written by the server, so no design advice is given"
