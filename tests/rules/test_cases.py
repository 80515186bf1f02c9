"""Rule cases as data: each file of ``tests/rules/cases/`` names a rule and lists cases (documents or a
collection's evidence, the access file's collections, thresholds) with the findings expected; the format
is ``tests.support.rule_cases``'s. Adding a rule adds a case file; these tests run them all and check that
every rule has one and every threshold of a rule is moved by some case."""

from __future__ import annotations

import pytest

from mongopat.rules import registry
from tests.support.rule_cases import disagreements, rule_cases, run_case

ALL = rule_cases()


def test_every_rule_has_cases_and_every_threshold_is_exercised():
    by_rule = {rule.code: rule for rule in registry()}
    covered = {case.rule for case in ALL}
    assert sorted(set(by_rule) - covered) == []
    moved = {(case.rule, name) for case in ALL for name in case.spec.get("thresholds") or {}}
    unknown = sorted(pair for pair in moved if pair[1] not in by_rule[pair[0]].defaults)
    assert unknown == []
    never = sorted(
        (code, name) for code, rule in by_rule.items() for name in rule.defaults if (code, name) not in moved
    )
    assert never == []


@pytest.mark.parametrize("case", ALL, ids=[case.name for case in ALL])
def test_rule_case(case, tmp_path):
    found, report = run_case(case, tmp_path)
    expected = case.spec["expect"]
    assert len(found) == len(expected), [f"{f.code} {f.collection}: {f.title}: {f.rationale}" for f in found]
    for finding, want in zip(found, expected, strict=True):
        assert not disagreements(finding, want), (disagreements(finding, want), finding.rationale)
    if "analysis" in case.spec:
        assert not disagreements(report["collections"][0], case.spec["analysis"])


def test_a_wrong_expectation_is_caught(tmp_path):
    """The runner compares what it is told to: a changed value, a missing path and a matcher all fail."""
    case = next(case for case in ALL if case.rule == "MP102" and case.spec["expect"])
    [finding], _ = run_case(case, tmp_path)
    assert disagreements(finding, case.spec["expect"][0]) == []
    assert disagreements(finding, {"evidence.length_max": 2999})
    assert disagreements(finding, {"evidence.no_such_figure": None})
    assert disagreements(finding, {"evidence.length_max": {"$lt": 3000}})
    assert disagreements(finding, {"rationale": {"$contains": ["long tail", "no such words"]}})
