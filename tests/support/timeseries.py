"""Readings and time-series migration files that the time-series tests share."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from bson import ObjectId

from mongopat.migrate.script import render

START = datetime.datetime(2026, 3, 1)
# mongomock creates no time-series collection (the README's conformance table).
NO_TIMESERIES = "create_collection('t', timeseries={'timeField': 'ts'}): NotImplementedError"


def readings(n: int = 3000, every: float = 2.0, sensors: int = 10, start: datetime.datetime = START) -> list[dict]:
    """``sensors`` series, each reading every ``every`` seconds (``n`` readings in all); ``_id``s rise with
    the time, as ObjectIds a client makes do."""
    step = every / sensors
    docs = []
    for i in range(n):
        when = start + datetime.timedelta(seconds=i * step)
        oid = ObjectId(
            int(when.replace(tzinfo=datetime.timezone.utc).timestamp()).to_bytes(4, "big") + i.to_bytes(8, "big")
        )
        docs.append({"_id": oid, "ts": when, "sensor": f"s{i % sensors}", "temp": 20 + (i % 7) * 0.5, "n": i})
    return docs


def migration_file(folder: Path, **params: Any) -> Path:
    """A migrations folder with one timeseries step: readings into readings_ts (sensor the metaField)."""
    step = {"step": "timeseries", "collection": "readings", "to": "readings_ts", "time_field": "ts",
            "meta_field": "sensor", "granularity": "seconds"}  # fmt: skip
    step.update(params)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "0001_ts.yaml").write_text(render("0001_ts", "readings into a time-series collection", [step]))
    return folder


def hand_buckets(buckets: int = 40, per_bucket: int = 25, sensors: int = 4) -> list[dict]:
    """Buckets made by hand: one document a sensor and hour, its readings in an array (no _id of their own),
    its count and its first and last time."""
    docs = []
    for b in range(buckets):
        start = START + datetime.timedelta(hours=b // sensors)
        elements = [
            {"ts": start + datetime.timedelta(seconds=i * 60), "temp": 20 + (b * per_bucket + i) % 9 * 0.5}
            for i in range(per_bucket)
        ]
        docs.append({"_id": ObjectId(int(start.replace(tzinfo=datetime.timezone.utc).timestamp()).to_bytes(4, "big")
                                     + b.to_bytes(8, "big")),
                     "sensor": f"s{b % sensors}", "start": elements[0]["ts"], "end": elements[-1]["ts"],
                     "count": per_bucket, "readings": elements})  # fmt: skip
    return docs


def unwind_file(folder: Path, **params: Any) -> Path:
    """A migrations folder with one timeseries step unwinding hand-made buckets (readings) into readings_ts."""
    return migration_file(folder, collection="readings", unwind="readings", count_field="count",
                          start_field="start", end_field="end", **params)  # fmt: skip
