"""The migration guide as markdown, for a pull request (a terminal shows the same text rendered by rich)."""

from __future__ import annotations

import json
from typing import Any

_PHASE_TITLES = {
    "before": "Before `migrate up`: deploy",
    "during": "While `migrate up` runs: handle",
    "after": "After `migrate up` has finished: change or drop",
}


def json_lines(value: Any) -> str:
    """Relaxed Extended JSON, one stage (or command) a line."""
    from bson import json_util

    plain = json.loads(json_util.dumps(value, json_options=json_util.RELAXED_JSON_OPTIONS))
    if not isinstance(plain, list):
        return json.dumps(plain)
    if not plain:
        return "[]"
    return "[\n" + ",\n".join("  " + json.dumps(item) for item in plain) + "\n]"


def _count(value: float | None) -> str:
    if value is None:
        return "unknown"
    return f"{value:,.0f}" if value >= 1 else f"{value:.3g}"


def _rate(per_sec: float | None) -> str:
    if not per_sec:
        return "rate not declared"
    if per_sec >= 1:
        return f"{per_sec:g}/s"
    return f"{per_sec * 3600:.3g}/h"


def guide_markdown(document: dict[str, Any]) -> str:
    lines = ["# Migration guide", ""]
    if not document["migrations"]:
        lines += ["No migration to describe.", ""]
    for note in document.get("notes", []):
        lines += [f"> {note}", ""]
    for migration in document["migrations"]:
        lines += _migration(migration)
    return "\n".join(lines).rstrip() + "\n"


def _migration(migration: dict[str, Any]) -> list[str]:
    lines = [f"## {migration['id']}", "", migration["description"] or "", ""]
    lines += [f"Collections changed: {', '.join(f'`{c}`' for c in migration['collections'])}", ""]
    for note in migration["notes"]:
        lines += [f"> {note}", ""]
    if migration["deploy"]:
        lines += ["### Order of deploys", ""]
        for phase, title in _PHASE_TITLES.items():
            actions = [item["action"] for item in migration["deploy"] if item["phase"] == phase]
            if actions:
                lines.append(f"**{title}**")
                lines += [f"- {action}" for action in actions]
                lines.append("")
    changed = [read for read in migration["reads"] if read["changed"]]
    unchanged = [read for read in migration["reads"] if not read["changed"]]
    if changed:
        lines += ["### Reads to change", ""]
        for read in changed:
            lines += _read(read)
    if unchanged:
        names = ", ".join(f"`{r['collection']}.{r['query']}`" for r in unchanged)
        lines += [f"Reads that stay as they are: {names}.", ""]
        for read in unchanged:
            lines += [f"- `{read['query']}`: {note}" for note in read["notes"]]
        lines.append("")
    if migration["writes"]:
        lines += ["### Writes to change", ""]
        for write in migration["writes"]:
            lines += _write(write)
    if migration["indexes"]:
        lines += ["### Indexes the new reads need", "", "| collection | keys | status | reads |", "|---|---|---|---|"]
        for index in migration["indexes"]:
            keys = json.dumps(index["keys"])
            lines.append(f"| {index['collection']} | `{keys}` | {index['status']} | {', '.join(index['reads'])} |")
        lines.append("")
    return lines


def _read(read: dict[str, Any]) -> list[str]:
    examined = read["documents_examined"]
    lines = [
        f"#### `{read['collection']}` · {read['query']}",
        "",
        f"Documents examined per read: {_count(examined['before'])} today, {_count(examined['after'])} after "
        f"({examined['basis']}).",
        "",
    ]
    notes = list(read["notes"])
    if read["after"]["collection"] != read["before"]["collection"]:
        notes.insert(0, f"after the migration it reads `{read['after']['collection']}`")
    lines += [f"- {note}" for note in notes]
    if notes:
        lines.append("")
    if read["parameters"]:
        described = []
        for item in read["parameters"]:
            text = f"`{item['name']}` (the {item['field']} to match"
            text += ", a range: `bound` lower inclusive, upper exclusive)" if item["range"] else ")"
            described.append(text)
        lines += ["Parameters: " + ", ".join(described) + ".", ""]
    lines += _today_and_after(read["before"]["pipeline"], read["after"]["pipeline"])
    during = (read.get("during") or {}).get("pipeline")
    if during is None:
        lines += ["No read serves both shapes while `migrate up` runs: switch to the rewritten read when it ends.", ""]
    elif during == read["before"]["pipeline"]:
        lines += ["While `migrate up` runs, today's read serves documents of both shapes.", ""]
    elif during == read["after"]["pipeline"]:
        lines += ["The rewritten read also serves documents of the old shape: deploy it before `migrate up`.", ""]
    else:
        lines += ["While `migrate up` runs (documents of both shapes):", "", "```json", json_lines(during), "```", ""]
    return lines


def _write(write: dict[str, Any]) -> list[str]:
    written = write["documents_written"]
    lines = [
        f"#### {write['description']} ({write['operation']})",
        "",
        f"{_rate(write['per_sec'])}; documents written per write: {_count(written.get('before'))} today, "
        f"{_count(written.get('after'))} after." + (" The count is approximate." if write["approximate"] else ""),
        "",
    ]
    lines += _today_and_after(write["before"], write["after"])
    if write["parameters"]:
        lines += ["Parameters:", ""]
        lines += [f"- `{item['name']}`: {item['description']}" for item in write["parameters"]]
        lines.append("")
    return lines


def _today_and_after(today: Any, after: Any) -> list[str]:
    return [
        *("Today:", "", "```json", json_lines(today), "```", ""),
        *("After the migration:", "", "```json", json_lines(after), "```", ""),
    ]
