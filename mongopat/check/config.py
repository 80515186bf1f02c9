"""The check configuration: thresholds, declared document rules, waivers and snapshot tolerances.

It comes from ``mongopat.yaml`` (``--config``) and/or the ``check:`` section of the access-pattern file;
both have the same shape, validated with file, line and column in every message.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from dataclasses import field as default
from pathlib import Path

import yaml

from mongopat.bsontypes import TYPE_NAMES
from mongopat.project import CHECK_KEYS, PROJECT_KEYS
from mongopat.rules.thresholds import parse_thresholds
from mongopat.yamlfile import YamlFileError, YamlValidator, compose_yaml, read_yaml_text, reject_foreign_tags

SEVERITIES = ("info", "warning", "error")
KNOWN_TYPES = sorted(set(TYPE_NAMES.values()) | {"int", "long"})
CONFIG_KEYS = ("version", *CHECK_KEYS)
RULE_KEYS = (
    "id",
    "collection",
    "field",
    "required",
    "types",
    "max_length",
    "max_document_bytes",
    "severity",
    "description",
)


@dataclass
class DocumentRule:
    id: str
    collection: str  # "*" for every collection
    field: str | None = None
    required: bool = False
    types: list[str] = default(default_factory=list)
    max_length: int | None = None
    max_document_bytes: int | None = None
    severity: str = "error"
    description: str = ""


@dataclass
class Waiver:
    id: str
    reason: str
    expires: datetime.date
    collection: str | None = None
    field: str | None = None
    where: str = ""

    def matches(self, finding_id: str, collection: str | None, field_name: str | None) -> bool:
        return (
            self.id == finding_id
            and (self.collection is None or self.collection == collection)
            and (self.field is None or self.field == field_name)
        )


@dataclass
class CheckConfig:
    thresholds: dict[str, dict[str, float]] = default(default_factory=dict)
    rules: list[DocumentRule] = default(default_factory=list)
    waivers: list[Waiver] = default(default_factory=list)
    presence_tolerance: float = 0.2
    length_factor: float = 2.0
    sources: list[str] = default(default_factory=list)

    def merge(self, other: CheckConfig) -> None:
        for code, values in other.thresholds.items():
            self.thresholds.setdefault(code, {}).update(values)
        self.rules.extend(other.rules)
        self.waivers.extend(other.waivers)
        self.presence_tolerance = other.presence_tolerance
        self.length_factor = other.length_factor
        self.sources.extend(other.sources)


def parse_section(check: YamlValidator, node: yaml.Node, path: str, allow_version: bool) -> CheckConfig:
    # mongopat.yaml also names the project's source, migrations and access file (mongopat.project).
    keys = (*CONFIG_KEYS, *PROJECT_KEYS) if allow_version else CONFIG_KEYS[1:]
    found = check.mapping(node, path, keys) or {}
    config = CheckConfig(sources=[check.file])
    if "version" in found and check.value(found["version"]) != 1:
        check.error(found["version"], f"{path}.version", "unsupported version (this mongopat reads version 1)")
    if "thresholds" in found:
        config.thresholds = parse_thresholds(check, found["thresholds"])
    if "rules" in found:
        config.rules = check.items(found["rules"], f"{path}.rules", "rules", _rule, ("id", "rule id"))
    if "waivers" in found:
        config.waivers = check.items(found["waivers"], f"{path}.waivers", "waivers", _waiver)
    if "snapshot" in found:
        tolerances = check.mapping(found["snapshot"], f"{path}.snapshot", ("presence_tolerance", "length_factor")) or {}
        if "presence_tolerance" in tolerances:
            value = check.number(tolerances["presence_tolerance"], f"{path}.snapshot.presence_tolerance")
            if value is not None:
                config.presence_tolerance = value
        if "length_factor" in tolerances:
            value = check.number(tolerances["length_factor"], f"{path}.snapshot.length_factor")
            if value is not None:
                config.length_factor = value
    return config


def _rule(check: YamlValidator, node: yaml.Node, path: str) -> DocumentRule | None:
    found = check.mapping(node, path, RULE_KEYS, ("id", "collection"))
    if not found or "id" not in found or "collection" not in found:
        return None
    rule_id, collection = (
        check.string(found["id"], f"{path}.id"),
        check.string(found["collection"], f"{path}.collection"),
    )
    if rule_id is None or collection is None:
        return None
    rule = DocumentRule(rule_id, collection)
    if "field" in found:
        rule.field = check.string(found["field"], f"{path}.field")
    if "required" in found:
        rule.required = bool(check.boolean(found["required"], f"{path}.required"))
    if "types" in found:
        rule.types = check.strings(found["types"], f"{path}.types")
        unknown = [t for t in rule.types if t not in KNOWN_TYPES]
        if unknown:
            check.error(
                found["types"],
                f"{path}.types",
                f"unknown BSON type {', '.join(unknown)} (known: {', '.join(KNOWN_TYPES)})",
            )
    if "max_length" in found:
        rule.max_length = check.integer(found["max_length"], f"{path}.max_length")
    if "max_document_bytes" in found:
        rule.max_document_bytes = check.integer(found["max_document_bytes"], f"{path}.max_document_bytes", minimum=1)
    if "severity" in found:
        severity = check.value(found["severity"])
        if severity not in SEVERITIES:
            check.error(found["severity"], f"{path}.severity", f"one of {', '.join(SEVERITIES)}")
        else:
            rule.severity = severity
    if "description" in found:
        rule.description = check.string(found["description"], f"{path}.description") or ""
    needs_field = rule.required or rule.types or rule.max_length is not None
    if needs_field and not rule.field:
        check.error(node, path, "required, types and max_length need a 'field'")
    if not (needs_field or rule.max_document_bytes):
        check.error(node, path, "a rule needs one of required, types, max_length, max_document_bytes")
    return rule


def _waiver(check: YamlValidator, node: yaml.Node, path: str) -> Waiver | None:
    found = check.mapping(node, path, ("id", "collection", "field", "reason", "expires"), ("id", "reason", "expires"))
    if not found or not {"id", "reason", "expires"} <= set(found):
        return None
    waiver_id = check.string(found["id"], f"{path}.id")
    reason = check.string(found["reason"], f"{path}.reason")
    expires = check.value(found["expires"])
    if isinstance(expires, datetime.datetime):
        expires = expires.date()
    if not isinstance(expires, datetime.date):
        check.error(found["expires"], f"{path}.expires", "expected a date (YYYY-MM-DD)")
        return None
    if waiver_id is None or reason is None:
        return None
    collection = check.string(found["collection"], f"{path}.collection") if "collection" in found else None
    field_name = check.string(found["field"], f"{path}.field") if "field" in found else None
    return Waiver(waiver_id, reason, expires, collection, field_name, str(check.where(node)))


def load_config(path: str | Path) -> CheckConfig:
    file = str(path)
    text = read_yaml_text(path, "config file")
    root = compose_yaml(text, file)
    if root is None:
        return CheckConfig(sources=[file])
    check = YamlValidator(file)
    reject_foreign_tags(check, root)
    config = parse_section(check, root, "(top)", allow_version=True) if not check.problems else CheckConfig()
    if check.problems:
        raise YamlFileError(check.problems)
    return config


def check_section_of_access_file(path: str | Path) -> CheckConfig | None:
    """The ``check:`` section of an access-pattern file, if it has one."""
    text = read_yaml_text(path, "access-pattern file")
    root = compose_yaml(text, str(path))
    if not isinstance(root, yaml.MappingNode):
        return None
    for key, value in root.value:
        if getattr(key, "value", None) == "check":
            check = YamlValidator(str(path))
            config = parse_section(check, value, "check", allow_version=False)
            if check.problems:
                raise YamlFileError(check.problems)
            return config
    return None
