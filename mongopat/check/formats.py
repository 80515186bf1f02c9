"""Machine-readable outputs of ``mongopat check``: JSON, JUnit XML (one testcase per check) and SARIF 2.1.0."""

from __future__ import annotations

from typing import Any
from xml.etree import ElementTree

from mongopat import __version__
from mongopat.check.findings import CHECKS, Finding
from mongopat.rules import registry

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def to_json(result: dict[str, Any]) -> dict[str, Any]:
    return {
        "check_version": 1,
        "ok": result["ok"],
        "fail_on": result["fail_on"],
        "summary": result["summary"],
        "findings": [f.to_dict() for f in result["findings"]],
        "checks": result["checks"],
        "notes": result["notes"],
    }


def _testcase_name(finding: Finding) -> str:
    where = ".".join(x for x in (finding.collection, finding.field) if x)
    return f"{finding.id} {where}".strip()


def to_junit(result: dict[str, Any]) -> str:
    """One testsuite; one testcase per check that ran, plus one per finding (failed when it fails CI)."""
    findings: list[Finding] = result["findings"]
    failing_ids = {id(f) for f in result["failing"]}
    suite = ElementTree.Element("testsuite", name="mongopat check", timestamp=result["checked_at"])
    cases = 0
    failures = 0
    for check, ran in result["checks"].items():
        case = ElementTree.SubElement(suite, "testcase", classname=f"mongopat.{check}", name=CHECKS[check])
        cases += 1
        if not ran["ran"]:
            ElementTree.SubElement(case, "skipped", message=ran["note"] or "not run")
            continue
        own = [f for f in findings if f.check == check and id(f) in failing_ids]
        if own:
            failures += 1
            failure = ElementTree.SubElement(
                case, "failure", message=f"{len(own)} finding(s) at or above {result['fail_on']}"
            )
            failure.text = "\n".join(f"[{f.severity}] {_testcase_name(f)}: {f.message}" for f in own)
    for finding in findings:
        case = ElementTree.SubElement(
            suite, "testcase", classname=f"mongopat.{finding.check}", name=_testcase_name(finding)
        )
        cases += 1
        if finding.waived:
            ElementTree.SubElement(
                case, "skipped", message=f"waived until {finding.waived['expires']}: {finding.waived['reason']}"
            )
        elif id(finding) in failing_ids:
            failures += 1
            failure = ElementTree.SubElement(case, "failure", message=finding.message[:200], type=finding.severity)
            failure.text = finding.message
        else:
            output = ElementTree.SubElement(case, "system-out")
            output.text = f"[{finding.severity}] {finding.message}"
    suite.set("tests", str(cases))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    suite.set("skipped", str(sum(1 for c in suite.iter("testcase") if c.find("skipped") is not None)))
    return ElementTree.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def to_sarif(result: dict[str, Any]) -> dict[str, Any]:
    findings: list[Finding] = result["findings"]
    rule_docs = {rule.code: rule for rule in registry()}
    rule_ids = sorted({f.id for f in findings})
    rules = []
    for rule_id in rule_ids:
        entry: dict[str, Any] = {"id": rule_id, "shortDescription": {"text": rule_id}}
        if rule_id in rule_docs:
            doc = rule_docs[rule_id]
            entry["name"] = doc.name
            entry["shortDescription"] = {"text": doc.title}
            entry["fullDescription"] = {"text": " ".join((doc.__doc__ or doc.title).split())}
        rules.append(entry)
    results = []
    for finding in findings:
        item: dict[str, Any] = {
            "ruleId": finding.id,
            "ruleIndex": rule_ids.index(finding.id),
            "level": SARIF_LEVEL[finding.severity],
            "message": {"text": finding.message},
            "properties": {"check": finding.check, "collection": finding.collection, "field": finding.field},
        }
        logical = ".".join(x for x in (finding.collection, finding.field) if x)
        location: dict[str, Any] = {}
        if finding.location:
            location["physicalLocation"] = {"artifactLocation": {"uri": finding.location}}
        if logical:
            location["logicalLocations"] = [{"name": logical, "kind": "member" if finding.field else "module"}]
        if location:
            item["locations"] = [location]
        if finding.waived:
            item["suppressions"] = [
                {"kind": "external", "justification": f"{finding.waived['reason']} (until {finding.waived['expires']})"}
            ]
        results.append(item)
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "mongopat", "version": __version__, "rules": rules}},
                "results": results,
            }
        ],
    }
