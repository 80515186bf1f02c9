"""Figures as people read them in tables and pages: shares, times with their zone, values of the data."""

from __future__ import annotations

import datetime
import json
from typing import Any


def percent(share: float) -> str:
    """A share as people read it: a field held by 3 documents of 10,000 is "<1%", not "0%"."""
    pct = max(0.0, min(1.0, share)) * 100
    if 0 < pct < 1:
        return "<1%"
    if 99 < pct < 100:
        return ">99%"
    return f"{pct:.0f}%"


def instant(text: str) -> datetime.datetime:
    """A report's ISO time (``...Z``, an offset, or none: UTC, as BSON dates are) as an aware datetime."""
    when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return when if when.tzinfo is not None else when.replace(tzinfo=datetime.timezone.utc)


def moment(text: Any, span_seconds: float | None = None) -> str:
    """A report's ISO time as people read it, with its zone: ``2026-09-01 14:00 UTC``; to the second where
    the period it stands in is shorter than an hour. Anything else (a position in the stream, nothing) is
    written as it is."""
    if not isinstance(text, str):
        return "-" if text is None else str(text)
    try:
        shown = instant(text).astimezone(datetime.timezone.utc)
    except ValueError:
        return text
    form = "%Y-%m-%d %H:%M:%S" if span_seconds is not None and span_seconds < 3600 else "%Y-%m-%d %H:%M"
    return shown.strftime(form) + " UTC"


def data_value(value: Any) -> str:
    """A value of the data as MongoDB's shell writes it: ``true``, ``null``, strings as they are."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    return str(value)
