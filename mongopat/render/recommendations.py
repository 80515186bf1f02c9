"""Recommendations for people: rich tables on a terminal, Markdown for pull requests."""

from __future__ import annotations

import json
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table
from rich.text import Text

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def _where(rec: dict[str, Any]) -> str:
    return rec["collection"] or ", ".join(rec["evidence"].get("collections", [])) or "(database)"


def evidence_value(value: Any, between_reads: str = "\n") -> str:
    """A recommendation's evidence value for a table: yes/no, "-" for nothing, figures with separators,
    the reads it judged one a line (``between_reads``), anything else as JSON."""
    if isinstance(value, list) and value and all(isinstance(item, dict) and "shape" in item for item in value):
        return between_reads.join(read_line(item) for item in value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, default=str)
    return str(value)


def print_recommendations(result: dict[str, Any], console: Console, verbose: bool = False) -> None:
    recs = result["recommendations"]
    summary = result["summary"]["by_severity"]
    heading = Text(f"{len(recs)} recommendation(s): ", style="bold")
    heading.append(", ".join(f"{summary[s]} {s}" for s in ("error", "warning", "info")))
    console.print(heading)
    for note in result.get("notes", []):
        console.print(Text(f"note: {note}", style="dim"))
    if not recs:
        console.print("No pattern or anti-pattern applies: the collections look healthy for what is known.")
        return
    table = Table(header_style="bold")
    for column in ("severity", "code", "pattern", "collection", "fields", "confidence", "title"):
        table.add_column(column, no_wrap=column in ("severity", "code"))
    for rec in recs:
        table.add_row(
            Text(rec["severity"], style=SEVERITY_STYLE[rec["severity"]]),
            rec["code"],
            rec["pattern"],
            _where(rec),
            ", ".join(rec["fields"][:4]) + (" …" if len(rec["fields"]) > 4 else ""),
            f"{rec['confidence']:.2f}",
            rec["title"],
        )
    console.print(table)
    for rec in recs:
        console.print()
        title = Text(f"{rec['code']} {rec['pattern']}", style=SEVERITY_STYLE[rec["severity"]])
        title.append(f" · {_where(rec)} · {rec['title']}", style="bold")
        console.print(title)
        console.print(Text(rec["rationale"]), soft_wrap=False)
        evidence = Table(box=None, show_header=False, pad_edge=False)
        evidence.add_column(style="dim")
        evidence.add_column()
        for key, value in rec["evidence"].items():
            evidence.add_row(f"  {key}", evidence_value(value))
        console.print(evidence)
        for tradeoff in rec["tradeoffs"]:
            console.print(Text(f"  trade-off: {tradeoff}", style="dim"))
        for line in prediction_lines(rec.get("prediction")):
            console.print(Text(f"  {line}"))
        if rec["migration"] and verbose:
            console.print(Text("  migration: " + json.dumps(rec["migration"], default=str), style="dim"))


def read_line(entry: dict[str, Any]) -> str:
    """One read of index evidence: ``history {st: eq} sort ts:1, 20/s: no index, 10,000 examined (sort in
    memory) → st_1_ts_1, 1 examined``."""

    def plan(cost: dict[str, Any] | None) -> str:
        if cost is None:
            return "cannot run"
        where = cost["index"] or "no index"
        sort = " (sort in memory)" if cost.get("sort_in_memory") else ""
        return f"{where}, {cost['docs_examined']:,.0f} examined{sort}"

    rate = f", {entry['per_sec']:,g}/s" if entry.get("per_sec") else ""
    return f"{entry['read']} {entry['shape']}{rate}: {plan(entry.get('before'))} → {plan(entry.get('after'))}"


def prediction_lines(prediction: dict[str, Any] | None) -> list[str]:
    """What a migration is predicted to do, one line a collection or read ("predicted: readings 6,000 →
    40 documents, 568 KiB → 466 KiB")."""
    if not prediction:
        return []
    lines = []
    for entry in prediction.get("collections") or []:
        before, after = entry.get("before") or {}, entry.get("after") or {}
        parts = [f"{before.get('documents', 0):,} → {after['documents']:,} documents"] if "documents" in after else []
        if after.get("data_bytes") is not None:
            parts.append(f"{_bytes(before.get('data_bytes'))} → {_bytes(after['data_bytes'])}")
        if after.get("median_document_bytes") is not None:
            parts.append(f"median document {_bytes(after['median_document_bytes'])}")
        lines.append(f"predicted: {entry['collection']} " + ", ".join(parts or ["(not predicted)"]))
    for read in prediction.get("reads") or []:
        if read.get("examined_before") is not None and read.get("examined_after") is not None:
            lines.append(
                f"predicted: read {read['read']} examines {read['examined_before']:,.0f} → "
                f"{read['examined_after']:,.0f} documents"
            )
    lines.extend(f"note: {note}" for note in prediction.get("notes") or [])
    return lines


def _bytes(value: Any) -> str:
    if value is None:
        return "?"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= size:
            return f"{value / size:,.1f} {unit}"
    return f"{value:,} B"


def to_markdown(result: dict[str, Any]) -> str:
    recs = result["recommendations"]
    by = result["summary"]["by_severity"]
    lines = [
        f"## mongopat: {len(recs)} recommendation(s) for `{result['source']['database']}`",
        "",
        f"{by['error']} error · {by['warning']} warning · {by['info']} info",
        "",
    ]
    if not recs:
        lines.append("No pattern or anti-pattern applies.")
        return "\n".join(lines) + "\n"
    lines += ["| severity | code | pattern | collection | confidence | title |", "|---|---|---|---|---|---|"]
    for rec in recs:
        lines.append(
            f"| {rec['severity']} | {rec['code']} | {rec['pattern']} | {_where(rec)} | {rec['confidence']:.2f} "
            f"| {_escape(rec['title'])} |"
        )
    for rec in recs:
        lines += ["", f"### {rec['code']} {rec['pattern']}: {_where(rec)}", "", _escape(rec["rationale"]), ""]
        lines += ["| evidence | value |", "|---|---|"]
        lines += [f"| {key} | {_escape(evidence_value(value))} |" for key, value in rec["evidence"].items()]
        if rec["tradeoffs"]:
            lines += ["", "Trade-offs:", ""] + [f"- {_escape(t)}" for t in rec["tradeoffs"]]
        predicted = prediction_lines(rec.get("prediction"))
        if predicted:
            lines += ["", "Prediction:", ""] + [f"- {_escape(line)}" for line in predicted]
        if rec["migration"]:
            lines += [
                "",
                "Migration step:",
                "",
                "```yaml",
                yaml.safe_dump(rec["migration"], sort_keys=False).rstrip(),
                "```",
            ]
    return "\n".join(lines) + "\n"


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
