"""validator: a collection's validator replaced (``collMod``); down gives back the options it had.

The validator is given in the file (``validator``: a query document, usually ``{$jsonSchema: ...}``) or
taken from the file ``mongopat analyze --json-schema`` wrote (``from_report``, a path relative to the
migration file; its content counts in the migration's checksum, so an edit of it is seen like an edit of
the migration). ``validation_level`` ``moderate`` checks only inserts and updates of documents that
already pass, which is what a collection whose documents are still moving needs; ``strict`` checks all.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mongopat.errors import OperationFailed
from mongopat.migrate.operations.base import DICT, STR, CollectionOperation, Param, Step, StepError, StepType

if TYPE_CHECKING:
    from mongopat.guide.cost import Evidence
    from mongopat.guide.writes import WritePlan
    from mongopat.migrate.catalog import Catalog

LEVELS = ("moderate", "strict")
ACTIONS = ("error", "warn")
# The options collMod sets; a collection without a validator has MongoDB's defaults for the other two.
VALIDATION_KEYS = ("validator", "validationLevel", "validationAction")
DEFAULTS = {"validator": {}, "validationLevel": "strict", "validationAction": "error"}


class Operation(CollectionOperation):
    type = StepType(
        "validator",
        "collection",
        {
            "validator": Param(DICT, False, help="the validator, e.g. {$jsonSchema: {...}}"),
            "from_report": Param(STR, False, help="a file written by 'mongopat analyze --json-schema'"),
            "validation_level": Param(STR, False, "moderate"),
            "validation_action": Param(STR, False, "error"),
        },
        "set the collection's validator (or give from_report: a file of 'mongopat analyze --json-schema')",
        fill_in=("validator",),
    )

    def check(self, params: dict[str, Any]) -> None:
        if bool(params.get("validator")) == bool(params.get("from_report")):
            raise StepError("validator: give 'validator' or 'from_report', not both and not neither")
        if params["validation_level"] not in LEVELS:
            raise StepError(
                f"validator: validation_level is one of {', '.join(LEVELS)}, got {params['validation_level']!r}"
            )
        if params["validation_action"] not in ACTIONS:
            raise StepError(
                f"validator: validation_action is one of {', '.join(ACTIONS)}, got {params['validation_action']!r}"
            )

    def resolve(self, step: Step, folder: Path) -> bytes:
        if not step.params.get("from_report"):
            return b""
        path = folder / step.params["from_report"]
        try:
            data = path.read_bytes()
            document = json.loads(data)
        except FileNotFoundError:
            raise StepError(f"validator: from_report {path} not found") from None
        except (OSError, ValueError) as exc:
            raise StepError(
                f"validator: from_report {path} is not a file from 'analyze --json-schema': {exc}"
            ) from None
        command = ((document.get("collections") or {}) if isinstance(document, dict) else {}).get(step.collection)
        if not isinstance(command, dict) or not isinstance(command.get("validator"), dict):
            raise StepError(f"validator: {path} holds no validator for {step.collection!r}")
        step.loaded["validator"] = command["validator"]
        return data

    def wanted(self, step: Step) -> dict[str, Any]:
        return {
            "validator": validator_of(step),
            "validationLevel": step.params["validation_level"],
            "validationAction": step.params["validation_action"],
        }

    def apply(self, step: Step, catalog: Catalog) -> None:
        current = _validation(catalog.options(step.collection))
        if "previous" not in catalog.stats:
            # Kept before collMod, once: a second run after a crash must not take this step's own as previous.
            catalog.record(previous=current)
        if current != self.wanted(step):
            catalog.set_validation(step.collection, *self.wanted(step).values())
        catalog.record(violations=catalog.violations(step.collection, validator_of(step)))

    def revert(self, step: Step, catalog: Catalog) -> None:
        if "previous" not in catalog.stats or step.collection not in catalog.names():
            return  # never applied
        current, previous = _validation(catalog.options(step.collection)), catalog.stats["previous"]
        if current == previous:
            return
        if current != self.wanted(step):
            raise OperationFailed(
                f"validator on {step.collection}: the validator was changed since up; left as it is",
                hint=f"set it back by hand (it was {json.dumps(previous, default=str)}), then run down again",
            )
        catalog.set_validation(step.collection, *previous.values())

    def verify(self, step: Step, catalog: Catalog) -> list[str]:
        if _validation(catalog.options(step.collection)) != self.wanted(step):
            return [f"{step.collection}: its validator is not the one the migration set"]
        return []

    def dry_run(self, step: Step, catalog: Catalog) -> list[str]:
        level, action = step.params["validation_level"], step.params["validation_action"]
        failing = catalog.violations(step.collection, validator_of(step))
        counted = "an unknown number of" if failing is None else f"{failing:,}"
        return [
            f"would replace the validator of {step.collection} (level {level}, action {action})",
            f"{counted} document(s) of {step.collection} fail the new validator today",
        ]

    def writes(self, step: Step, evidence: Evidence) -> list[WritePlan]:
        """The application's inserts, unchanged: proving them after the migration shows the validator
        accepts what the application writes."""
        from mongopat.guide.writes import same_insert

        per_sec = evidence.per_sec(step.collection, "inserts")
        if not per_sec:
            return []
        description = f"insert a document into {step.collection}; the validator must accept it"
        return [same_insert(step.collection, step.collection, description, per_sec)]

    def deploy(self, step: Step) -> dict[str, list[str]]:
        level, action = step.params["validation_level"], step.params["validation_action"]
        effect = "rejected" if action == "error" else "logged by the server"
        return {
            "before": [f"`{step.collection}`: every insert and update writes documents the validator accepts"],
            "during": [],
            "after": [f"`{step.collection}`: a write the validator fails is {effect} (level {level})"],
        }


def validator_of(step: Step) -> dict[str, Any]:
    """The validator the step sets: its own, or the one read from its ``from_report`` file."""
    return dict(step.params.get("validator") or step.loaded.get("validator") or {})


def _validation(options: dict[str, Any]) -> dict[str, Any]:
    """The three validation options, MongoDB's defaults where a collection has none."""
    return {key: options.get(key, DEFAULTS[key]) for key in VALIDATION_KEYS}
