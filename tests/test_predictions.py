"""Predictions that come true: what a recommendation says its migration will do, written into the migration
file by ``plan``, measured by ``up`` on both backends, compared by ``verify`` and gated by ``rehearse``."""

from __future__ import annotations

import json
import shutil

import pytest
from bson import json_util
from typer.testing import CliRunner

from mongopat.cli import app
from mongopat.command import analyze, recommend
from mongopat.migrate.plan import plan
from mongopat.migrate.runner import RunOptions
from mongopat.migrate.script import load_folder
from mongopat.migrate.server.runner import Runner
from mongopat.predictions import TOLERANCE, differences
from mongopat.sample_data import SCENARIOS, write_scenario
from mongopat.sources import SourceSpec
from tests.support.scenarios import update_readings

runner = CliRunner()

# (case, predicted before, predicted after, measured before, measured after, figures beyond the tolerance)
DIFFERENCE_CASES = [
    ("as predicted", {"documents": 6000}, {"documents": 40}, None, {"documents": 40}, []),
    ("four times the buckets", {"documents": 6000}, {"documents": 40}, None, {"documents": 160}, ["documents"]),
    ("within the absolute floor", {"documents": 6}, {"documents": 2}, None, {"documents": 5}, []),
    # The collection held twice the documents when up began (the application wrote since the plan): the
    # predicted change (/150) is applied to what was there.
    ("change applied to what was there", {"documents": 6000}, {"documents": 40}, {"documents": 12000},
     {"documents": 80}, []),
    ("bytes off by a third", {"data_bytes": 600_000}, {"data_bytes": 450_000}, None, {"data_bytes": 600_000},
     ["data_bytes"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "before", "after", "measured_before", "measured", "beyond"),
    DIFFERENCE_CASES,
    ids=[c[0] for c in DIFFERENCE_CASES],
)
def test_differences(case, before, after, measured_before, measured, beyond):
    predicted = {"collections": [{"collection": "c", "before": before, "after": after, "basis": "test"}]}
    found = differences(predicted, {"c": measured}, {"c": measured_before} if measured_before else None)
    assert [d["figure"] for d in found if d["beyond_tolerance"]] == beyond, case
    # Past the tolerance only where the absolute difference passes its floor too.
    assert all(abs(d["off_by"]) <= TOLERANCE or not d["beyond_tolerance"] for d in found if d["figure"] not in beyond)


@pytest.fixture
def iot(tmp_path):
    """The IoT scenario as a dump folder, its readings updated in place (so the bucket pattern is the
    advice), its recommendations (from the data) and their migrations."""
    folder = write_scenario(SCENARIOS["iot"](), tmp_path)
    update_readings(folder / "access.yaml")
    spec = SourceSpec(dump=str(folder / "iot"))
    result = recommend(analyze(spec), str(folder / "access.yaml"), source=spec)
    migrations = tmp_path / "migrations"
    plan(result["recommendations"], migrations)
    return folder, result, migrations


def test_plan_writes_the_prediction_into_the_migration_file(iot):
    _folder, result, migrations = iot
    [bucket] = [r for r in result["recommendations"] if r["code"] == "MP101"]
    [migration] = load_folder(migrations)
    assert migration.prediction == bucket["prediction"]
    [predicted] = migration.prediction["collections"]
    assert predicted["after"]["documents"] < predicted["before"]["documents"]
    assert predicted["after"]["data_bytes"] < predicted["before"]["data_bytes"]
    assert "counted over all" in predicted["basis"]
    [read] = migration.prediction["reads"]
    assert read["examined_after"] < read["examined_before"]


def test_up_on_a_dump_folder_records_what_it_measured_and_verify_compares(iot):
    folder, _result, migrations = iot
    data = str(folder / "iot")
    result = runner.invoke(app, ["migrate", "up", "--dump", data, "--dir", str(migrations)])
    assert result.exit_code == 0, result.output
    lines = (folder / "iot" / "mongopat_changelog.json").read_text().splitlines()
    [entry] = [json_util.loads(line) for line in lines if line.strip()]
    assert entry["measured_before"]["readings"]["documents"] == 6000
    assert entry["measured"]["readings"]["documents"] < 6000
    shown = runner.invoke(app, ["migrate", "verify", "--dump", data, "--dir", str(migrations), "-f", "json"])
    assert shown.exit_code == 0, shown.output
    [migration] = json.loads(shown.stdout)["migrations"]
    figures = {d["figure"]: d for d in migration["prediction"]}
    assert set(figures) == {"documents", "data_bytes", "median_document_bytes", "p95_document_bytes"}
    assert not any(d["beyond_tolerance"] for d in figures.values()), figures
    assert figures["documents"]["measured"] == figures["documents"]["predicted"]
    table = runner.invoke(app, ["migrate", "verify", "--dump", data, "--dir", str(migrations)], env={"COLUMNS": "120"})
    assert "prediction: as predicted" in table.output and "readings: documents" in table.output


def test_rehearse_fails_on_a_prediction_that_does_not_come_true(iot):
    folder, _result, migrations = iot
    data = str(folder / "iot")
    good = runner.invoke(app, ["migrate", "rehearse", "--dump", data, "--dir", str(migrations), "-f", "json"])
    assert good.exit_code == 0, good.output
    [entry] = json.loads(good.stdout)["migrations"]
    assert entry["prediction"]["compared"] and entry["prediction"]["differences"]
    [path] = list(migrations.iterdir())
    text = path.read_text()
    predicted = load_folder(migrations)[0].prediction["collections"][0]["after"]["documents"]
    path.write_text(text.replace(f"      documents: {predicted}\n", f"      documents: {predicted * 10}\n", 1))
    bad = runner.invoke(app, ["migrate", "rehearse", "--dump", data, "--dir", str(migrations)])
    assert bad.exit_code == 1, bad.output
    assert "prediction: readings: documents" in bad.output and "rehearsal FAILED" in bad.output


def test_up_on_a_server_measures_the_same_figures(mongo, tmp_path):
    """A bucket migration planned from a dump folder, run on a server (counts and sizes summed inside it
    where the server can): what up records is the collection's, within the tolerance of the prediction."""
    import datetime

    import bson

    from tests.support.dumps import write_export

    start = datetime.datetime(2026, 1, 1)
    readings = [
        {"_id": i, "sensorId": f"s{i % 4}", "ts": start + datetime.timedelta(seconds=i // 4), "v": (i * 7) % 50 / 2}
        for i in range(1200)
    ]
    write_export(tmp_path / "data", "readings", readings)
    access = tmp_path / "access.yaml"
    access.write_text(
        "version: 1\ncollections:\n  readings:\n    writes: {inserts_per_sec: 4, updates_per_sec: 1}\n    queries:\n"
        "      - {name: range, filter: {sensorId: eq, ts: range}, per_sec: 5}\n"
    )
    spec = SourceSpec(dump=str(tmp_path / "data"))
    result = recommend(analyze(spec), str(access), {"MP101": {"min_documents": 100}}, source=spec)
    migrations = tmp_path / "migrations"
    plan(result["recommendations"], migrations)
    [migration] = load_folder(migrations)
    assert migration.prediction is not None
    mongo.db.readings.insert_many(readings)
    run = Runner(mongo.db, [migration], RunOptions(batch_size=500))
    run.up()
    found = run.prediction_differences(migration)
    assert found and not any(d["beyond_tolerance"] for d in found), found
    entry = mongo.db.mongopat_changelog.find_one({"_id": migration.id})
    stored = sorted(len(bson.encode(doc)) for doc in mongo.db.readings.find())
    assert entry["measured"]["readings"]["data_bytes"] == sum(stored)
    assert entry["measured"]["readings"]["documents"] == len(stored) < 1200
    assert entry["measured_before"]["readings"]["documents"] == 1200


def test_a_report_alone_predicts_documents_and_says_why_not_bytes(tmp_path):
    folder = write_scenario(SCENARIOS["ecommerce"](), tmp_path)
    report = analyze(SourceSpec(dump=str(folder / "shop")))
    result = recommend(report, str(folder / "access.yaml"))
    documents_steps = [r for r in result["recommendations"] if r["migration"] and r["code"] in ("MP104", "MP102")]
    assert documents_steps
    for rec in documents_steps:
        predicted = rec["prediction"]["collections"][0]
        assert predicted["after"] == {"documents": predicted["before"]["documents"]}
        assert "run recommend on the data" in predicted["basis"]
    shutil.rmtree(folder)
