"""``mongopat demo``: the whole product on a realistic dataset, no server needed.

Writes a dump folder drawn from the sample scenarios (orders with items, IoT readings, a social feed
with celebrity accounts, a catalog with sparse attributes, a category tree, profiles whose shape changed)
with an access-pattern file, then runs analyze -> recommend -> migrate plan -> migrate up -> verify ->
check on it, printing each command so it can be rerun by hand, and what changed.
"""

from __future__ import annotations

import datetime
import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from mongopat import command
from mongopat.analysis.timeline import steady_rate
from mongopat.errors import InputError, OperationFailed
from mongopat.migrate.runner import RunOptions
from mongopat.predictions import describe
from mongopat.report import write_report
from mongopat.sample_data import Scenario, ecommerce, iot, social, wiki
from mongopat.sources import SourceSpec

DATABASE = "demo"
PICK = {  # scenario -> collections of it in the demo
    ecommerce: ["orders", "customers", "products", "categories"],
    iot: ["readings", "sensors"],
    social: ["users", "posts", "activities"],
    wiki: ["profiles"],
}


def write_dataset(folder: Path) -> tuple[Path, Path]:
    """The demo dump folder (``folder/demo``) and its access file; returns both paths."""
    data = folder / DATABASE
    data.mkdir(parents=True, exist_ok=True)
    access: dict[str, Any] = {"version": 1, "database": DATABASE, "collections": {}}
    from bson import json_util

    for make, names in PICK.items():
        scenario: Scenario = make()
        declared = yaml.safe_load(scenario.access_yaml)["collections"]
        for name in names:
            with (data / f"{name}.json").open("w", encoding="utf-8") as handle:
                for document in scenario.collections[name]:
                    handle.write(json_util.dumps(document, json_options=json_util.RELAXED_JSON_OPTIONS) + "\n")
            if name in declared:
                access["collections"][name] = declared[name]
    access_path = folder / "access.yaml"
    header = "# What the demo application does with each collection (see README: the access-pattern file).\n"
    access_path.write_text(
        header + yaml.safe_dump(access, sort_keys=False, default_flow_style=None, width=110), encoding="utf-8"
    )
    return data, access_path


def _dashboard_reads(data: Path, start: datetime.datetime | None = None) -> tuple[int, datetime.datetime | None]:
    """Documents a dashboard reads for one sensor over one hour: readings, or the buckets overlapping it (of a
    time-series collection the readings moved to, which the server unpacks, or made by hand)."""
    from mongopat.migrate.dump_folder.files import decoded_documents
    from mongopat.sources.dump import DumpSource

    buckets = data / "system.buckets.readings_ts.bson"
    if start is not None and buckets.exists():
        end = start + datetime.timedelta(hours=1)
        overlapping = (
            b for b in decoded_documents(buckets)
            if b.get("meta") == "sensor-00" and b["control"]["min"]["ts"] < end and b["control"]["max"]["ts"] >= start
        )  # fmt: skip
        return sum(1 for _ in overlapping), start
    count = 0
    for document, _ in DumpSource(data).documents("readings", None):
        if document.get("sensorId") != "sensor-00":
            continue
        if "readings" in document:  # a bucket
            if (
                start is not None
                and document["start"] < start + datetime.timedelta(hours=1)
                and document["end"] > start
            ):
                count += 1
            continue
        start = start or document["ts"]
        if document["ts"] < start + datetime.timedelta(hours=1):
            count += 1
    return count, start


def run_demo(folder: Path, say: Callable[[str], None], show: Callable[[str], None]) -> int:
    """Run every step, narrating through ``say`` (prose) and ``show`` (commands); returns the exit code."""
    if folder.exists() and any(folder.iterdir()):
        raise InputError(
            f"{folder} is not empty", hint="give the demo a new or empty folder: mongopat demo ./somewhere"
        )
    data, access = write_dataset(folder)
    dump, migrations = str(data), str(folder / "migrations")
    report_path, recs_path = folder / "report.json", folder / "recs.json"
    q = shlex.quote
    say(
        f"1. A realistic dataset, written as mongoexport files in {data}, and what the application does with it in {access}."
    )

    show(f"mongopat analyze --dump {q(dump)} --output {q(str(report_path))}")
    report = command.analyze(SourceSpec(dump=dump))
    write_report(report, report_path)
    total = sum(c["count"] or 0 for c in report["collections"])
    say(f"2. analyze read {total:,} documents in {len(report['collections'])} collections:")
    for collection in report["collections"]:
        widest = max((f for f in collection["fields"] if f.get("array")), key=lambda f: f["array"]["max"], default=None)
        rate = next((steady_rate(p) for p in collection["time"] if p["field"] == "_id"), None)
        details = [f"{collection['count']:,} docs", f"p50 {collection['document_size']['p50']} B"]
        if widest:
            details.append(f"{widest['path']} up to {widest['array']['max']:,} elements (p50 {widest['array']['p50']})")
        if rate and rate >= 1:
            details.append(f"{rate:,.1f} inserts/s")
        if collection["drift"]["appeared"]:
            details.append(
                "fields appeared over time: " + ", ".join(a["field"] for a in collection["drift"]["appeared"])
            )
        say(f"   {collection['name']}: " + "; ".join(details))

    show(
        f"mongopat recommend --dump {q(dump)} --access {q(str(access))} --format json -o {q(str(recs_path))} "
        f"--html {q(str(folder / 'report.html'))}"
    )
    result = command.recommend(report, str(access), source=SourceSpec(dump=dump))
    recs_path.write_text(json.dumps(result, indent=2, default=str), encoding="utf-8")
    from mongopat.render.html import render_html

    # One page for the analysis and the advice, as `recommend --html` writes it.
    (folder / "report.html").write_text(render_html(report, result), encoding="utf-8")
    by = result["summary"]["by_severity"]
    say(
        f"3. recommend found {len(result['recommendations'])} recommendations ({by['error']} error, {by['warning']} warning, {by['info']} info):"
    )
    for rec in result["recommendations"]:
        say(
            f"   {rec['severity']:7} {rec['code']} {rec['pattern']:<20} {rec['collection'] or '(database)'}: {rec['title']}"
        )

    show(f"mongopat migrate plan --from {q(str(recs_path))} --dir {q(migrations)} --yes")
    from mongopat.migrate.plan import plan

    files, _notes = plan(result["recommendations"], Path(migrations))
    say(
        f"4. migrate plan wrote {len(files)} migration files to {migrations} (review them before applying in real life)."
    )

    readings_migration = next((f for f in files if f.collection == "readings"), None)
    if readings_migration is not None:
        readings_id = Path(readings_migration.path).stem
        show(
            f"mongopat migrate guide {readings_id} --dir {q(migrations)} --access {q(str(access))} "
            f"--report {q(str(report_path))}"
        )
        from mongopat.render.guide import guide_markdown

        guide = command.migrate_guide(migrations, str(access), report_path=str(report_path), ids=[readings_id])
        say(f"   migrate guide: what the application must change for {readings_id} (markdown for its pull request):")
        for line in guide_markdown(guide).splitlines():
            say(f"   | {line}")

    counts_before = {c["name"]: c["count"] for c in report["collections"]}
    slow_before, hour = _dashboard_reads(data)
    show(f"mongopat migrate up --dump {q(dump)} --dir {q(migrations)} --yes")
    applied = command.migrate_up(SourceSpec(dump=dump), migrations, options=RunOptions())
    say(f"5. migrate up applied {len(applied)} migrations: " + ", ".join(a["id"] for a in applied))
    after = command.analyze(SourceSpec(dump=dump))
    for collection in after["collections"]:
        old = counts_before.get(collection["name"])
        if old is None:
            held = collection.get("timeseries") or {}
            kind = f" (a time-series collection: {held['buckets']:,} buckets)" if held.get("buckets") else ""
            say(f"   {collection['name']}: new collection with {collection['count']:,} documents{kind}")
        elif old != collection["count"]:
            say(
                f"   {collection['name']}: {old:,} -> {collection['count']:,} documents (p50 {collection['document_size']['p50']:,} B)"
            )
    slow_after, _ = _dashboard_reads(data, hour)
    say(f"   one sensor's hour of readings: {slow_before:,} documents to read before, {slow_after:,} after")

    if readings_migration is not None:
        show(
            f"mongopat migrate guide --check {readings_id} --dump {q(dump)} --dir {q(migrations)} --access {q(str(access))}"
        )
        proof = command.migrate_guide_check(SourceSpec(dump=dump), migrations, str(access), [readings_id])
        [checked] = proof["migrations"]
        verdict = "the same documents" if proof["ok"] else f"{len(checked['differences'])} difference(s)"
        say(
            f"   the guide proven on this data: {checked['reads_compared']} reads compared "
            f"({checked['documents_compared']:,} documents) and {checked['writes_applied']} writes applied: {verdict}"
        )

    show(f"mongopat migrate verify --dump {q(dump)} --dir {q(migrations)}")
    problems = command.migrate_verify(SourceSpec(dump=dump), migrations)
    bad = {k: v for k, v in problems.items() if v}
    if bad:
        raise OperationFailed(f"verification failed: {bad}")
    say(f"6. migrate verify: all {len(problems)} migrations hold (no document lost, the new shapes everywhere).")
    predicted = command.migrate_predictions(SourceSpec(dump=dump), migrations)
    figures = [d for found in predicted.values() for d in found]
    off = [d for d in figures if d["beyond_tolerance"]]
    worst = max(figures, key=lambda d: abs(d["off_by"]), default=None)
    say(
        f"   predictions: {len(figures) - len(off)} of {len(figures)} figures of {len(predicted)} migrations came true"
        + (f" (furthest: {describe(worst)})" if worst else "")
    )

    show(f"mongopat check --dump {q(dump)} --dir {q(migrations)} --access {q(str(access))}")
    gate = command.check(SourceSpec(dump=dump), access_path=str(access), migrations_dir=migrations)
    state = "passes" if gate["ok"] else "fails"
    say(
        f"7. check {state}: {gate['summary']['findings']} finding(s) left, {gate['summary']['failing']} at error level."
    )
    say(
        f"To undo: mongopat migrate down --dump {q(dump)} --dir {q(migrations)} --to base --yes. The HTML report is {folder / 'report.html'}."
    )
    return 0 if gate["ok"] else 1
