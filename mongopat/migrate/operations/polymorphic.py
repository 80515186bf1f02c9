"""polymorphic: a type field set from which fields a document has."""

from __future__ import annotations

from typing import Any

from mongopat.migrate.operations.base import AddsFields
from mongopat.migrate.steps import Step
from mongopat.migrate.transforms import Document, _matches


class Operation(AddsFields):
    name = "polymorphic"

    def added(self, step: Step) -> list[str]:
        return [step.params["type_field"]]

    def pending(self, step: Step) -> dict[str, Any]:
        missing = {step.params["type_field"]: {"$exists": False}}
        if step.params["default"] is not None:
            return missing
        # Without a default, a document no rule matches is never typed: it is not pending.
        rules = []
        for rule in step.params["rules"]:
            condition = {}
            if "when_has" in rule:
                condition[rule["when_has"]] = {"$exists": True}
            if "when_missing" in rule:
                condition[rule["when_missing"]] = {"$exists": False}
            rules.append(condition)
        return {"$and": [missing, {"$or": rules}]} if rules else {"_id": {"$exists": False}}

    def is_pending(self, doc: Document, step: Step) -> bool:
        if step.params["type_field"] in doc:
            return False
        return step.params["default"] is not None or any(_matches(doc, rule) for rule in step.params["rules"])
