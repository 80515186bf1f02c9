"""The figures behind a guide's costs: document counts, distinct values and rates from the analysis report,
write rates from the access file, and the documents a read examines.

The model, stated in each read's ``basis``: an equality (or ``in`` of one value) on a field keeps
``1 / distinct`` of the documents; a range on a field the report has a time profile for covers one hour
(``RANGE_SECONDS``) of its documents: an hour of the inserts the access file declares where it declares
them (the workload the read will meet, and the one a step's new shape is sized by), else an hour of the
sample's span; a sorted read with a limit stops at the limit (an index serves the
sort); a join examines one document per joined document, an aggregate of related documents all of them.
Steps scale the result for their new shape (a bucket holds many readings).
"""

from __future__ import annotations

import math
from typing import Any

from mongopat.access.model import AccessFile
from mongopat.rules.base import CollectionEvidence

RANGE_SECONDS = 3600


class Evidence:
    """The report's collections as the rules see them (:class:`CollectionEvidence`), and the access file."""

    def __init__(self, access: AccessFile, report: dict[str, Any] | None = None) -> None:
        self.access = access
        self.collections = {
            c["name"]: CollectionEvidence(c, access.collection(c["name"]))
            for c in (report or {}).get("collections", [])
        }

    def per_sec(self, collection: str, kind: str) -> float | None:
        """Declared ``inserts``, ``updates`` or ``deletes`` per second of ``collection``."""
        spec = self.access.collection(collection)
        return getattr(spec.writes, f"{kind}_per_sec") if spec is not None else None

    def count(self, collection: str) -> int | None:
        found = self.collections.get(collection)
        return found.data.get("count") if found else None

    def field(self, collection: str, path: str) -> dict[str, Any] | None:
        found = self.collections.get(collection)
        return found.field(path) if found else None

    def distinct(self, collection: str, path: str) -> int | None:
        found = self.collections.get(collection)
        return (found.cardinality(path) or None) if found else None

    def mean_length(self, collection: str, path: str) -> float | None:
        array = (self.field(collection, path) or {}).get("array")
        return array.get("mean") if array else None

    def time(self, collection: str, path: str) -> dict[str, Any] | None:
        found = self.collections.get(collection)
        return found.profile(path) if found else None

    def indexes(self, collection: str) -> list[list[str]]:
        """The key names of the collection's analysed indexes."""
        found = self.collections.get(collection)
        return [[name for name, _ in index["key"]] for index in found.data.get("indexes", [])] if found else []

    def per_key(self, collection: str, key: str) -> float | None:
        """Documents per distinct value of ``key`` (orders per customer)."""
        count, distinct = self.count(collection), self.distinct(collection, key)
        return count / distinct if count and distinct else None

    # -- reads ---------------------------------------------------------------------------------------

    def matched(
        self, collection: str, filters: dict[str, str], limit: int | None, sorted_: bool
    ) -> tuple[float | None, str]:
        """Documents a filter of the access file matches in today's shape, and how that was estimated."""
        count = self.count(collection)
        if count is None:
            return None, "no analysis report: run with --report or a source"
        estimate = float(count)
        basis: list[str] = []
        for name, op in filters.items():
            if op in ("eq", "in"):
                distinct = self.distinct(collection, name)
                if not distinct and self.field(collection, name) is None:
                    return None, f"{name} is not in the data yet"
                if distinct:
                    estimate /= distinct
                    basis.append(f"one {name} value (1/{distinct})")
            elif op == "range":
                time = self.time(collection, name)
                declared = self.per_sec(collection, "inserts")
                if time and declared and count:
                    estimate *= declared * RANGE_SECONDS / count  # the hour holds what is inserted in an hour
                    basis.append(f"one hour of {name} at the declared {declared:,g} inserts/s")
                elif time and time.get("span_seconds"):
                    estimate *= min(1.0, RANGE_SECONDS / time["span_seconds"])
                    basis.append(f"one hour of {name} in the sample's span")
        if limit and sorted_:
            estimate = min(estimate, limit)
            basis.append(f"limit {limit}")
        return estimate, ", ".join(basis) or "every document"


def rounded(value: float | None) -> float | None:
    """Whole documents: a read that examines a fraction of one on average examines one when it finds any."""
    if value is None:
        return None
    return float(math.ceil(value - 1e-9)) if value > 0 else 0.0
