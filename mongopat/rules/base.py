"""What a rule is: a small unit with a code, thresholds and a docstring, that turns evidence into findings.

Rules read the analysis report (never the database) and, when given, the access-pattern file. Each rule
states the numbers it used in ``evidence``, so a reviewer can check the recommendation by hand.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from mongopat.access.model import AccessFile, CollectionAccess
from mongopat.analysis.timeline import steady_rate

SEVERITIES = ("info", "warning", "error")
SEVERITY_RANK = {name: rank for rank, name in enumerate(SEVERITIES)}


@dataclass
class Recommendation:
    code: str
    pattern: str  # JSON name of the pattern or anti-pattern
    kind: str  # "pattern", "anti-pattern", or "in-place" (a pattern the collection already follows)
    collection: str | None
    fields: list[str]
    severity: str
    confidence: float
    title: str
    evidence: dict[str, Any]
    rationale: str
    tradeoffs: list[str] = field(default_factory=list)
    migration: dict[str, Any] | None = None
    # What the migration is predicted to do (mongopat.predictions); every migration carries one.
    prediction: dict[str, Any] | None = None
    # ``create_index`` steps the same migration ends with: the indexes the reads it rewrites need.
    index_steps: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["confidence"] = round(self.confidence, 2)
        return data

    def sort_key(self) -> tuple:
        return (-SEVERITY_RANK[self.severity], -self.confidence, self.collection or "", self.code)


class CollectionEvidence:
    """One collection of the report, with the helpers rules need, and its access entry if any."""

    def __init__(self, data: dict[str, Any], access: CollectionAccess | None) -> None:
        self.data = data
        self.name: str = data["name"]
        self.access = access
        self.fields: dict[str, dict[str, Any]] = {f["path"]: f for f in data.get("fields", [])}

    @property
    def count(self) -> int:
        return int(self.data.get("count") or 0)

    @property
    def documents_read(self) -> int:
        return int(self.data.get("sampling", {}).get("documents") or 0)

    @property
    def size(self) -> dict[str, Any]:
        return self.data.get("document_size", {})

    def field(self, path: str) -> dict[str, Any] | None:
        return self.fields.get(path)

    def top_level(self) -> list[dict[str, Any]]:
        return [f for f in self.fields.values() if f["depth"] == 1]

    def arrays(self) -> Iterator[dict[str, Any]]:
        return (f for f in self.fields.values() if f.get("array"))

    def dominant_type(self, path: str) -> str | None:
        found = self.field(path)
        if not found or not found["types"]:
            return None
        top = found["types"][0]
        return top["type"] if top["share"] >= 0.9 else None

    def date_fields(self) -> list[str]:
        return [f["path"] for f in self.top_level() if self.dominant_type(f["path"]) == "date"]

    def profile(self, field_name: str) -> dict[str, Any] | None:
        return next((p for p in self.data.get("time", []) if p["field"] == field_name), None)

    def measured_insert_rate(self) -> tuple[float | None, str | None]:
        """Average inserts/s over the span of ``_id`` timestamps, else the busiest date field. Bulk loads
        count only for what was written outside them (:func:`~mongopat.analysis.timeline.steady_rate`)."""
        profiles = self.data.get("time", [])
        by_id = self.profile("_id")
        if by_id and steady_rate(by_id):
            return steady_rate(by_id), "_id"
        rates = [(steady_rate(p), p["field"]) for p in profiles if steady_rate(p)]
        return max(rates) if rates else (None, None)  # type: ignore[return-value]

    def in_place(self, pattern: str | None = None) -> list[dict[str, Any]]:
        """Patterns the collection already follows (the report's ``patterns_in_place``; recognised here for
        reports written before it existed), optionally only those of one ``pattern``."""
        found = self.data.get("patterns_in_place")
        if found is None:
            from mongopat.analysis.in_place import patterns_in_place

            found = self.data["patterns_in_place"] = patterns_in_place(self.data)
        return [item for item in found if pattern is None or item["pattern"] == pattern]

    def bulk_loaded(self) -> dict[str, Any] | None:
        """The ``_id`` profile's bulk load (the collection was imported at once), if any."""
        by_id = self.profile("_id")
        return by_id.get("bulk_load") if by_id else None

    def declared_inserts(self) -> float | None:
        return self.access.writes.inserts_per_sec if self.access else None

    def declared_updates(self) -> float | None:
        return self.access.writes.updates_per_sec if self.access else None

    def series_cadence(self, series: str, time: str) -> dict[str, Any] | None:
        """Readings per (``series``, window of ``time``) as the analysis counted them, if it did."""
        return next(
            (c for c in self.data.get("series_cadence") or [] if c["series_key"] == series and c["time_field"] == time),
            None,
        )

    def sentinels(self, path: str) -> list[dict[str, Any]]:
        """The placeholder values the analysis found in a field (``numbers.sentinels``)."""
        return ((self.field(path) or {}).get("numbers") or {}).get("sentinels") or []

    def measurements(self, exclude: set[str]) -> list[str]:
        """Numeric fields, top-level or in sub-documents (not in arrays), that vary: what a reading
        measures. Constants and fields holding only a placeholder are no measurements."""
        found = []
        for path, entry in self.fields.items():
            if path in exclude or entry.get("in_array") or "[]" in path or path.startswith("_id."):
                continue
            numeric = sum(t["share"] for t in entry["types"] if t["type"] in ("double", "int", "long", "decimal"))
            if numeric < 0.9:  # ints and doubles mixed are numbers all the same
                continue
            if (self.cardinality(path) or 0) <= 1 or any(s.get("constant") for s in self.sentinels(path)):
                continue
            found.append(path)
        return found

    def cardinality(self, path: str) -> int | None:
        found = self.field(path)
        card = found and found.get("cardinality")
        return card["distinct"] if card else None


class Context:
    """Everything the rules see: the report, the access file and the thresholds in force."""

    def __init__(
        self,
        report: dict[str, Any],
        access: AccessFile | None = None,
        thresholds: dict[str, dict[str, float]] | None = None,
    ) -> None:
        self.report = report
        self.access = access
        self.thresholds = dict(access.thresholds) if access else {}
        for code, values in (thresholds or {}).items():
            self.thresholds.setdefault(code, {}).update(values)
        every = [CollectionEvidence(c, access.collection(c["name"]) if access else None) for c in report["collections"]]
        self.by_name = {c.name: c for c in every}
        # The server's own documents (profiler, oplog) are not a design to advise on, alone or with others.
        self.collections = [c for c in every if not c.data.get("system_output")]

    def collection(self, name: str) -> CollectionEvidence | None:
        return self.by_name.get(name)

    def access_for(self, name: str) -> CollectionAccess | None:
        return self.access.collection(name) if self.access else None


class Rule:
    """A detector. Subclasses set the class attributes and implement ``check`` (per collection) and/or
    ``check_database`` (across collections). Thresholds in ``defaults`` can be overridden per run."""

    code: ClassVar[str]
    name: ClassVar[str]  # JSON name of the pattern / anti-pattern
    kind: ClassVar[str] = "pattern"
    title: ClassVar[str]
    defaults: ClassVar[dict[str, float]] = {}

    def __init__(self, context: Context) -> None:
        self.context = context
        self.settings = {**self.defaults, **context.thresholds.get(self.code, {})}

    def threshold(self, key: str) -> float:
        return self.settings[key]

    def check(self, collection: CollectionEvidence) -> Iterable[Recommendation]:
        return ()

    def check_database(self) -> Iterable[Recommendation]:
        return ()

    def finding(
        self,
        collection: str | None,
        fields: list[str],
        severity: str,
        confidence: float,
        evidence: dict[str, Any],
        rationale: str,
        tradeoffs: list[str] | None = None,
        migration: dict[str, Any] | None = None,
        title: str | None = None,
        prediction: Any = None,
    ) -> Recommendation:
        return Recommendation(
            code=self.code,
            pattern=self.name,
            kind=self.kind,
            collection=collection,
            fields=fields,
            severity=severity,
            confidence=max(0.0, min(1.0, confidence)),
            title=title or self.title,
            evidence=evidence,
            rationale=rationale,
            tradeoffs=tradeoffs or [],
            migration=migration,
            prediction=prediction,
        )
