"""``mongopat check``'s result on the console: the verdict, which checks ran, the findings."""

from __future__ import annotations

from typing import Any


def print_check(result: dict[str, Any], out: Any) -> None:
    from rich.table import Table

    summary = result["summary"]
    status = "[bold green]ok[/]" if result["ok"] else f"[bold red]{summary['failing']} failing[/]"
    out.print(
        f"mongopat check: {status} (fail on {result['fail_on']}; {summary['findings']} finding(s), "
        f"{summary['waived']} waived)"
    )
    for name, ran in result["checks"].items():
        out.print(
            f"  {name}: " + ("checked" if ran["ran"] else f"skipped ({ran['note']})"),
            markup=False,
            style="dim",
            soft_wrap=True,
        )
    if result["findings"]:
        table = Table(header_style="bold")
        for column in ("severity", "id", "check", "where", "message"):
            table.add_column(column)
        for finding in result["findings"]:
            where = ".".join(x for x in (finding.collection, finding.field) if x)
            severity = "waived" if finding.waived else finding.severity
            table.add_row(severity, finding.id, finding.check, where, finding.message[:160])
        out.print(table)
    for note in result["notes"]:
        out.print(f"note: {note}", markup=False, style="dim", soft_wrap=True)
