"""The checks of ``mongopat check``: each turns evidence into findings with an id and a severity.

- migrations: pending, failed, or edited after they were applied (needs the target's changelog);
- recommendations: every pattern or anti-pattern recommend reports (its code is the finding id);
- drift: changes from a committed schema snapshot;
- rules: documents that break a declared rule (presence, types, array length, document size).

Waivers silence one finding until their expiry date, with a reason; an expired waiver is reported.
"""

from __future__ import annotations

import datetime
from dataclasses import asdict, dataclass
from dataclasses import field as default
from typing import Any

from mongopat.check.config import CheckConfig, DocumentRule
from mongopat.rules.base import SEVERITY_RANK

CHECKS = {
    "migrations": "Migrations in the folder are applied, unchanged and not failed",
    "recommendations": "No design-pattern recommendation or anti-pattern at or above the threshold",
    "drift": "The schema matches the committed snapshot",
    "rules": "Documents follow the declared rules",
    "validators": "Documents satisfy their collection's validator",
}


@dataclass
class Finding:
    id: str
    check: str  # migrations, recommendations, drift, rules, validators
    severity: str
    message: str
    collection: str | None = None
    field: str | None = None
    evidence: dict[str, Any] = default(default_factory=dict)
    location: str | None = None  # a file the finding is about (migration file, access file, snapshot)
    waived: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def migration_findings(status: list[dict[str, Any]], folder: str) -> list[Finding]:
    found = []
    for row in status:
        location = f"{folder}/{row['id']}.yaml"
        if row["edited"]:
            found.append(
                Finding(
                    "edited-migration",
                    "migrations",
                    "error",
                    f"{row['id']} was changed after it was applied",
                    evidence={"state": row["state"]},
                    location=location,
                )
            )
        if row["state"] in ("pending", "running"):
            found.append(
                Finding(
                    "pending-migration",
                    "migrations",
                    "error",
                    f"{row['id']} is not applied to the target",
                    evidence={"state": row["state"]},
                    location=location,
                )
            )
        elif row["state"] == "applied" and row.get("pending_documents"):
            found.append(
                Finding(
                    "old-shape-documents",
                    "migrations",
                    "warning",
                    f"{row['id']}: {row['pending_documents']:,} document(s) written in the old shape since it was "
                    "applied (an application that has not switched yet); 'mongopat migrate up' migrates them",
                    evidence={"pending_documents": row["pending_documents"]},
                    location=location,
                )
            )
        elif row["state"] == "failed":
            found.append(
                Finding(
                    "failed-migration",
                    "migrations",
                    "error",
                    f"{row['id']} failed: {row.get('error')}",
                    evidence={"error": row.get("error")},
                    location=location,
                )
            )
        elif row["state"] == "missing-file":
            found.append(
                Finding(
                    "missing-migration-file",
                    "migrations",
                    "warning",
                    f"{row['id']} is applied but its file is not in {folder}",
                )
            )
    return found


def recommendation_findings(result: dict[str, Any]) -> list[Finding]:
    found = []
    for rec in result["recommendations"]:
        found.append(
            Finding(
                rec["code"],
                "recommendations",
                rec["severity"],
                f"{rec['title']}: {rec['rationale']}",
                rec["collection"],
                rec["fields"][0] if rec["fields"] else None,
                {"pattern": rec["pattern"], "kind": rec["kind"], "confidence": rec["confidence"], **rec["evidence"]},
                result.get("access_file"),
            )
        )
    return found


def drift_findings(changes: list[dict[str, Any]], snapshot_path: str) -> list[Finding]:
    return [
        Finding(
            c["kind"], "drift", c["severity"], c["message"], c["collection"], c["field"], c["evidence"], snapshot_path
        )
        for c in changes
    ]


def rule_findings(report: dict[str, Any], rules: list[DocumentRule], location: str | None) -> list[Finding]:
    found = []
    for rule in rules:
        for collection in report["collections"]:
            if rule.collection not in ("*", collection["name"]):
                continue
            found.extend(_check_rule(rule, collection, location))
    return found


def _check_rule(rule: DocumentRule, collection: dict[str, Any], location: str | None) -> list[Finding]:
    name = collection["name"]
    fields = {f["path"]: f for f in collection["fields"]}
    read = collection["sampling"]["documents"]
    problems: list[tuple[str, dict[str, Any]]] = []
    entry = fields.get(rule.field) if rule.field else None
    if rule.required and rule.field:
        presence = entry["presence"] if entry else 0.0
        if presence is None or presence < 1.0:
            missing = read - (entry["count"] if entry else 0)
            problems.append(
                (f"{name}.{rule.field} is missing in {missing:,} of {read:,} documents read", {"presence": presence})
            )
    if rule.types and entry:
        other = [t for t in entry["types"] if t["type"] not in rule.types]
        if other:
            problems.append(
                (
                    f"{name}.{rule.field} has {', '.join(t['type'] for t in other)} values "
                    f"({sum(t['count'] for t in other):,} of {sum(t['count'] for t in entry['types']):,})",
                    {"allowed": rule.types, "found": [t["type"] for t in other]},
                )
            )
    if rule.max_length is not None and entry and entry.get("array"):
        longest = entry["array"]["max"] or 0
        if longest > rule.max_length:
            problems.append(
                (
                    f"{name}.{rule.field} holds up to {longest:,} elements (rule: at most {rule.max_length:,})",
                    {"max": longest, "p95": entry["array"]["p95"]},
                )
            )
    if rule.max_document_bytes is not None:
        largest = collection["document_size"].get("max") or 0
        if largest > rule.max_document_bytes:
            problems.append(
                (
                    f"{name}: documents reach {largest:,} bytes (rule: at most {rule.max_document_bytes:,})",
                    {"max_bytes": largest, "over": collection["document_size"].get("count")},
                )
            )
    return [
        Finding(f"rule:{rule.id}", "rules", rule.severity, message, name, rule.field, evidence, location)
        for message, evidence in problems
    ]


def apply_waivers(findings: list[Finding], config: CheckConfig, today: datetime.date | None = None) -> list[Finding]:
    """Mark waived findings; an expired waiver leaves the finding standing and says so."""
    today = today or datetime.date.today()
    for finding in findings:
        for waiver in config.waivers:
            if not waiver.matches(finding.id, finding.collection, finding.field):
                continue
            if waiver.expires >= today:
                finding.waived = {"reason": waiver.reason, "expires": waiver.expires.isoformat(), "where": waiver.where}
            else:
                finding.message += f" (waiver expired on {waiver.expires.isoformat()}: {waiver.reason})"
                finding.evidence["expired_waiver"] = waiver.expires.isoformat()
            break
    return findings


def failing(findings: list[Finding], fail_on: str) -> list[Finding]:
    threshold = SEVERITY_RANK[fail_on]
    return [f for f in findings if f.waived is None and SEVERITY_RANK[f.severity] >= threshold]


def validator_findings(violations: dict[str, dict[str, Any]]) -> list[Finding]:
    """One finding per collection with documents its current validator rejects (``violations``: collection
    -> ``{"documents", "level", "action"}``)."""
    found = []
    for name, seen in sorted(violations.items()):
        if not seen["documents"]:
            continue
        action = seen.get("action") or "error"
        consequence = (
            "an update of any of them fails until it satisfies the validator"
            if action == "error" and seen.get("level") != "moderate"
            else "the validator lets them be (level moderate or action warn), but they do not hold its rules"
        )
        found.append(
            Finding(
                "validator-violations",
                "validators",
                "warning",
                f"{seen['documents']:,} document(s) of {name} violate its validator: {consequence}",
                collection=name,
                evidence=dict(seen),
            )
        )
    return found
