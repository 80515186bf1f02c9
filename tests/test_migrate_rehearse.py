"""``mongopat migrate rehearse``: a dress rehearsal on a sample in scratch that never writes to the source,
on a database of the ``mongo`` fixture (scratch databases on the same deployment) and on a dump folder
(a temporary folder)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from mongopat.cli import app
from tests.support.migrations import STEPS, load, write

runner = CliRunner()
STEP_NAMES = ("computed", "extended_reference", "tree", "pre_aggregation", "bucket", "create_index")


def rehearse(*args: str) -> tuple[int, dict, str]:
    result = runner.invoke(app, ["migrate", "rehearse", *args, "-f", "json", "-q"])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    text = result.stdout.strip()
    return result.exit_code, (json.loads(text) if text.startswith("{") else {}), result.output


def test_a_rehearsal_on_a_sample_passes_and_leaves_the_source_as_it_was(target, tmp_path):
    args, state, databases = target.args, target.state, target.databases
    folder = write(tmp_path / "m", "0001_m", *(STEPS[name] for name in STEP_NAMES))
    before, dbs = state(), databases()
    code, result, output = rehearse(*args, "--dir", str(folder), "--sample", "50")
    assert code == 0, output
    assert result["ok"] and result["failures"] == [] and result["difference_count"] == 0
    copied = {c["collection"]: c for c in result["copied"]}
    assert copied["orders"] == {"collection": "orders", "copied": 50, "total": 230}
    # The customers the sampled orders reference, and the deals of the sampled accounts, came along.
    assert 0 < copied["customers"]["copied"] <= 12 and copied["deals"]["copied"] > 0
    [entry] = result["migrations"]
    assert entry["read"] > 0 and entry["written"] > 0 and entry["verify"] == []
    assert entry["backup_bytes"] > 0
    # The create_index step's index (its name: see test_conformance, mongomock keeps a name of None).
    assert "orders" in {i["collection"] for i in entry["index_builds"]}
    estimate = entry["estimate"]
    assert "50 of 230 documents of orders" in estimate["basis"] or "of 900 documents of readings" in estimate["basis"]
    assert estimate["read"] >= entry["read"]
    assert state() == before, "the source changed"
    assert databases() == dbs, "a scratch database was left behind"


class Irreversible:
    """A Python migration whose down does not undo its up."""

    text = '''"""Sets a flag and forgets it."""


def up(db):
    db.orders.update_many({}, {"$set": {"flagged": True}})


def down(db):
    pass
'''


def test_a_rehearsal_finds_what_down_does_not_restore(target, tmp_path):
    args, state = target.args, target.state
    if args[0] == "--dump":
        pytest.skip("Python migrations run on servers")
    folder = write(tmp_path / "m", "0001_m", STEPS["computed"])
    (folder / "0002_flag.py").write_text(Irreversible.text)
    before = state()
    code, result, output = rehearse(*args, "--dir", str(folder), "--sample", "40")
    assert code == 1, output
    assert not result["ok"] and result["difference_count"] == 40
    assert {d["kind"] for d in result["differences"]} == {"bytes differ"}
    assert any("difference(s) between the copy" in f for f in result["failures"])
    assert state() == before


def test_the_guide_is_checked_with_an_access_file(tmp_path):
    demo = tmp_path / "demo"  # the demo's dump folder, access file and planned migrations, then undone
    assert runner.invoke(app, ["demo", str(demo)]).exit_code == 0
    data, access, migrations = demo / "demo", demo / "access.yaml", demo / "migrations"
    undo = runner.invoke(app, ["migrate", "down", "--dump", str(data), "--dir", str(migrations), "--to", "base", "-y"])
    assert undo.exit_code == 0, undo.output
    code, result, output = rehearse(
        "--dump", str(data), "--dir", str(migrations), "--access", str(access), "--sample", "200",
        "0003_computed_orders", "0009_timeseries_readings",
    )  # fmt: skip
    assert code == 0, output
    for entry in result["migrations"]:
        assert entry["guide"]["reads_compared"] > 0 and entry["guide"]["differences"] == []


def test_rehearsal_input_errors(mongo, tmp_path):
    load(mongo.db)
    folder = write(tmp_path / "m", "0001_m", STEPS["computed"])
    code, _result, output = rehearse(*mongo.cli_args(), "--dir", str(folder), "0009_nope")
    assert code == 2 and "0009_nope" in output
    mongo.client[f"{mongo.db_name}_mongopat_rehearsal"].kept.insert_one({"_id": 1})
    try:
        code, _result, output = rehearse(*mongo.cli_args(), "--dir", str(folder))
        assert code == 2 and "exists already" in output
    finally:
        mongo.client.drop_database(f"{mongo.db_name}_mongopat_rehearsal")
    code, _result, output = rehearse(*mongo.cli_args(), "--dir", str(tmp_path / "none"))
    assert code == 2 and "no migrations" in output
