"""``mongopat rules`` on the console: a row per detector."""

from __future__ import annotations

from typing import Any


def _threshold(value: float) -> str:
    return f"{value:,.0f}" if value >= 1000 else f"{value:g}"


def _plain(text: str) -> str:
    """A docstring for people: ``code`` marks become plain quotes."""
    return text.replace("``", "'")


def print_rules(rules: list[dict[str, Any]], out: Any) -> None:
    from rich.table import Table

    table = Table(header_style="bold")
    for column in ("code", "name", "kind", "title"):
        table.add_column(column, no_wrap=column != "title")
    for r in rules:
        table.add_row(r["code"], r["name"], r["kind"], r["title"])
    out.print(table)
    out.print("One rule, its thresholds and what it looks for: mongopat rules MP101", markup=False, style="dim")


def print_rule(rules: list[dict[str, Any]], out: Any) -> None:
    for r in rules:
        out.print(f"{r['code']} {r['name']} ({r['kind']}): {r['title']}", markup=False, style="bold", soft_wrap=True)
        out.print(_plain(r["description"]), markup=False)
        for key, value in r["thresholds"].items():
            out.print(f"  threshold {key} = {_threshold(value)}", markup=False, soft_wrap=True)
        if r["thresholds"]:
            out.print(
                f"  override: --threshold {r['code']}.KEY=NUMBER, or thresholds: in the access file", markup=False
            )
