"""``mongopat check``: every finding type fails the gate, clean data passes silently, waivers work and
expire, snapshots catch drift, JUnit parses and SARIF validates against the SARIF 2.1.0 schema."""

import datetime
import json
import os
import shutil
from pathlib import Path
from xml.etree import ElementTree

import jsonschema
import pytest
from bson import ObjectId
from typer.testing import CliRunner

from mongopat import command
from mongopat.check.formats import to_junit, to_sarif
from mongopat.cli import app
from mongopat.sources import SourceSpec
from tests.support.dumps import write_export
from tests.support.evidence import healthy_collection
from tests.support.paths import REPOSITORY

runner = CliRunner()
SAMPLES = REPOSITORY / "sample_configs"


def healthy(folder: Path) -> Path:
    write_export(folder / "db", "things", healthy_collection())
    return folder / "db"


def invoke(*args):
    return runner.invoke(app, ["check", *map(str, args)])


def test_clean_data_exits_0_with_no_finding_at_all(tmp_path):
    result = invoke("--dump", healthy(tmp_path), "--fail-on", "info", "-f", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["ok"] and data["findings"] == []


def test_anti_pattern_over_threshold_fails(tmp_path):
    data = healthy(tmp_path)
    result = invoke("--dump", data, "-t", "MP201.warn_length=1", "-t", "MP201.error_length=2", "-f", "json")
    assert result.exit_code == 1
    finding = json.loads(result.stdout)["findings"][0]
    assert (finding["id"], finding["severity"], finding["collection"], finding["field"]) == (
        "MP201",
        "error",
        "things",
        "tags",
    )
    assert (
        invoke("--dump", data, "-t", "MP201.warn_length=1", "-t", "MP201.warn_p95=1").exit_code == 0
    )  # warning < error
    assert invoke("--dump", data, "-t", "MP201.warn_length=1", "--fail-on", "warning").exit_code == 1


def migrations_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "migrations"
    folder.mkdir()
    (folder / "0001_flag.yaml").write_text(
        "id: 0001_flag\ndescription: flag\nsteps:\n- step: set_field\n  collection: things\n  field: flagged\n  value: true\n"
    )
    return folder


def test_pending_edited_and_failed_migrations_fail(tmp_path):
    data, folder = healthy(tmp_path), migrations_folder(tmp_path)
    result = invoke("--dump", data, "--dir", folder, "-f", "json")
    assert result.exit_code == 1 and json.loads(result.stdout)["findings"][0]["id"] == "pending-migration"
    assert runner.invoke(app, ["migrate", "up", "--dump", str(data), "--dir", str(folder), "--yes"]).exit_code == 0
    assert invoke("--dump", data, "--dir", folder).exit_code == 0
    path = folder / "0001_flag.yaml"
    path.write_text(path.read_text().replace("true", "false"))
    result = invoke("--dump", data, "--dir", folder, "-f", "json")
    assert result.exit_code == 1 and json.loads(result.stdout)["findings"][0]["id"] == "edited-migration"


def test_failed_migration_is_a_finding(tmp_path):
    from mongopat.check.findings import migration_findings

    rows = [{"id": "0002_x", "state": "failed", "edited": False, "error": "boom"}]
    assert migration_findings(rows, "migrations")[0].id == "failed-migration"


def test_snapshot_drift_each_kind(tmp_path):
    db = tmp_path / "db"
    docs = [{"_id": ObjectId(), "name": f"n{i}", "qty": i, "tags": ["a"] * 3, "note": "x", "sometimes": 1 if i % 2 else None}
            for i in range(60)]  # fmt: skip
    for doc in docs:
        if doc["sometimes"] is None:
            del doc["sometimes"]
    write_export(db, "things", docs)
    snapshot = tmp_path / "schema.json"
    assert invoke("--dump", db, "--write-snapshot", snapshot).exit_code == 0
    assert invoke("--dump", db, "--snapshot", snapshot, "--fail-on", "info").exit_code == 0  # unchanged: nothing
    changed = []
    for doc in docs:
        new = dict(doc)
        new.pop("note")  # vanished field
        new["qty"] = str(doc["qty"])  # type change
        new["added"] = True  # new field
        new["tags"] = ["a"] * 30  # length shift
        new.pop("sometimes", None)  # presence shift
        changed.append(new)
    shutil.rmtree(db)
    write_export(db, "things", changed)
    (db / "things.metadata.json").write_text(
        '{"indexes": [{"v": 2, "key": {"_id": 1}, "name": "_id_"}, {"v": 2, "key": {"qty": 1}, "name": "qty_1"}]}'
    )
    result = invoke("--dump", db, "--snapshot", snapshot, "-f", "json")
    assert result.exit_code == 1
    kinds = {f["id"] for f in json.loads(result.stdout)["findings"]}
    assert {"vanished-field", "type-change", "new-field", "length-shift", "index-added"} <= kinds


def test_presence_shift_and_tolerance(tmp_path):
    db = tmp_path / "db"
    write_export(db, "t", [{"_id": i, "a": 1} for i in range(50)])
    snapshot = tmp_path / "s.json"
    invoke("--dump", db, "--write-snapshot", snapshot)
    write_export(db, "t", [{"_id": i, **({"a": 1} if i % 2 else {})} for i in range(50)])
    result = json.loads(invoke("--dump", db, "--snapshot", snapshot, "-f", "json").stdout)
    assert [f["id"] for f in result["findings"]] == ["presence-shift"]
    config = tmp_path / "mongopat.yaml"
    config.write_text("version: 1\nsnapshot: {presence_tolerance: 0.6}\n")
    assert (
        json.loads(invoke("--dump", db, "--snapshot", snapshot, "--config", config, "-f", "json").stdout)["findings"]
        == []
    )


def test_declared_rules(tmp_path):
    db = tmp_path / "db"
    write_export(db, "orders", [{"_id": i, "total": 1.5 if i % 2 else "free", "items": list(range(i))} for i in range(30)]
                 + [{"_id": 99, "items": []}])  # fmt: skip
    config = tmp_path / "mongopat.yaml"
    config.write_text(
        "version: 1\nrules:\n"
        "  - {id: total-present, collection: orders, field: total, required: true}\n"
        "  - {id: total-number, collection: orders, field: total, types: [double, int]}\n"
        "  - {id: items-bounded, collection: orders, field: items, max_length: 10, severity: warning}\n"
        "  - {id: small-docs, collection: '*', max_document_bytes: 100}\n"
    )
    result = json.loads(invoke("--dump", db, "--config", config, "-f", "json").stdout)
    found = {f["id"]: f for f in result["findings"]}
    assert set(found) == {"rule:total-present", "rule:total-number", "rule:items-bounded", "rule:small-docs"}
    assert found["rule:items-bounded"]["severity"] == "warning" and "1 of 31" in found["rule:total-present"]["message"]


def test_config_errors_name_file_and_line(tmp_path):
    config = tmp_path / "mongopat.yaml"
    config.write_text("version: 1\nrules:\n  - {id: r, collection: c, feild: x, required: true}\n")
    result = invoke("--dump", healthy(tmp_path), "--config", config)
    assert result.exit_code == 2 and "mongopat.yaml:3" in result.output and "did you mean 'field'" in result.output


def test_waivers_silence_until_they_expire(tmp_path):
    data = healthy(tmp_path)
    config = tmp_path / "mongopat.yaml"
    config.write_text(
        "version: 1\nwaivers:\n  - {id: MP201, collection: things, field: tags, reason: tracked in OPS-12, expires: 2030-01-01}\n"
    )
    args = ["-t", "MP201.warn_length=1", "-t", "MP201.error_length=2"]
    result = invoke("--dump", data, "--config", config, *args, "-f", "json")
    assert result.exit_code == 0
    finding = json.loads(result.stdout)["findings"][0]
    assert finding["waived"]["reason"] == "tracked in OPS-12"
    report = command.analyze(SourceSpec(dump=str(data)))
    later = command.check(
        report_path=None,
        spec=SourceSpec(dump=str(data)),
        config_path=str(config),
        thresholds={"MP201": {"warn_length": 1, "error_length": 2}},
        today=datetime.date(2030, 1, 2),
    )
    assert not later["ok"] and "waiver expired on 2030-01-01" in later["findings"][0].message
    assert report  # the analysis itself is unaffected by waivers


def test_check_section_of_the_access_file(tmp_path):
    access = tmp_path / "access.yaml"
    access.write_text(
        "version: 1\ncollections: {}\ncheck:\n  rules:\n    - {id: has-status, collection: things, field: nope, required: true}\n"
    )
    result = invoke("--dump", healthy(tmp_path), "--access", access, "-f", "json")
    assert result.exit_code == 1 and json.loads(result.stdout)["findings"][0]["id"] == "rule:has-status"


def test_saved_report_source(tmp_path):
    report = tmp_path / "r.json"
    assert runner.invoke(app, ["analyze", "--dump", str(healthy(tmp_path)), "-o", str(report), "-q"]).exit_code == 0
    result = json.loads(invoke("--report", report, "-f", "json").stdout)
    assert result["ok"] and result["checks"]["migrations"]["ran"] is False


@pytest.fixture
def failing_result(tmp_path):
    return command.check(SourceSpec(dump=str(SAMPLES / "ecommerce")), access_path=str(SAMPLES / "ecommerce/access.yaml"),
                         fail_on="warning", migrations_dir=str(tmp_path / "none"))  # fmt: skip


def test_junit_parses_with_one_testcase_per_check(failing_result):
    suite = ElementTree.fromstring(to_junit(failing_result).encode())
    assert suite.tag == "testsuite" and int(suite.get("failures")) >= 1
    cases = suite.findall("testcase")
    assert int(suite.get("tests")) == len(cases)
    names = {c.get("classname") for c in cases}
    assert {"mongopat.migrations", "mongopat.recommendations", "mongopat.drift", "mongopat.rules"} <= names
    assert any(c.find("failure") is not None for c in cases) and any(c.find("skipped") is not None for c in cases)


def sarif_schema() -> dict:
    path = Path(os.environ.get("MONGOPAT_SARIF_SCHEMA", REPOSITORY / ".ci/cache/sarif-2.1.0.json"))
    if not path.exists():
        pytest.skip("the SARIF 2.1.0 schema is fetched by .ci/run (npm pack @microsoft/jest-sarif)")
    return json.loads(path.read_text())


def test_sarif_validates_against_the_schema(failing_result):
    schema = sarif_schema()
    sarif = to_sarif(failing_result)
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = sorted(validator.iter_errors(sarif), key=str)
    assert errors == [], errors[:3]
    run = sarif["runs"][0]
    assert run["results"] and all(
        r["ruleId"] == run["tool"]["driver"]["rules"][r["ruleIndex"]]["id"] for r in run["results"]
    )
    broken = json.loads(json.dumps(sarif))
    broken["runs"][0]["results"][0]["level"] = "fatal"
    assert list(validator.iter_errors(broken))  # the validation can fail


def test_cli_writes_sarif_and_junit_files(tmp_path):
    for fmt in ("sarif", "junit"):
        target = tmp_path / f"out.{fmt}"
        result = invoke("--dump", SAMPLES / "iot", "-f", fmt, "-o", target, "--fail-on", "warning")
        assert result.exit_code == 1 and target.stat().st_size > 100


def test_demo_runs_end_to_end(tmp_path):
    result = runner.invoke(app, ["demo", str(tmp_path / "demo")])
    assert result.exit_code == 0, result.output
    for step in (
        "1.",
        "2. analyze",
        "3. recommend",
        "4. migrate plan",
        "5. migrate up",
        "6. migrate verify",
        "7. check passes",
    ):
        assert step in result.output
    assert "$ mongopat migrate up --dump" in result.output
    page = (tmp_path / "demo" / "report.html").read_text()
    # One page for the analysis and the advice: the findings the demo printed are counted in the overview.
    found = int(result.output.split("3. recommend found ")[1].split()[0])
    assert f"Recommendations ({found})" in page and "warning</span>" in page.split("<h2>Recommendations")[0]
    again = runner.invoke(app, ["demo", str(tmp_path / "demo")])
    assert again.exit_code == 2 and "not empty" in again.output


def test_snapshot_compare_collection_and_index_changes():
    from mongopat.check.snapshot import compare

    field = {"types": ["string"], "presence": 1.0, "presence_band": "always", "array_p95": None}
    old = {
        "collections": {"a": {"fields": {"x": field}, "indexes": ['[["x", 1]]']}, "gone": {"fields": {}, "indexes": []}}
    }
    new = {"collections": {"a": {"fields": {"x": field}, "indexes": []}, "fresh": {"fields": {}, "indexes": []}}}
    kinds = {(c["kind"], c["severity"]) for c in compare(old, new, 0.2, 2.0)}
    assert kinds == {("index-removed", "warning"), ("vanished-collection", "error"), ("new-collection", "warning")}


def test_every_command_has_examples_in_its_help():
    for args in (
        ["--help"],
        ["analyze", "-h"],
        ["recommend", "-h"],
        ["check", "-h"],
        ["demo", "-h"],
        ["rules", "-h"],
        ["access", "draft", "-h"],
        ["migrate", "plan", "-h"],
        ["migrate", "new", "-h"],
        ["migrate", "status", "-h"],
        ["migrate", "up", "-h"],
        ["migrate", "down", "-h"],
        ["migrate", "verify", "-h"],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 0 and "Examples" in result.output, args


def test_missing_or_unreadable_yaml_files_are_input_errors(tmp_path):
    """Every YAML file mongopat takes is read by one helper: a clear message and exit 2, not an internal error."""
    data = SAMPLES / "iot"
    missing = tmp_path / "absent.yaml"
    result = invoke("--dump", data, "--access", missing)
    assert result.exit_code == 2 and f"access-pattern file not found: {missing}" in result.output
    result = invoke("--dump", data, "--config", missing)
    assert result.exit_code == 2 and f"config file not found: {missing}" in result.output
    latin = tmp_path / "0001_latin.yaml"
    latin.write_bytes("description: caf\xe9\n".encode("latin-1"))
    result = runner.invoke(app, ["migrate", "status", "--dump", str(data), "--dir", str(tmp_path)])
    assert result.exit_code == 2 and f"cannot read migration file {latin}" in result.output
