"""Rule cases as data: reading ``tests/rules/cases/*.yaml``, building each case's evidence and comparing the
findings with what the case expects.

A case file names its rule and lists cases. A case holds:

- ``collection`` (and ``others``): a collection either as documents (``documents``: groups of templates,
  see ``tests.support.documents``; analysed from a dump folder as ``mongopat analyze`` would) or as evidence
  in the compact form of ``collection_data``; ``copies: n`` stands for n collections of that evidence.
- ``access`` (the access file's ``collections``), ``mongodb_version``, ``thresholds`` (the rule's);
  ``run: all`` runs every rule instead of the file's one.
- ``expect``: the findings in order, each a mapping of paths into the finding (``evidence.length_max``,
  ``migration.step``, ``fields``, ``evidence.reads.*.read``) to the value expected or a matcher
  (``$gte``, ``$gt``, ``$lte``, ``$lt``, ``$ne``, ``$size``, ``$contains``: a text in a string or a list,
  a list of them all); an empty list: silent.
- ``analysis``: paths into the first collection's analysis report and what they hold."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from mongopat.access import parse_access_text
from mongopat.command import analyze
from mongopat.rules import Context, Recommendation, run_rules
from mongopat.sources import SourceSpec
from tests.support.documents import documents
from tests.support.dumps import write_export
from tests.support.paths import RULE_CASES


@dataclass(frozen=True)
class RuleCase:
    """One case of a case file: its rule, a name for the test id and what the file says of it."""

    rule: str
    name: str
    spec: Mapping[str, Any]


CASE_KEYS = {"name", "collection", "others", "access", "mongodb_version", "thresholds", "run", "expect", "analysis"}
COLLECTION_KEYS = {
    "name", "documents", "copies", "count", "fields", "indexes", "indexes_count", "median_bytes", "document_size",
    "sharding",
}  # fmt: skip


def rule_cases(folder: Path = RULE_CASES) -> list[RuleCase]:
    """Every case of every file, refusing a key the format does not know (a misspelt ``thresholds`` would
    otherwise leave a case checking the defaults)."""
    found = []
    for path in sorted(folder.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not path.stem.startswith(data["rule"]):
            raise ValueError(f"{path.name} holds cases of {data['rule']}: name it after the rule")
        for case in data["cases"]:
            specs = [case["collection"], *case.get("others", [])]
            unknown = set(case) - CASE_KEYS | {key for spec in specs for key in spec} - COLLECTION_KEYS
            if unknown or "expect" not in case:
                raise ValueError(f"{path.name}, {case['name']!r}: unknown {sorted(unknown)} or no expect")
            found.append(RuleCase(data["rule"], f"{path.stem}: {case['name']}", case))
    return found


def collection_data(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A report's collection from the compact form: ``fields`` of ``{distinct, unique, array, string, top,
    presence}`` or ``{date, span_hours, presence}`` (``top``: ``[[value, count]...]``, the most common
    values); ``indexes`` as the report lists them, ``ops`` standing for ``$indexStats`` usage;
    ``indexes_count`` adds plain indexes up to that many; ``median_bytes`` the documents' size, or
    ``document_size`` its quantiles."""
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
    sizes: dict[str, Any] = {}
    if "median_bytes" in spec:
        sizes = dict.fromkeys(("p50", "p95", "mean", "max"), spec["median_bytes"])
    sizes.update(spec.get("document_size") or {})
    if sizes:
        sizes["count"] = count
    return {
        "name": spec["name"], "count": count, "fields": fields, "time": time, "indexes": indexes,
        "sampling": {"documents": count}, "sharding": spec.get("sharding"), "document_size": sizes,
    }  # fmt: skip


def _collections(case: Mapping[str, Any], folder: Path) -> list[dict[str, Any]]:
    """The case's collections as the analysis report holds them, in the order the case names them."""
    specs = [case["collection"], *case.get("others", [])]
    declared = [spec for spec in specs if "documents" in spec]
    analysed: dict[str, dict[str, Any]] = {}
    if declared:
        for spec in declared:
            write_export(folder, spec["name"], list(documents(spec["documents"])))
        analysed = {c["name"]: c for c in analyze(SourceSpec(dump=str(folder)))["collections"]}
    collections = []
    for spec in specs:
        data = analysed[spec["name"]] if "documents" in spec else collection_data(spec)
        copies = spec.get("copies")
        if copies:
            collections.extend(dict(copy.deepcopy(data), name=f"{spec['name']}{n}") for n in range(copies))
        else:
            collections.append(data)
    return collections


def run_case(case: RuleCase, folder: Path) -> tuple[list[Recommendation], dict[str, Any]]:
    """The findings the case's evidence gives, and the report they came from."""
    spec = case.spec
    report = {"source": {"database": "cases"}, "collections": _collections(spec, folder)}
    access = None
    if "access" in spec:
        top = {"mongodb_version": spec["mongodb_version"]} if "mongodb_version" in spec else {}
        text = yaml.safe_dump({"version": 1, **top, "collections": spec["access"]}, sort_keys=False)
        access = parse_access_text(text, "access.yaml", [c["name"] for c in report["collections"]])
    thresholds = {case.rule: spec["thresholds"]} if spec.get("thresholds") else None
    only = None if spec.get("run") == "all" else {case.rule}
    return run_rules(Context(report, access, thresholds), only), report


_MISSING = object()


def _walk(value: Any, path: list[str]) -> Any:
    for place, step in enumerate(path):
        if step == "*":
            return [_walk(item, path[place + 1 :]) for item in value]
        if isinstance(value, Mapping):
            value = value.get(step, _MISSING)
        elif isinstance(value, list) and step.isdigit():
            value = value[int(step)] if int(step) < len(value) else _MISSING
        else:
            value = getattr(value, step, _MISSING)
        if value is _MISSING:
            return _MISSING
    return value


def _contains(got: Any, want: Any) -> bool:
    if isinstance(want, list):
        return all(_contains(got, part) for part in want)
    if isinstance(got, str):
        return str(want) in got
    if isinstance(got, Iterable) and not isinstance(got, Mapping):
        return any(item == want or (isinstance(item, str) and str(want) in item) for item in got)
    return False


MATCHERS = {
    "$gte": lambda got, want: got >= want,
    "$gt": lambda got, want: got > want,
    "$lte": lambda got, want: got <= want,
    "$lt": lambda got, want: got < want,
    "$ne": lambda got, want: got != want,
    "$contains": _contains,
    "$size": lambda got, want: len(got) == want,
}


def _agrees(got: Any, want: Any) -> bool:
    if isinstance(want, Mapping) and want and all(key in MATCHERS for key in want):
        return got is not _MISSING and all(MATCHERS[key](got, value) for key, value in want.items())
    return got == want


def disagreements(subject: Any, expected: Mapping[str, Any]) -> list[str]:
    """Each path of ``expected`` whose value in ``subject`` is not what it expects, said."""
    problems = []
    for path, want in expected.items():
        got = _walk(subject, path.split("."))
        if not _agrees(got, want):
            problems.append(f"{path}: {'nothing' if got is _MISSING else repr(got)}, expected {want!r}")
    return problems
