"""``mongopat migrate stamp``: migrations recorded as applied without running, checked first, on both
backends (a database of the ``mongo`` fixture, a dump folder)."""

from __future__ import annotations

import json
import shutil

from typer.testing import CliRunner

from mongopat.cli import app
from tests.support.migrations import STEPS, write

runner = CliRunner()


def cli(*args: str) -> tuple[int, dict]:
    result = runner.invoke(app, ["migrate", *args, "-f", "json"])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, (json.loads(result.stdout) if result.stdout.strip().startswith(("{", "[")) else {})


def states(args: list[str], folder) -> dict[str, str]:
    code, rows = cli("status", *args, "--dir", str(folder))
    assert code == 0
    return {row["id"]: row["state"] for row in rows["migrations"]}


def test_stamp_refuses_while_documents_are_in_the_old_shape(target, tmp_path):
    args, contents = target.args, target.collections
    folder = write(tmp_path / "m", "0001_total", STEPS["computed"])
    before = contents()
    code, result = cli("stamp", "0001_total", *args, "--dir", str(folder))
    assert code == 1 and result["stamped"] == [] and "old shape" in result["refused"]
    [check] = result["checks"]
    assert check["type"] == "computed" and check["old_shape"] == 230
    assert states(args, folder) == {"0001_total": "pending"} and contents() == before


def test_stamp_records_data_already_migrated_by_hand(target, tmp_path):
    """Migrated by another tool (here: mongopat itself, in a folder the changelog then forgets)."""
    args, contents = target.args, target.collections
    first = write(tmp_path / "first", "0001_total", STEPS["computed"])
    assert runner.invoke(app, ["migrate", "up", *args, "--dir", str(first), "--yes", "-q"]).exit_code == 0
    assert cli("stamp", "base", *args, "--dir", str(first), "--yes")[0] == 0  # the changelog forgets it
    migrated = contents()
    folder = tmp_path / "m"
    shutil.copytree(first, folder)
    write(folder, "0002_index", STEPS["create_index"])
    code, result = cli("stamp", "0001_total", *args, "--dir", str(folder))
    assert code == 0 and result["stamped"] == ["0001_total"], result
    assert [c["old_shape"] for c in result["checks"]] == [0]
    assert states(args, folder) == {"0001_total": "applied", "0002_index": "pending"}
    assert contents() == migrated  # nothing ran
    up = runner.invoke(app, ["migrate", "up", *args, "--dir", str(folder), "--yes"])
    assert up.exit_code == 0 and "0002_index" in up.output and "0001_total" not in up.output, up.output
    assert states(args, folder) == {"0001_total": "applied", "0002_index": "applied"}


def test_stamp_force_records_anyway_and_says_so(target, tmp_path):
    args, contents = target.args, target.collections
    folder = write(tmp_path / "m", "0001_total", STEPS["computed"])
    before = contents()
    code, result = cli("stamp", "0001_total", *args, "--dir", str(folder), "--force")
    assert code == 0 and result["stamped"] == ["0001_total"] and result["checks"][0]["old_shape"] == 230
    assert states(args, folder) == {"0001_total": "applied"} and contents() == before


def test_stamp_base_forgets_and_leaves_the_data(target, tmp_path):
    args, contents = target.args, target.collections
    folder = write(tmp_path / "m", "0001_total", STEPS["computed"])
    assert runner.invoke(app, ["migrate", "up", *args, "--dir", str(folder), "--yes", "-q"]).exit_code == 0
    migrated = contents()
    code, result = cli("stamp", "base", *args, "--dir", str(folder), "--yes")
    assert code == 0 and result["forgotten"] == ["0001_total"] and result["backups_removed"] > 0
    assert contents() == migrated
    assert states(args, folder) == {"0001_total": "pending"}


def test_stamp_input_errors(target, tmp_path):
    args = target.args
    folder = write(tmp_path / "m", "0001_total", STEPS["computed"])
    result = runner.invoke(app, ["migrate", "stamp", "0009_nope", *args, "--dir", str(folder)])
    assert result.exit_code == 2 and "0009_nope" in result.output
