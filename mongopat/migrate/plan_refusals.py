"""Plan-time refusals: steps a deployment would reject or that would corrupt it are refused with a reason.

Checked against what the target says about a collection (``collection_info``): its shard key (a step that
changes a shard-key field, renames a sharded collection, or groups readings into buckets that cannot carry
its shard key, is refused: MongoDB does not allow renaming sharded collections, changing shard-key values
moves documents between shards, and an upsert must name the whole shard key) and its
``$jsonSchema`` validator (a step that removes a required field, adds fields a closed schema does not
allow, or reshapes the documents is refused).
"""

from __future__ import annotations

from typing import Any

from mongopat.migrate.operations import STEP_OPERATIONS
from mongopat.migrate.steps import Step


def written_fields(step: Step) -> set[str]:
    """Top-level fields a step sets, renames or removes (empty for index and collection steps)."""
    return {str(f).split(".")[0] for f in STEP_OPERATIONS[step.name].written_fields(step) if f}


def removed_fields(step: Step) -> set[str]:
    return {str(f).split(".")[0] for f in STEP_OPERATIONS[step.name].removed_fields(step) if f}


def refusals(step: Step, info: dict[str, Any]) -> list[str]:
    """Why ``step`` must not run on this collection (empty: it may)."""
    reasons = []
    shard_key = info.get("shard_key") or {}
    if shard_key:
        key_fields = {name.split(".")[0] for name in shard_key}
        if STEP_OPERATIONS[step.name].renames_collection:
            reasons.append(
                f"{step.collection} is sharded on {dict(shard_key)}: {step.name} would rename a sharded collection"
            )
        changed = written_fields(step) & key_fields
        if changed:
            reasons.append(f"{step.name} writes {', '.join(sorted(changed))}, part of the shard key {dict(shard_key)}")
    schema = (info.get("validator") or {}).get("$jsonSchema")
    if schema:
        required = set(schema.get("required") or [])
        lost = removed_fields(step) & required
        if lost:
            reasons.append(
                f"{step.name} removes {', '.join(sorted(lost))}, required by the collection's $jsonSchema validator"
            )
        if schema.get("additionalProperties") is False:
            allowed = set((schema.get("properties") or {}).keys())
            extra = written_fields(step) - allowed - removed_fields(step)
            if extra:
                reasons.append(
                    f"{step.name} adds {', '.join(sorted(extra))}, "
                    "not allowed by the validator (additionalProperties: false)"
                )
    reasons.extend(STEP_OPERATIONS[step.name].plan_refusals(step, shard_key, schema))
    return reasons
