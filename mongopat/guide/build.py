"""The guide of a list of migrations: each read of the access file before and after, each write, the
indexes the new reads need and the order of deploys.

Migrations are taken in order, each one's "after" the next one's "before": the guide of the third pending
migration starts from the reads as the first two leave them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mongopat.access.model import AccessFile
from mongopat.guide.cost import Evidence, rounded
from mongopat.guide.placeholders import names
from mongopat.guide.reads import ReadPlan, today_read
from mongopat.guide.writes import WritePlan
from mongopat.migrate.operations import STEP_OPERATIONS
from mongopat.migrate.script import Migration

PHASES = ("before", "during", "after")


@dataclass
class ReadGuide:
    name: str
    before: ReadPlan
    after: ReadPlan
    examined: dict[str, float | None]
    basis: str
    # The read while up runs, for documents of both shapes (None when there is none: a migration of several
    # steps, a collection renamed at once).
    during: ReadPlan | None = None

    @property
    def changed(self) -> bool:
        return self.before.pipeline() != self.after.pipeline() or not self.after.keeps_indexes


@dataclass
class MigrationGuide:
    migration: Migration
    reads: list[ReadGuide] = field(default_factory=list)
    writes: list[WritePlan] = field(default_factory=list)
    indexes: list[dict[str, Any]] = field(default_factory=list)
    deploy: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def build_guides(
    migrations: list[Migration], access: AccessFile, report: dict[str, Any] | None
) -> list[MigrationGuide]:
    evidence = Evidence(access, report)
    plans = [today_read(name, query) for name, spec in access.collections.items() for query in spec.queries]
    for migration in migrations:
        for step in migration.steps:
            for plan in plans:
                STEP_OPERATIONS[step.name].today_read(plan, step)
    created: list[tuple[str, dict[str, int]]] = []
    guides = []
    for migration in migrations:
        guide = MigrationGuide(migration)
        guides.append(guide)
        if migration.python is not None:
            guide.notes.append("a Python migration: mongopat cannot tell what it changes; review its code")
            continue
        touched = set(migration.collections)
        for index, plan in enumerate(plans):
            joined = {stage.spec.source for stage in plan.stages if stage.kind in ("lookup", "aggregate")} & touched
            if plan.collection not in touched and not joined:
                continue
            before = plan.copy()
            after = plan.copy()
            after.notes, after.differs = [], set()
            for step in migration.steps:
                STEP_OPERATIONS[step.name].rewrite_read(after, step, evidence)
            after.tidy()
            renamed = {s.collection for s in migration.steps if STEP_OPERATIONS[s.name].renames_collection}
            for name in sorted(joined - renamed - {plan.collection}):
                after.notes.append(f"joins {name}, which this migration changes: check the joined fields by hand")
            plans[index] = after
            during = None
            if len(migration.steps) == 1:
                [step] = migration.steps
                during = STEP_OPERATIONS[step.name].during_read(before, after, step)
                if during is not None:
                    during.tidy()
                    during.differs |= after.differs  # what the step changes on purpose, it changes meanwhile too
                    during.joined |= after.joined
            cost_before, basis = examined(before, evidence)
            cost_after, _ = examined(after, evidence)
            costs = {"before": cost_before, "after": cost_after}
            guide.reads.append(ReadGuide(plan.query.name, before, after, costs, basis, during))
        for step in migration.steps:
            operation = STEP_OPERATIONS[step.name]
            guide.writes.extend(operation.writes(step, evidence))
            created.extend(operation.indexes(step))
            for phase, items in operation.deploy(step).items():
                guide.deploy.setdefault(phase, []).extend(items)
        guide.deploy = {phase: list(dict.fromkeys(guide.deploy.get(phase, []))) for phase in PHASES}
        guide.indexes = needed_indexes(guide.reads, created, evidence)
    return guides


def examined(plan: ReadPlan, evidence: Evidence) -> tuple[float | None, str]:
    """Documents a read examines: those its filter matches (scaled for the new shape), plus joined ones."""
    query = plan.query
    matched, basis = evidence.matched(plan.counted_as or plan.collection, query.filter, query.limit, bool(query.sort))
    if matched is None:
        return None, basis
    total = matched * plan.scale + (plan.overlap if matched else 0) + matched * plan.extra
    for stage in plan.stages:
        if stage.kind == "lookup":
            total += matched
        elif stage.kind == "aggregate":
            total += matched * (evidence.per_key(stage.spec.source, stage.spec.foreign) or 1)
        elif stage.kind == "subtree":
            total += evidence.count(plan.collection) or 0
    return rounded(total), basis


def index_keys(plan: ReadPlan, evidence: Evidence | None = None) -> dict[str, Any]:
    """The index that serves a read's match and sort (:func:`mongopat.indexes.planner.advise`)."""
    from mongopat.indexes.planner import advise
    from mongopat.indexes.selectivity import Selectivity
    from mongopat.indexes.shape import from_match

    sort = plan.stages[0] if plan.stages and plan.stages[0].kind == "sort" else None
    shape = from_match(plan.query.name, plan.collection, plan.match, sort.stages[0]["$sort"] if sort else None)
    collection = evidence.collections.get(plan.collection) if evidence is not None else None
    key, _notes = advise(shape, Selectivity(collection))
    return dict(key)


def _serves(existing: list[str], wanted: list[str]) -> bool:
    """An index serves a read when one key list starts with the other (the rest filtered in the index)."""
    return existing[: len(wanted)] == wanted or (len(existing) >= 2 and wanted[: len(existing)] == existing)


def needed_indexes(
    reads: list[ReadGuide], created: list[tuple[str, dict[str, int]]], evidence: Evidence
) -> list[dict[str, Any]]:
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for read in reads:
        if not read.changed:
            continue
        keys = index_keys(read.after, evidence)
        if not keys or list(keys) == ["_id"]:
            continue
        collection = read.after.collection
        wanted = list(keys)
        if any(_serves(list(k), wanted) for c, k in created if c == collection):
            status = "created by the migrations"
        elif any(_serves(names, wanted) for names in evidence.indexes(collection)):
            status = "exists"
        else:
            status = "to add"
        entry = found.setdefault(
            (collection, repr(keys)), {"collection": collection, "keys": keys, "status": status, "reads": []}
        )
        entry["reads"].append(read.name)
    return list(found.values())


def parameters(plan: ReadPlan) -> list[dict[str, Any]]:
    pipeline = plan.pipeline()
    listed = []
    for name in names(pipeline):
        op = plan.query.filter.get(name)
        listed.append({"name": name, "field": plan.sources.get(name, name), "range": op == "range"})
    return listed


def recommendation_guide(
    code: str, title: str, spec: dict[str, Any], access: AccessFile, report: dict[str, Any] | None
) -> MigrationGuide:
    """The guide of the one-step migration a recommendation carries (for the HTML report)."""
    from pathlib import Path

    from mongopat.migrate.steps import build_step

    migration = Migration(code, Path(f"{code}.yaml"), title, "", [build_step(spec)])
    return build_guides([migration], access, report)[0]
