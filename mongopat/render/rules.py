"""``mongopat rules`` on the console: a row per detector."""

from __future__ import annotations

from typing import Any


def print_rules(rules: list[dict[str, Any]], out: Any) -> None:
    from rich.table import Table

    table = Table(header_style="bold")
    for column in ("code", "name", "kind", "thresholds", "what it looks for"):
        table.add_column(column)
    for r in rules:
        thresholds = ", ".join(f"{k}={v:,.0f}" if v >= 1000 else f"{k}={v:g}" for k, v in r["thresholds"].items())
        table.add_row(r["code"], r["name"], r["kind"], thresholds, r["description"])
    out.print(table)
