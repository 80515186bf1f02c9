"""schema_versioning: a schema version stamped on every document."""

from __future__ import annotations

from typing import Any

from mongopat.migrate.operations.base import (
    INT,
    LIST,
    STR,
    AddsFields,
    Param,
    Step,
    StepType,
    check_rules,
    first_rule,
    rule_paths,
)
from mongopat.migrate.operations.server_paths import plain, set_stages
from mongopat.migrate.transform_api import Context, Document, Result, has_path, heads, matches_rule, set_path


class Operation(AddsFields):
    plan_order = 1
    type = StepType(
        "schema_versioning",
        "document",
        {
            "field": Param(STR, False, "schemaVersion"),
            "default_version": Param(INT, False, 1),
            "rules": Param(LIST, False, []),
        },
        "stamp a schema version on every document (schema versioning pattern)",
    )

    def new_shape(self, step: Step) -> str:
        p = step.params
        return f"`{p['field']}` = the schema version the application writes (the step stamps {p['default_version']})"

    def deploy(self, step: Step) -> dict[str, list[str]]:
        field = step.params["field"]
        return {
            "before": [f"`{step.collection}`: inserts set `{field}`; reads handle every version in use"],
            "during": [
                f"`{step.collection}`: a document without `{field}` is version {step.params['default_version']}"
            ],
            "after": [],
        }

    def transform(self, doc: Document, step: Step, ctx: Context) -> Result:
        target = step.params["field"]
        if not has_path(doc, target):
            version = step.params["default_version"]
            for rule in step.params["rules"]:
                if matches_rule(doc, rule):
                    version = rule["version"]
                    break
            set_path(doc, target, version)
        return Result(doc)

    def server_stages(self, step: Step) -> list[dict[str, Any]] | None:
        p = step.params
        if not plain(p["field"], *rule_paths(p)):
            return None
        return set_stages(p["field"], first_rule(p["rules"], "version", {"$literal": p["default_version"]}))

    def check(self, params: dict[str, Any]) -> None:
        check_rules(self.type.name, params)

    changes_only_what_it_writes = True

    def read_fields(self, step: Step) -> frozenset[str] | None:
        return heads(step.params["field"], *rule_paths(step.params))

    def written_fields(self, step: Step) -> set[str]:
        p = step.params
        return {p["field"]}

    def added(self, step: Step) -> list[str]:
        return [step.params["field"]]
