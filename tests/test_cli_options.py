"""The option groups of the command line: declared once, the same on every command that takes them."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from mongopat.cli import app
from mongopat.cli.options import migrates, reads_source
from mongopat.sources import SourceSpec


def test_a_command_gets_one_source_spec_from_the_group():
    seen = {}
    demo = typer.Typer()

    @demo.command()
    @reads_source(read_preference="primary", seed=True)
    def show(source: SourceSpec, limit: int = 3) -> None:
        seen.update(source=source, limit=limit)

    result = CliRunner().invoke(demo, ["--dump", "d", "--db", "x", "--seed", "7", "--limit", "5"])
    assert result.exit_code == 0, result.output
    assert seen["limit"] == 5
    assert seen["source"] == SourceSpec(
        uri=None, dump="d", db="x", timeout_ms=5000, max_time_ms=60000, read_preference="primary", seed=7
    )


def test_migration_commands_read_and_write_the_primary():
    seen = {}
    demo = typer.Typer()

    @demo.command()
    @migrates()
    def run(target: SourceSpec) -> None:
        seen["target"] = target

    assert CliRunner().invoke(demo, ["--uri", "mongodb://h/db", "--timeout-ms", "300"]).exit_code == 0
    assert seen["target"].read_preference == "primary" and seen["target"].timeout_ms == 300


def test_every_command_spells_the_shared_options_the_same_way():
    runner = CliRunner()
    helps = {
        name: " ".join(runner.invoke(app, [*name.split(), "--help"]).output.split())
        for name in ("analyze", "recommend", "check", "access draft", "migrate up", "migrate status")
    }
    for text in helps.values():
        assert "--timeout-ms" in text and "How long to wait for an unreachable server." in text
        assert "--dump" in text and "Folder of mongoexport .json and/or mongodump .bson files" in text
