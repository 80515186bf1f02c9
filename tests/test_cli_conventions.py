"""Command-line conventions a newcomer relies on: documented flags accepted where the README says, the same
options on every command that reads data, tables for people."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from mongopat.cli import app

runner = CliRunner()
IOT = Path(__file__).resolve().parent.parent / "sample_configs" / "iot" / "iot"


def test_no_color_is_accepted_after_every_command_that_reads_data(tmp_path):
    (tmp_path / "migrations").mkdir()
    for args in (
        ["analyze", "--dump", str(IOT), "--no-color"],
        ["recommend", "--dump", str(IOT), "--no-color"],
        ["migrate", "status", "--dump", str(IOT), "--dir", str(tmp_path / "migrations"), "--no-color"],
        ["--no-color", "migrate", "status", "--dump", str(IOT), "--dir", str(tmp_path / "migrations"), "--no-color"],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, (args, result.output)
        assert "\x1b[" not in result.output


def test_access_draft_takes_collections():
    result = runner.invoke(app, ["access", "draft", "--dump", str(IOT), "-c", "readings", "-q"])
    assert result.exit_code == 0, result.output
    drafted = yaml.safe_load(result.stdout)
    assert list(drafted["collections"]) == ["readings"]
