"""The server's own plan for a declared read: ``explain`` of its ``find`` (filter, sort, limit) with
``executionStats``, summarised as the index model's figures (index used, keys and documents examined,
documents returned, whether the sort ran in memory).

The read's placeholders are bound to the values of documents of the collection (up to :data:`SAMPLES`,
the median figures reported), so that an equality finds what the application's would. Only the part of a
read an index serves is explained: its ``$match``, ``$sort`` and ``$limit``; joins and computed fields come
after. ``explain`` needs the ``find`` privilege on the collection, and runs the query (read-only).
Both plan formats are read: the classic ``winningPlan`` tree and the slot-based engine's (``queryPlan``,
MongoDB 7.0+).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

SAMPLES = 3


@dataclass
class PlanSummary:
    """What the server did for one read."""

    read: str
    collection: str
    index: str | None = None  # the index scanned (None: a collection scan)
    key: dict[str, Any] | None = None
    stages: list[str] = field(default_factory=list)  # the winning plan's stages, outermost first
    sort_in_memory: bool = False
    keys_examined: float = 0
    docs_examined: float = 0
    returned: float = 0
    samples: int = 0
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "read": self.read,
            "collection": self.collection,
            "index": self.index,
            "key": self.key,
            "stages": self.stages,
            "sort_in_memory": self.sort_in_memory,
            "keys_examined": self.keys_examined,
            "docs_examined": self.docs_examined,
            "returned": self.returned,
            "samples": self.samples,
            "error": self.error,
        }


def summarise(raw: dict[str, Any]) -> PlanSummary:
    """The figures of one ``explain`` answer (``read`` and ``collection`` left for the caller)."""
    planner = raw.get("queryPlanner") or {}
    winning = planner.get("winningPlan") or {}
    winning = winning.get("queryPlan", winning)  # the slot-based engine nests the tree one level down
    summary = PlanSummary(read="", collection="")
    node: dict[str, Any] | None = winning
    while node:
        stage = str(node.get("stage", "?"))
        summary.stages.append(stage)
        if stage in ("IXSCAN", "TEXT_MATCH", "TEXT", "GEO_NEAR_2DSPHERE", "COUNT_SCAN", "DISTINCT_SCAN"):
            summary.index = summary.index or node.get("indexName")
            summary.key = summary.key or node.get("keyPattern")
        if stage == "SORT":
            summary.sort_in_memory = True
        inputs = node.get("inputStages")
        node = node.get("inputStage") or (inputs[0] if inputs else None)
    stats = raw.get("executionStats") or {}
    summary.keys_examined = stats.get("totalKeysExamined", 0)
    summary.docs_examined = stats.get("totalDocsExamined", 0)
    summary.returned = stats.get("nReturned", 0)
    return summary


def explain_find(
    db: Any,
    collection: str,
    filter_: dict[str, Any],
    sort: dict[str, int] | None = None,
    limit: int | None = None,
    verbosity: str = "executionStats",
) -> dict[str, Any]:
    command: dict[str, Any] = {"find": collection, "filter": filter_}
    if sort:
        command["sort"] = sort
    if limit:
        command["limit"] = limit
    return db.command({"explain": command, "verbosity": verbosity})


def explain_plan(db: Any, plan: Any, samples: int = SAMPLES, verbosity: str = "executionStats") -> PlanSummary:
    """Explain a guide's read (:class:`mongopat.guide.reads.ReadPlan`) with values from the collection's
    own documents; the median of ``samples`` explains. ``queryPlanner`` plans the read without running it
    (what a production server is asked): the figures examined stay 0."""
    from mongopat.guide.placeholders import UnboundParameter, bind
    from mongopat.guide.proof import UNBOUND, binding_filter, read_values

    sort_stage = next((stage for stage in plan.stages if stage.kind == "sort"), None)
    limit_stage = next((stage for stage in plan.stages if stage.kind == "limit"), None)
    sort = sort_stage.stages[0]["$sort"] if sort_stage is not None else None
    limit = limit_stage.spec if limit_stage is not None else None
    name = plan.query.name
    try:
        documents = list(db[plan.collection].find(binding_filter(plan)).limit(samples))
    except Exception as exc:  # noqa: BLE001 - reported per read, never fatal
        return PlanSummary(name, plan.collection, error=f"cannot read documents to bind values: {exc}")
    found: list[PlanSummary] = []
    problem = "no document holds a value for every parameter of the read"
    for document in documents:
        values = read_values(plan, document)
        if values is None or any(value is UNBOUND for value in values.values()):
            continue
        try:
            filter_ = bind(plan.match, values)
        except (UnboundParameter, KeyError, TypeError) as exc:
            problem = f"cannot bind the read's values: {exc}"
            continue
        try:
            summary = summarise(explain_find(db, plan.collection, filter_, sort, limit, verbosity))
        except Exception as exc:  # noqa: BLE001 - a server without explain (or a refusal) is reported
            return PlanSummary(name, plan.collection, error=f"explain failed: {str(exc).splitlines()[0][:200]}")
        found.append(summary)
    if not found:
        return PlanSummary(name, plan.collection, error=problem)
    middle = found[len(found) // 2]
    middle.read, middle.collection, middle.samples = name, plan.collection, len(found)
    middle.keys_examined = statistics.median(s.keys_examined for s in found)
    middle.docs_examined = statistics.median(s.docs_examined for s in found)
    middle.returned = statistics.median(s.returned for s in found)
    return middle


def compare(summary: PlanSummary, expected_index: str | None, expected_key: dict[str, Any] | None) -> str | None:
    """Where the server's plan departs from the advice: another index, or a scan where an index was
    expected. None when they agree."""
    if summary.error:
        return summary.error
    if expected_key is None:
        return None
    if summary.key is not None and list(summary.key.items()) == list(expected_key.items()):
        return None
    if summary.index is not None and summary.index == expected_index:
        return None
    used = f"index {summary.index}" if summary.index else "a collection scan"
    return f"the server planned {used}; mongopat expected {expected_index or expected_key}"


def plans_today(db: Any, findings: list[Any], access: Any) -> None:
    """For each missing-index finding (MP210), how the server plans each of its reads today (``explain``
    with ``queryPlanner``: planned, never run), in ``evidence.reads[].server_plan``; where the server uses an
    index the model found none for, the rationale says so (the index list analysed may be stale)."""
    from mongopat.access.model import Query
    from mongopat.guide.reads import today_read

    for finding in findings:
        if finding.code != "MP210":
            continue
        for read in finding.evidence.get("reads", []):
            joined = read.get("joined_from")
            if joined:
                query = Query(read["read"], filter={finding.fields[0]: "eq"})
            else:
                spec = access.collection(finding.collection)
                query = next((q for q in spec.queries if q.name == read["read"]), None) if spec else None
            if query is None:
                continue
            summary = explain_plan(db, today_read(finding.collection, query), samples=1, verbosity="queryPlanner")
            read["server_plan"] = {
                k: summary.to_dict()[k] for k in ("index", "key", "stages", "sort_in_memory", "error")
            }
            expected = (read.get("before") or {}).get("index")
            if summary.error is None and summary.index and summary.index != expected:
                finding.rationale += (
                    f" The server plans {read['read']} with index {summary.index} today, which the analysed index"
                    " list did not hold or the model did not choose: analyse again, or check the index."
                )
