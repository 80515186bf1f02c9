"""Command-line conventions a newcomer relies on: documented flags accepted where the README says, the same
options on every command that reads data, tables for people."""

from __future__ import annotations

import yaml
from typer.testing import CliRunner

from mongopat.cli import app
from tests.support.paths import SAMPLE_CONFIGS

runner = CliRunner()
IOT = SAMPLE_CONFIGS / "iot" / "iot"


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


def test_output_writes_the_result_instead_of_printing_it(tmp_path):
    """``-o FILE`` puts the output in the file (markdown with ``-f markdown``, else the JSON the next command
    reads) and prints only where it went."""
    import json

    cases = [
        (["analyze", "--dump", str(IOT)], "report.json", "report_version"),
        (["recommend", "--dump", str(IOT)], "recs.json", "recommendations_version"),
        (["recommend", "--dump", str(IOT), "-f", "json"], "recs2.json", "recommendations_version"),
    ]
    for args, name, key in cases:
        result = runner.invoke(app, [*args, "-o", str(tmp_path / name)])
        assert result.exit_code == 0, result.output
        assert result.stdout == "" and f"written to {tmp_path / name}" in result.stderr
        assert key in json.loads((tmp_path / name).read_text())
    markdown = runner.invoke(app, ["recommend", "--dump", str(IOT), "-f", "markdown", "-o", str(tmp_path / "a.md")])
    assert markdown.exit_code == 0 and markdown.stdout == ""
    assert (tmp_path / "a.md").read_text().startswith("## mongopat:")
    assert "save them with --format json -o recs.json" in markdown.stderr
