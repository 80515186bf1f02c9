"""Building evidence for rule tests: documents -> dump folder -> report -> recommendations."""

from __future__ import annotations

import datetime
import random
from pathlib import Path
from typing import Any

from bson import ObjectId

from mongopat.access import parse_access_text
from mongopat.command import analyze
from mongopat.rules import Context, run_rules
from mongopat.sources import SourceSpec
from tests.support.dumps import write_export

START = datetime.datetime(2026, 1, 1)


def oid_at(when: datetime.datetime, n: int) -> ObjectId:
    seconds = int(when.replace(tzinfo=datetime.timezone.utc).timestamp())
    return ObjectId(seconds.to_bytes(4, "big") + n.to_bytes(8, "big"))


def report_of(folder: Path, collections: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    for name, documents in collections.items():
        write_export(folder, name, documents)
    return analyze(SourceSpec(dump=str(folder)))


def findings(report, access: str | None = None, thresholds=None, rule: str | None = None):
    access_file = None
    if access is not None:
        access_file = parse_access_text(access, "access.yaml", [c["name"] for c in report["collections"]])
    found = run_rules(Context(report, access_file, thresholds), {rule} if rule else None)
    return found


def healthy_collection(n: int = 200) -> list[dict[str, Any]]:
    """Uniform shape, small bounded arrays, low insert rate: nothing to recommend."""
    rng = random.Random(5)
    return [
        {
            "_id": oid_at(START + datetime.timedelta(hours=i), i),
            "name": f"n{i}",
            "status": rng.choice(["a", "b"]),
            "tags": ["x", "y"][: rng.randint(0, 2)],
            "updatedAt": START + datetime.timedelta(hours=i),
        }
        for i in range(n)
    ]
