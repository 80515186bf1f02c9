"""polymorphic: a type field set from which fields a document has."""

from __future__ import annotations

from typing import Any

from mongopat.migrate.operations.base import (
    ANY,
    LIST,
    STR,
    AddsFields,
    Param,
    Step,
    StepType,
    check_rules,
    first_rule,
    rule_condition,
    rule_paths,
)
from mongopat.migrate.operations.server_paths import holds, plain, set_stages
from mongopat.migrate.transform_api import Context, Document, Result, has_path, heads, matches_rule, set_path


class Operation(AddsFields):
    plan_order = 1
    type = StepType(
        "polymorphic",
        "document",
        {"type_field": Param(STR, False, "type"), "rules": Param(LIST), "default": Param(ANY, False)},
        "set a type field from which fields a document has (polymorphic pattern)",
    )

    def new_shape(self, step: Step) -> str:
        p = step.params
        return f"`{p['type_field']}` set by the rules of the step (default {p.get('default')!r})"

    def deploy(self, step: Step) -> dict[str, list[str]]:
        field = step.params["type_field"]
        return {
            "before": [f"`{step.collection}`: inserts set `{field}`"],
            "during": [f"`{step.collection}`: a document without `{field}` has its type told by its fields"],
            "after": [f"`{step.collection}`: branch on `{field}`"],
        }

    def transform(self, doc: Document, step: Step, ctx: Context) -> Result:
        target = step.params["type_field"]
        if not has_path(doc, target):
            for rule in step.params["rules"]:
                if matches_rule(doc, rule):
                    set_path(doc, target, rule["type"])
                    break
            else:
                if step.params["default"] is not None:
                    set_path(doc, target, step.params["default"])
        return Result(doc)

    def server_stages(self, step: Step) -> list[dict[str, Any]] | None:
        p = step.params
        if not plain(p["type_field"], *rule_paths(p)):
            return None
        # No rule matched and no default: the field is not set ($$REMOVE), as the transform leaves it (only
        # a nested field's pending documents are given, each matching a rule: no level is made for none).
        default = "$$REMOVE" if p["default"] is None else {"$literal": p["default"]}
        return set_stages(p["type_field"], first_rule(p["rules"], "type", default))

    def check(self, params: dict[str, Any]) -> None:
        check_rules(self.type.name, params)

    changes_only_what_it_writes = True

    def read_fields(self, step: Step) -> frozenset[str] | None:
        return heads(step.params["type_field"], *rule_paths(step.params))

    def written_fields(self, step: Step) -> set[str]:
        p = step.params
        return {p["type_field"]}

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

    def server_pending(self, step: Step) -> Any:
        p = step.params
        nested = any("." in path for path in rule_paths(p))
        if "." not in p["type_field"] and (p["default"] is not None or not nested):
            return None
        missing = {"$not": [holds(p["type_field"])]}
        if p["default"] is not None:
            return missing
        return {"$and": [missing, {"$or": [rule_condition(r) for r in p["rules"]]} if p["rules"] else False]}

    def is_pending(self, doc: Document, step: Step) -> bool:
        if has_path(doc, step.params["type_field"]):
            return False
        return step.params["default"] is not None or any(matches_rule(doc, rule) for rule in step.params["rules"])
