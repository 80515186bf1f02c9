"""Write a draft as YAML with comments (the evidence behind each entry), or as JSON; and on the console,
which sources gave evidence and what was flagged."""

from __future__ import annotations

import datetime
from typing import Any

import yaml

from mongopat import __version__
from mongopat.draft.build import Draft, rate_value


def _flow(value: Any) -> str:
    """One value in YAML flow style (scalars go through a list so no document-end marker is written)."""
    if isinstance(value, (dict, list)):
        return yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=10_000).strip()
    return yaml.safe_dump([value], default_flow_style=True, width=10_000).strip()[1:-1]


def to_yaml(draft: Draft) -> str:
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    used = [f"{s.name} ({s.detail})" for s in draft.statuses if s.used]
    skipped = [f"{s.name}: {s.detail}" for s in draft.statuses if not s.used]
    lines = [f"# Drafted by mongopat {__version__} on {stamp}. Review every entry before committing it."]
    lines += [f"# Evidence from: {', '.join(used) or 'nothing'}."]
    lines += [f"# Not used: {item}." for item in skipped]
    lines += [f"# Note: {note}." for note in draft.notes]
    lines += ["version: 1", f"database: {_flow(draft.database)}", "collections:"]
    if not draft.collections:
        lines[-1] = "collections: {}"
    for name, entry in draft.collections.items():
        if not entry.writes and not entry.queries:
            lines.append(f"  {_flow(name)}: {{}}")
            continue
        lines.append(f"  {_flow(name)}:")
        if entry.writes:
            if entry.writes_comment:
                lines.append(f"    # {entry.writes_comment}")
            writes = {key: rate_value(value) for key, value in entry.writes.items()}
            lines.append(f"    writes: {_flow(writes)}")
        if entry.queries:
            lines.append("    queries:")
            for query in entry.queries:
                lines.append(f"      # {query.comment}")
                for flag in query.flags:
                    lines.append(f"      # FLAG: {flag}")
                lines.append(f"      - name: {_flow(query.name)}")
                for key, value in query.spec.items():
                    lines.append(f"        {key}: {_flow(value)}")
    return "\n".join(lines) + "\n"


def to_json(draft: Draft) -> dict[str, Any]:
    return {
        "database": draft.database,
        "sources": [{"name": s.name, "used": s.used, "detail": s.detail, "entries": s.entries} for s in draft.statuses],
        "collections": {
            name: {
                "writes": {key: round(value, 6) for key, value in entry.writes.items()},
                "writes_evidence": entry.writes_comment or None,
                "queries": [{"name": q.name, **q.spec, "evidence": q.comment, "flags": q.flags} for q in entry.queries],
            }
            for name, entry in draft.collections.items()
        },
        "flags": draft.flags(),
        "notes": draft.notes,
        "access_yaml": to_yaml(draft),
    }


def print_summary(draft: Draft, console: Any) -> None:
    """The sources tried (used or not, and why) and the flagged queries."""
    from rich.table import Table

    table = Table(title="sources", header_style="bold")
    for column in ("source", "used", "entries", "detail"):
        table.add_column(column)
    for status in draft.statuses:
        table.add_row(status.name, "yes" if status.used else "no", str(status.entries), status.detail)
    console.print(table)
    for flag in draft.flags():
        console.print(f"flag: {flag['collection']}.{flag['query']}: {flag['flag']}", markup=False, soft_wrap=True)
