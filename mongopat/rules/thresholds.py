"""The ``thresholds:`` section of an access-pattern file or a check configuration: per rule (code or
name), values for the thresholds that rule declares."""

from __future__ import annotations

import difflib

import yaml

from mongopat.yamlfile import YamlValidator


def parse_thresholds(check: YamlValidator, node: yaml.Node) -> dict[str, dict[str, float]]:
    from mongopat.rules import registry  # late: the rule modules are loaded on first use only

    known = {rule.code: rule for rule in registry()} | {rule.name: rule for rule in registry()}
    out: dict[str, dict[str, float]] = {}
    for rule_key, rule_node in (check.free_mapping(node, "thresholds") or {}).items():
        rule = known.get(rule_key)
        if rule is None:
            close = difflib.get_close_matches(rule_key, sorted(known), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            check.error(rule_node, f"thresholds.{rule_key}", f"unknown rule{hint}")
            continue
        values = check.mapping(rule_node, f"thresholds.{rule_key}", rule.defaults) or {}
        out[rule.code] = {}
        for key, value_node in values.items():
            number = check.number(value_node, f"thresholds.{rule_key}.{key}")
            if number is not None:
                out[rule.code][key] = number
    return out
