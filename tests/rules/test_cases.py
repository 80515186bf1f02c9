"""Rule cases as data: each file of ``tests/rules/cases/`` names a rule and lists cases (a collection's
evidence in a compact form, the access file's collections, thresholds) with the findings expected. Adding
a rule adds a case file; this one test runs them all."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from mongopat.access import parse_access_text
from mongopat.rules import Context, run_rules
from tests.support.paths import RULE_CASES


def _cases() -> list[tuple[str, str, dict[str, Any]]]:
    found = []
    for path in sorted(RULE_CASES.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        found.extend((data["rule"], f"{path.stem}: {case['name']}", case) for case in data["cases"])
    return found


ALL = _cases()


def test_every_case_file_was_read():
    assert len({rule for rule, _, _ in ALL}) >= 3 and len(ALL) >= 30


def collection_data(spec: dict[str, Any]) -> dict[str, Any]:
    """A report's collection from the compact form: ``fields`` of ``{distinct, unique, array, string, top,
    presence}`` or ``{date, span_hours, presence}`` (``top``: ``[[value, count]...]``, the most common
    values); ``indexes`` as the report lists them, ``ops`` standing for ``$indexStats`` usage;
    ``indexes_count`` adds plain indexes up to that many; ``median_bytes`` the documents' size."""
    fields, time = [], []
    for path, field in (spec.get("fields") or {}).items():
        entry: dict[str, Any] = {
            "path": path, "depth": path.count(".") + 1, "cardinality": None, "presence": field.get("presence", 1.0),
        }  # fmt: skip
        if field.get("date"):
            entry["types"] = [{"type": "date", "share": 1.0}]
            time.append({"field": path, "span_seconds": field["span_hours"] * 3600})
        else:
            kind = "array" if field.get("array") else "string" if field.get("string") else "int"
            entry["types"] = [{"type": kind, "share": 1.0}]
            entry["cardinality"] = {
                "distinct": field["distinct"], "all_distinct": bool(field.get("unique")), "values": spec["count"],
                "top": [{"value": v, "count": n} for v, n in field["top"]] if field.get("top") else None,
            }  # fmt: skip
        fields.append(entry)
    indexes = []
    for index in spec.get("indexes") or []:
        entry = {k: v for k, v in index.items() if k != "ops"}
        entry["usage"] = {"ops": index["ops"], "since": None} if "ops" in index else None
        indexes.append(entry)
    for n in range(len(indexes), spec.get("indexes_count", 0)):
        indexes.append({"name": f"x{n}_1", "key": [[f"x{n}", 1]], "usage": None})
    count = spec["count"]
    return {
        "name": spec["name"], "count": count, "fields": fields, "time": time, "indexes": indexes,
        "sampling": {"documents": count}, "sharding": spec.get("sharding"),
        "document_size": dict.fromkeys(("p50", "p95", "mean", "max"), spec["median_bytes"])
        if "median_bytes" in spec
        else {},
    }  # fmt: skip


def _matches(found: Any, expected: dict[str, Any]) -> list[str]:
    problems = []
    for key, want in expected.items():
        if key == "reads":
            got = [read["read"] for read in found.evidence.get("reads", [])]
        elif key == "tradeoff":
            got = next((t for t in found.tradeoffs if want in t), None)
            want = got if got is not None else want
            got = got if got is not None else found.tradeoffs
        elif key in ("index", "covered_by"):
            got = found.evidence.get(key)
        elif key.startswith(("evidence.", "migration.")):
            part, name = key.split(".", 1)
            got = (getattr(found, part) or {}).get(name)
        else:
            got = getattr(found, key)
        if got != want:
            problems.append(f"{key}: {got!r}, expected {want!r}")
    return problems


@pytest.mark.parametrize(("rule", "case"), [(rule, case) for rule, _, case in ALL], ids=[name for _, name, _ in ALL])
def test_rule_case(rule, case):
    collections = [collection_data(case["collection"])] + [collection_data(c) for c in case.get("others", [])]
    report = {"collections": collections}
    access = None
    if "access" in case:
        top = {"mongodb_version": case["mongodb_version"]} if "mongodb_version" in case else {}
        text = yaml.safe_dump({"version": 1, **top, "collections": case["access"]}, sort_keys=False)
        access = parse_access_text(text, "access.yaml", [c["name"] for c in collections])
    thresholds = {rule: case["thresholds"]} if case.get("thresholds") else None
    found = run_rules(Context(report, access, thresholds), {rule})
    expected = case["expect"]
    assert len(found) == len(expected), [f"{f.title}: {f.rationale}" for f in found]
    for finding, want in zip(found, expected, strict=True):
        assert not _matches(finding, want), (_matches(finding, want), finding.rationale)
