"""Index advice end to end: a station's history without its index and a redundant index are found in a dump
folder, planned as create_index and drop_index migrations, run up and down on both backends, and (on a
server) proven by the planner in a rehearsal: the read scans before and uses the advised index after."""

from __future__ import annotations

import datetime
import json
import shutil
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from mongopat import command
from mongopat.cli import app
from mongopat.migrate.script import load_folder
from mongopat.sources import SourceSpec
from tests.support.dumps import write_bson_dump
from tests.support.paths import SAMPLE_CONFIGS
from tests.support.scenarios import update_readings

runner = CliRunner()
START = datetime.datetime(2026, 1, 1)
ACCESS = """version: 1
collections:
  readings:
    writes: {inserts_per_sec: 0.1}
    queries:
      - {name: history, filter: {st: eq, ts: range}, sort: {ts: 1}, per_sec: 50}
      - {name: latest, filter: {st: eq}, sort: {ts: -1}, limit: 1, per_sec: 5}
"""
INDEXES = [
    {"key": {"_id": 1}, "name": "_id_"},
    {"key": {"st": 1}, "name": "st_1"},
    {"key": {"kind": 1}, "name": "kind_1"},
    {"key": {"kind": 1, "v": -1}, "name": "kind_1_v_-1"},
]


def readings(n: int = 12_000) -> list[dict[str, Any]]:
    """Six stations reporting in turn, a reading a minute in all (200 hours)."""
    return [
        {"_id": i, "st": f"s{i % 6}", "ts": START + datetime.timedelta(minutes=i), "kind": i % 3, "v": i % 97}
        for i in range(n)
    ]


def dump(tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "data" / "farm"
    write_bson_dump(data, "readings", readings(), INDEXES)
    access = tmp_path / "access.yaml"
    access.write_text(ACCESS, encoding="utf-8")
    return data, access


def recommended(source: SourceSpec, access: Path, out: Path) -> dict[str, Any]:
    report = command.analyze(source)
    result = command.recommend(report, str(access), source=source)
    out.write_text(json.dumps(result, default=str), encoding="utf-8")
    return result


def test_a_read_without_its_index_and_a_redundant_index_are_found(tmp_path):
    data, access = dump(tmp_path)
    result = recommended(SourceSpec(dump=str(data)), access, tmp_path / "rec.json")
    by_code = {rec["code"]: rec for rec in result["recommendations"]}
    missing, redundant = by_code["MP210"], by_code["MP211"]
    assert missing["migration"] == {
        "step": "create_index", "collection": "readings", "keys": {"st": 1, "ts": 1}, "name": "st_1_ts_1",
    }  # fmt: skip
    assert [read["read"] for read in missing["evidence"]["reads"]] == ["history", "latest"]
    assert missing["severity"] == "error"  # 50 reads/s of 2,000 documents each: 100,000 a second
    assert any("st_1 becomes a prefix" in t for t in missing["tradeoffs"])
    [history, latest] = missing["prediction"]["reads"]
    assert history["examined_before"] == 2000 and history["examined_after"] == 60  # an hour at 0.1/s of 1 station
    assert latest["examined_before"] == 2000 and latest["examined_after"] == 1
    assert redundant["migration"] == {"step": "drop_index", "collection": "readings", "name": "kind_1"}
    assert redundant["evidence"]["covered_by"] == "kind_1_v_-1"
    assert "MP205" not in by_code  # a dump records no usage


def test_the_plan_runs_up_and_down_on_a_dump_folder(tmp_path):
    data, access = dump(tmp_path)
    recommended(SourceSpec(dump=str(data)), access, tmp_path / "rec.json")
    folder = tmp_path / "migrations"
    command.migrate_plan(str(tmp_path / "rec.json"), str(folder), only=["MP210", "MP211"])
    assert sorted(step.name for m in load_folder(folder) for step in m.steps) == ["create_index", "drop_index"]
    before = (data / "readings.metadata.json").read_bytes()
    spec = SourceSpec(dump=str(data))
    command.migrate_up(spec, str(folder))
    names = [index["name"] for index in json.loads((data / "readings.metadata.json").read_text())["indexes"]]
    assert "st_1_ts_1" in names and "kind_1" not in names
    # Analysed again, the reads are served, and st_1 is now the prefix of the new index (as MP210 said).
    again = recommended(spec, access, tmp_path / "again.json")
    found = [(rec["code"], rec["evidence"].get("index")) for rec in again["recommendations"] if rec["code"] >= "MP210"]
    assert found == [("MP211", "st_1")]
    command.migrate_down(spec, str(folder), to="base")
    after_down = json.loads((data / "readings.metadata.json").read_text())["indexes"]
    assert sorted(i["name"] for i in after_down) == sorted(i["name"] for i in json.loads(before)["indexes"])


def load_server(mongo: Any) -> None:
    mongo.db.readings.insert_many(readings())
    for index in INDEXES[1:]:
        mongo.db.readings.create_index(list(index["key"].items()), name=index["name"])


def test_the_plan_runs_up_and_down_on_a_server(mongo, tmp_path):
    load_server(mongo)
    _, access = dump(tmp_path)
    source = SourceSpec(uri=mongo.uri, db=mongo.db_name)
    recommended(source, access, tmp_path / "rec.json")
    folder = tmp_path / "migrations"
    command.migrate_plan(str(tmp_path / "rec.json"), str(folder), only=["MP210", "MP211"])
    command.migrate_up(source, str(folder))
    names = {index["name"] for index in mongo.db.readings.list_indexes()}
    assert "st_1_ts_1" in names and "kind_1" not in names
    command.migrate_down(source, str(folder), to="base")
    assert {index["name"] for index in mongo.db.readings.list_indexes()} == {"_id_", *(i["name"] for i in INDEXES[1:])}


def test_check_fails_on_a_read_that_lost_its_index(tmp_path):
    data, access = dump(tmp_path)
    result = runner.invoke(
        app, ["check", "--dump", str(data), "--access", str(access), "--dir", str(tmp_path / "none")]
    )
    assert result.exit_code == 1, result.output
    assert "MP210" in result.output


def test_rehearsal_explains_each_read_before_and_after(mongo, tmp_path):
    """On a server the planner proves the advice: the read scans (or uses st_1 and sorts) before the
    migration and uses st_1_ts_1 after it, examining as many documents as it returns."""
    if not mongo.real:
        return  # mongomock has no query planner (conformance table)
    load_server(mongo)
    _, access = dump(tmp_path)
    source = SourceSpec(uri=mongo.uri, db=mongo.db_name)
    recommended(source, access, tmp_path / "rec.json")
    folder = tmp_path / "migrations"
    command.migrate_plan(str(tmp_path / "rec.json"), str(folder), only=["MP210"])
    result = command.migrate_rehearse(source, str(folder), access_path=str(access))
    [entry] = result["migrations"]
    explained = {read["read"]: read for read in entry["explain"]}
    assert set(explained) == {"history", "latest"}
    for read in explained.values():
        assert read["before"]["index"] in (None, "st_1")
        assert read["expected_index"] == {"name": "st_1_ts_1", "key": {"st": 1, "ts": 1}}
        if read["after"]["index"] == "st_1_ts_1":
            assert read["departure"] is None
        else:  # the server chose otherwise: the rehearsal says so (SecantusDB keeps st_1 for latest, see
            # test_conformance.test_the_planner_prefers_the_index_that_gives_the_sort)
            assert (
                read["departure"] == f"the server planned index {read['after']['index']}; mongopat expected st_1_ts_1"
            )
    history = explained["history"]
    assert history["after"]["index"] == "st_1_ts_1"
    assert history["after"]["docs_examined"] == history["after"]["returned"] < history["before"]["docs_examined"]
    if mongo.engine == "mongodb":
        assert explained["latest"]["after"]["docs_examined"] == 1
    assert result["ok"], result["failures"]


def test_a_pattern_plans_the_indexes_its_rewritten_reads_need(tmp_path):
    """The attribute pattern rewrites the catalogue search to match attributes.k and attributes.v: its
    migration ends with that index. Today's reads' own indexes stay the missing-index rule's."""
    folder = SAMPLE_CONFIGS / "ecommerce"
    data = next(p for p in folder.iterdir() if p.is_dir())
    result = recommended(SourceSpec(dump=str(data)), folder / "access.yaml", tmp_path / "rec.json")
    [attribute] = [rec for rec in result["recommendations"] if rec["code"] == "MP107"]
    [index] = attribute["index_steps"]
    assert index["step"] == "create_index" and {"attributes.k", "attributes.v"} <= set(index["keys"])
    computed = [rec for rec in result["recommendations"] if rec["code"] == "MP104"]
    assert computed and all(rec["index_steps"] == [] for rec in computed)  # same filter as today's read
    migrations = tmp_path / "migrations"
    command.migrate_plan(str(tmp_path / "rec.json"), str(migrations), only=["MP107"])
    [migration] = load_folder(migrations)
    assert [step.name for step in migration.steps][-1] == "create_index"


def test_an_index_a_pattern_supersedes_is_left_out_when_both_are_planned(tmp_path):
    """A time-series collection takes the readings, and the sensor range read goes to it: its index is
    created there, and the index for today's readings (MP210) is left out when both are planned. So with
    the bucket pattern (readings updated in place), whose buckets lack the fields today's index is on."""
    folder = SAMPLE_CONFIGS / "iot"
    data = next(p for p in folder.iterdir() if p.is_dir())
    result = recommended(SourceSpec(dump=str(data)), folder / "access.yaml", tmp_path / "ts.json")
    [missing] = [rec for rec in result["recommendations"] if rec["code"] == "MP210"]
    assert missing["evidence"]["superseded_by"] == ["MP113"] and missing["migration"]
    both = command.migrate_plan(str(tmp_path / "ts.json"), str(tmp_path / "ts"), only=["MP113", "MP210"])
    steps = [(step.name, step.collection) for m in load_folder(tmp_path / "ts") for step in m.steps]
    assert steps == [("timeseries", "readings"), ("create_index", "readings_ts")]
    assert any("MP210 on readings: not planned (MP113 is planned" in note for note in both["notes"])
    access = tmp_path / "access.yaml"
    shutil.copy(folder / "access.yaml", access)
    result = recommended(SourceSpec(dump=str(data)), update_readings(access), tmp_path / "rec.json")
    [missing] = [rec for rec in result["recommendations"] if rec["code"] == "MP210"]
    assert missing["evidence"]["superseded_by"] == ["MP101"] and missing["migration"]
    both = command.migrate_plan(str(tmp_path / "rec.json"), str(tmp_path / "both"), only=["MP101", "MP210"])
    assert [step.name for m in load_folder(tmp_path / "both") for step in m.steps] == ["bucket"]
    assert any("MP210 on readings: not planned (MP101 is planned" in note for note in both["notes"])
    command.migrate_plan(str(tmp_path / "rec.json"), str(tmp_path / "alone"), only=["MP210"])
    assert [step.name for m in load_folder(tmp_path / "alone") for step in m.steps] == ["create_index"]


def test_recommend_explain_gives_the_servers_plan_today(mongo, tmp_path):
    """``recommend --explain`` asks the server how it plans each read of an index finding today (planned,
    not run); a dump folder has no planner to ask (exit 2)."""
    load_server(mongo)
    data, access = dump(tmp_path)
    result = runner.invoke(
        app,
        [
            "recommend",
            *mongo.cli_args(),
            "--access",
            str(access),
            "--explain",
            "-f",
            "json",
            "-o",
            str(tmp_path / "r.json"),
        ],
    )
    assert result.exit_code == 0, result.output
    [missing] = [
        rec for rec in json.loads((tmp_path / "r.json").read_text())["recommendations"] if rec["code"] == "MP210"
    ]
    for read in missing["evidence"]["reads"]:
        plan = read["server_plan"]
        if mongo.real:
            assert plan["error"] is None and plan["index"] in (None, "st_1") and plan["stages"]
        else:
            assert plan["error"].startswith("explain failed")  # mongomock has no query planner
    refused = runner.invoke(app, ["recommend", "--dump", str(data), "--access", str(access), "--explain"])
    assert refused.exit_code == 2 and "--uri" in refused.output


def test_indexes_only_the_old_shape_used_are_dropped_with_the_pattern(tmp_path):
    """Bucketed, readings hold no top-level ts: the plain index on it goes with the bucket migration (and
    comes back with down); a TTL index on it is a person's decision."""
    from mongopat.sources.dump import read_json_documents

    folder = SAMPLE_CONFIGS / "iot"
    documents = list(read_json_documents(folder / "iot" / "readings.json"))
    data = tmp_path / "data" / "iot"
    indexes = [
        {"key": {"_id": 1}, "name": "_id_"},
        {"key": {"sensorId": 1, "ts": 1}, "name": "sensorId_1_ts_1"},
        {"key": {"ts": 1}, "name": "ts_ttl", "expireAfterSeconds": 86400 * 365},
    ]
    write_bson_dump(data, "readings", documents, indexes)
    write_bson_dump(data, "sensors", list(read_json_documents(folder / "iot" / "sensors.json")), indexes[:1])
    access = tmp_path / "access.yaml"
    shutil.copy(folder / "access.yaml", access)
    result = recommended(SourceSpec(dump=str(data)), update_readings(access), tmp_path / "rec.json")
    [bucket] = [rec for rec in result["recommendations"] if rec["code"] == "MP101"]
    assert bucket["index_steps"] == [{"step": "drop_index", "collection": "readings", "name": "sensorId_1_ts_1"}]
    assert not [rec for rec in result["recommendations"] if rec["code"] == "MP210"]  # served today
    migrations = tmp_path / "migrations"
    command.migrate_plan(str(tmp_path / "rec.json"), str(migrations), only=["MP101"])
    spec = SourceSpec(dump=str(data))
    before = (data / "readings.metadata.json").read_bytes()
    command.migrate_up(spec, str(migrations))
    names = [i["name"] for i in json.loads((data / "readings.metadata.json").read_text())["indexes"]]
    assert "sensorId_1_ts_1" not in names and "ts_ttl" in names
    command.migrate_down(spec, str(migrations), to="base")
    assert (data / "readings.metadata.json").read_bytes() == before
