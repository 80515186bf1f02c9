"""The analysis report: the versioned JSON document that ``recommend`` and ``check`` read back.

Shape (``report_version`` 1) is documented in the README; fields are only ever added within a version.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

from mongopat import __version__
from mongopat.errors import InputError

REPORT_VERSION = 1


def build_report(
    source_kind: str, location: str, database: str, collections: list[dict[str, Any]], notes: list[str]
) -> dict[str, Any]:
    return {
        "report_version": REPORT_VERSION,
        "mongopat_version": __version__,
        "generated_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "source": {"kind": source_kind, "location": location, "database": database},
        "collections": collections,
        "notes": notes,
    }


def write_report(report: dict[str, Any], path: str | Path) -> None:
    target = Path(path)
    temporary = target.with_name(target.name + ".tmp")
    try:
        temporary.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        temporary.replace(target)
    except OSError as exc:
        raise InputError(f"cannot write report to {path}: {exc.strerror or exc}") from None


def load_report(path: str | Path) -> dict[str, Any]:
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"report not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read report {path}: {exc}") from None
    try:
        report = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
    if not isinstance(report, dict) or "report_version" not in report:
        raise InputError(
            f"{path}: not a mongopat report (no report_version)",
            hint="create one with mongopat analyze --output",
        )
    if report["report_version"] != REPORT_VERSION:
        raise InputError(
            f"{path}: report_version {report['report_version']!r} is not supported",
            hint=f"this mongopat reads report_version {REPORT_VERSION}",
        )
    if not isinstance(report.get("collections"), list):
        raise InputError(f"{path}: 'collections' must be a list")
    return report
