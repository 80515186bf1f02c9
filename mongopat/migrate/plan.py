"""From recommendations to migration files: the ``migration`` spec of each recommendation becomes a file."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mongopat.errors import InputError
from mongopat.json_schema import validator_problem
from mongopat.migrate.operations import STEP_OPERATIONS
from mongopat.migrate.plan_refusals import refusals
from mongopat.migrate.script import load_folder, next_number, render, slug
from mongopat.migrate.steps import Step, StepError, build_step
from mongopat.validators import analysed, collection_schema


@dataclass
class PlannedFile:
    path: Path
    code: str
    collection: str | None
    description: str


def read_recommendations_file(path: str | Path) -> dict[str, Any]:
    """The whole file 'mongopat recommend --format json' wrote (its recommendations, access file and
    source), checked to hold a list of recommendations."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"recommendations file not found: {path}") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not a JSON file from 'mongopat recommend --format json': {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("recommendations"), list):
        raise InputError(f"{path}: no 'recommendations' list (write it with mongopat recommend --format json)")
    return data


def plan(
    recommendations: list[dict[str, Any]],
    folder: Path,
    only: list[str] | None = None,
    dry_run: bool = False,
    collection_info: Callable[[str], dict[str, Any]] | None = None,
    refused: list[str] | None = None,
    after: Callable[[Step], list[dict[str, Any]]] | None = None,
    add_validators: bool = False,
    warnings: list[str] | None = None,
) -> tuple[list[PlannedFile], list[str]]:
    """Write one migration per recommendation that carries a migration; skip ones already planned.

    ``only`` filters by rule code, pattern name or collection. Returns the files and notes on what was
    skipped and why. With ``after`` (a sample of a collection as a step would leave it, from the target),
    a step that would leave sampled documents failing the collection's current validator is reported in
    ``warnings``, and ``add_validators`` ends each shape change with a ``validator`` step describing the
    new shape (see :func:`validator_after`).
    """
    existing = load_folder(folder)
    planned_steps = {json.dumps(step.to_dict(), sort_keys=True, default=str) for m in existing for step in m.steps}
    number = next_number(existing)
    files, notes = [], []
    # Steps that add or reshape fields run before those that cut arrays (a total computed over the items
    # must see all of them), regrouping last, index changes after that.
    ordered = sorted(recommendations, key=_plan_order)
    chosen = [
        rec for rec in ordered
        if not only or {rec.get("code"), rec.get("pattern"), rec.get("collection")} & set(only)
    ]  # fmt: skip
    planned = {(rec.get("code"), rec.get("collection")) for rec in chosen if rec.get("migration")}
    for rec in chosen:
        superseded = [
            c for c in (rec.get("evidence") or {}).get("superseded_by") or [] if (c, rec.get("collection")) in planned
        ]
        if superseded:
            notes.append(
                f"{rec.get('code')} on {rec.get('collection')}: not planned ({', '.join(superseded)} is planned: it "
                "rewrites the same reads and creates the index they need)"
            )
            continue
        spec = rec.get("migration")
        if not spec:
            notes.append(f"{rec.get('code')} {rec.get('pattern')} on {rec.get('collection')}: no automatic migration")
            continue
        try:
            step = build_step(spec)
        except StepError as exc:
            notes.append(f"{rec.get('code')} on {rec.get('collection')}: not planned ({exc})")
            continue
        info = collection_info(step.collection) if collection_info is not None else {}
        if collection_info is not None:
            reasons = refusals(step, info)
            if reasons:
                message = f"{rec.get('code')} {step.name} on {step.collection}: refused: {'; '.join(reasons)}"
                notes.append(message)
                if refused is not None:
                    refused.append(message)
                continue
        key = json.dumps(step.to_dict(), sort_keys=True, default=str)
        if key in planned_steps:
            notes.append(f"{rec.get('code')} on {step.collection}: already planned")
            continue
        planned_steps.add(key)
        steps = [step.to_dict()]
        for spec in rec.get("index_steps") or []:  # the indexes the reads it rewrites need
            try:
                steps.append(build_step(spec).to_dict())
            except StepError as exc:
                notes.append(f"{rec.get('code')} on {step.collection}: index step not planned ({exc})")
        sample = after(step) if after is not None else []  # empty for steps that leave no documents to sample
        if info.get("validator") and sample and warnings is not None:
            warnings.extend(violation_warnings(rec, step, info["validator"], sample))
        if add_validators:
            added, note = validator_after(step, info, sample)
            steps.extend(added)
            if note:
                notes.append(f"{rec.get('code')} on {step.collection}: {note}")
        migration_id = f"{number:04d}_{slug(step.name + '_' + step.collection)}"
        number += 1
        header = (
            f"Planned by mongopat from {rec.get('code')} ({rec.get('pattern')}) on {step.collection}, "
            f"confidence {rec.get('confidence')}.\n{rec.get('rationale', '')}\nReview, then run: mongopat migrate up"
        )
        path = folder / f"{migration_id}.yaml"
        if not dry_run:
            folder.mkdir(parents=True, exist_ok=True)
            path.write_text(
                render(migration_id, rec.get("title") or step.type.summary, steps, header, rec.get("prediction")),
                encoding="utf-8",
            )
        files.append(PlannedFile(path, str(rec.get("code")), step.collection, rec.get("title") or ""))
    return files, notes


def violation_warnings(
    rec: dict[str, Any], step: Step, validator: dict[str, Any], sample: list[dict[str, Any]]
) -> list[str]:
    """A warning when documents of ``sample`` (as the step leaves them) fail the collection's validator."""
    failing, first, unknown = 0, "", ""
    for document in sample:
        try:
            problem = validator_problem(document, validator)
        except NotImplementedError as exc:
            unknown = str(exc)
            break
        if problem:
            failing += 1
            first = first or f"{document.get('_id')!r}: {problem}"
    where = f"{rec.get('code')} {step.name} on {step.collection}"
    if unknown:
        return [f"{where}: the collection's validator could not be checked here ({unknown})"]
    if not failing:
        return []
    return [
        f"{where}: {failing} of {len(sample)} sampled document(s) would fail the collection's validator after "
        f"the step (first: {first}); a later update of such a document is rejected or logged, as its "
        "validationAction says"
    ]


def validator_after(
    step: Step, info: dict[str, Any], sample: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], str | None]:
    """A ``validator`` step describing the shape ``step`` leaves (from ``sample``), at level ``moderate``
    and action ``warn``: while the application moves to the new shape, a write of the old one is logged,
    not rejected, and documents not yet valid can still be updated. A later migration makes it strict."""
    if not STEP_OPERATIONS[step.name].sampled_after:
        return [], None
    if info.get("validator"):
        return [], "has a validator already: no validator planned (it would replace the one in place)"
    if not sample:
        return [], "no documents sampled: no validator planned"
    schema = collection_schema(analysed(step.collection, sample), exact_ints=True)
    return [
        {
            "step": "validator",
            "collection": step.collection,
            "validator": {"$jsonSchema": schema},
            "validation_level": "moderate",
            "validation_action": "warn",
        }
    ], None


def _plan_order(recommendation: dict[str, Any]) -> int:
    name = (recommendation.get("migration") or {}).get("step")
    operation = STEP_OPERATIONS.get(name) if isinstance(name, str) else None
    return operation.plan_order if operation is not None else 9
