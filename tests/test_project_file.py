"""The project file (``mongopat.yaml``): ``mongopat init`` writes it, every command takes its source,
migrations folder and access file from it, a flag still wins, and a bad file is an input error."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from mongopat.cli import app
from mongopat.project import load_project
from tests.support.dumps import make_dump
from tests.support.migrations import STEPS, write

runner = CliRunner()


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A folder holding the shop dataset as a dump folder, a migration, and a project file naming both."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MONGOPAT_URI", raising=False)
    make_dump(tmp_path / "data")
    write(tmp_path / "m", "0001_total", STEPS["computed"])
    result = runner.invoke(app, ["init", "--dump", "data/shop", "--dir", "m"])
    assert result.exit_code == 0, result.output
    return tmp_path


def test_init_writes_the_file_and_the_next_command(project):
    assert load_project(project).dump == str(project / "data" / "shop")
    assert load_project(project).migrations == str(project / "m")
    assert "next: mongopat recommend" in runner.invoke(app, ["init", "--dump", "x", "--force"]).output


def test_migrate_up_status_and_down_need_no_flags(project):
    result = runner.invoke(app, ["migrate", "status", "-f", "json"])
    assert result.exit_code == 0, result.output
    assert [row["state"] for row in json.loads(result.stdout)["migrations"]] == ["pending"]
    assert runner.invoke(app, ["migrate", "up", "-y", "-q"]).exit_code == 0
    rows = json.loads(runner.invoke(app, ["migrate", "status", "-f", "json"]).stdout)["migrations"]
    assert [row["state"] for row in rows] == ["applied"]
    assert (project / "data" / "shop" / "mongopat_changelog.json").exists() or any(
        p.name.startswith("mongopat_") for p in (project / "data" / "shop").iterdir()
    )
    assert runner.invoke(app, ["migrate", "down", "-y", "-q"]).exit_code == 0


def test_a_flag_wins_over_the_file(project, tmp_path_factory):
    other = make_dump(tmp_path_factory.mktemp("other"))
    assert runner.invoke(app, ["migrate", "up", "--dump", str(other), "-y", "-q"]).exit_code == 0
    here = json.loads(runner.invoke(app, ["migrate", "status", "-f", "json"]).stdout)["migrations"]
    there = json.loads(runner.invoke(app, ["migrate", "status", "--dump", str(other), "-f", "json"]).stdout)
    assert [row["state"] for row in here] == ["pending"]
    assert [row["state"] for row in there["migrations"]] == ["applied"]


def test_init_refuses_to_overwrite_and_to_store_credentials(project):
    again = runner.invoke(app, ["init", "--dump", "data/shop"])
    assert again.exit_code == 2 and "exists" in again.output
    secret = runner.invoke(app, ["init", "--uri", "mongodb://u:hunter2@db.example.com/shop", "--force"])
    assert secret.exit_code == 2 and "credentials" in secret.output and "hunter2" not in secret.output


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("version: 1\nmigration: m\n", "mongopat.yaml:2:1: (top).migration: unknown key (did you mean 'migrations'?)"),
        ("version: 1\nsource: {uri: 'mongodb://u:pw@h/db'}\n", "keep credentials out of the project file"),
        ("version: 2\n", "unsupported version"),
        ("version: 1\nsource: {dump: a, uri: 'mongodb://h/db'}\n", "give uri or dump, not both"),
    ],
)
def test_a_bad_project_file_is_an_input_error_with_its_line(tmp_path, monkeypatch, text, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mongopat.yaml").write_text(text)
    result = runner.invoke(app, ["migrate", "status"])
    assert result.exit_code == 2, result.output
    assert message in result.output and "pw@" not in result.output


def test_check_reads_its_configuration_beside_the_project_keys(project):
    path = project / "mongopat.yaml"
    path.write_text(path.read_text() + "thresholds: {MP201: {warn_length: 500}}\n")
    result = runner.invoke(app, ["check", "-f", "json", "-q"])
    assert result.exit_code in (0, 1), result.output
    assert json.loads(result.stdout)["check_version"] == 1
