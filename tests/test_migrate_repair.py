"""``mongopat migrate repair``: an applied migration's edited file accepted, with what changed shown, on
both backends; refused when its steps changed (the data was migrated by the old ones) unless --force."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from mongopat.cli import app
from tests.support.migrations import STEPS, write

runner = CliRunner()


@pytest.fixture
def applied(target, tmp_path):
    """(CLI arguments, migrations folder) with 0001_total applied, on a database and on a dump folder."""
    args = target.args
    folder = write(tmp_path / "m", "0001_total", STEPS["computed"])
    assert runner.invoke(app, ["migrate", "up", *args, "--dir", str(folder), "--yes", "-q"]).exit_code == 0
    return args, folder


def cli(*args: str) -> tuple[int, dict]:
    result = runner.invoke(app, ["migrate", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    text = result.stdout.strip()
    return result.exit_code, (json.loads(text) if text.startswith("{") else {"output": result.output})


def states(args, folder) -> dict[str, dict]:
    code, result = cli("status", *args, "--dir", str(folder), "-f", "json")
    return {row["id"]: row for row in result["migrations"]}


def test_nothing_to_repair_when_the_file_is_the_one_applied(applied):
    args, folder = applied
    code, result = cli("repair", "0001_total", *args, "--dir", str(folder), "-f", "json")
    assert code == 0 and result["changed"] is False and result["repaired"] is False


def test_a_reworded_file_is_shown_and_recorded_and_up_runs_again(applied):
    args, folder = applied
    path = folder / "0001_total.yaml"
    path.write_text(path.read_text().replace("description:", "# reviewed by the team\ndescription:", 1))
    assert states(args, folder)["0001_total"]["edited"] is True
    code, result = cli("repair", "0001_total", *args, "--dir", str(folder), "--yes", "-f", "json")
    assert code == 0 and result["repaired"] and result["steps_changed"] is False
    assert "+# reviewed by the team" in result["diff"] and "(applied)" in result["diff"]
    assert states(args, folder)["0001_total"]["edited"] is False
    assert runner.invoke(app, ["migrate", "up", *args, "--dir", str(folder), "--yes"]).exit_code == 0


def test_changed_steps_are_refused_unless_forced(applied):
    args, folder = applied
    path = folder / "0001_total.yaml"
    path.write_text(path.read_text().replace("field: total", "field: grand_total"))
    code, result = cli("repair", "0001_total", *args, "--dir", str(folder), "--yes", "-f", "json")
    assert code == 1 and not result["repaired"] and result["steps_changed"]
    assert "migrated by the old ones" in result["refused"] and "grand_total" in result["diff"]
    assert states(args, folder)["0001_total"]["edited"] is True
    code, result = cli("repair", "0001_total", *args, "--dir", str(folder), "--yes", "--force", "-f", "json")
    assert code == 0 and result["repaired"]
    assert states(args, folder)["0001_total"]["edited"] is False


def test_the_table_shows_the_diff(applied):
    args, folder = applied
    path = folder / "0001_total.yaml"
    path.write_text(path.read_text().replace("field: total", "field: grand_total"))
    result = runner.invoke(app, ["migrate", "repair", "0001_total", *args, "--dir", str(folder)])
    assert result.exit_code == 1
    assert "-" in result.output and "grand_total" in result.output and "--force" in result.output


def test_only_an_applied_migration_is_repaired(applied, tmp_path):
    args, folder = applied
    write(folder, "0002_index", STEPS["create_index"])
    code, result = cli("repair", "0002_index", *args, "--dir", str(folder))
    assert code == 2 and "not applied" in result["output"]
    code, result = cli("repair", "0009_nope", *args, "--dir", str(folder))
    assert code == 2 and "0009_nope" in result["output"]
