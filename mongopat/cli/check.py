"""``mongopat check``: the CI gate."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from mongopat import command
from mongopat.cli.app import app
from mongopat.cli.errors import run
from mongopat.cli.options import (
    AccessOption,
    CheckFormatOption,
    CollectionOption,
    DirOption,
    QuietOption,
    reads_source,
)
from mongopat.cli.output import (
    State,
    apply_output_flags,
    json_text,
    write_text,
)
from mongopat.sources import SourceSpec


@app.command(
    epilog=(
        "Examples:\n\n"
        "  mongopat check --dump ./export --access access.yaml --snapshot schema.json\n\n"
        "  mongopat check --uri mongodb://ci@db/shop --dir migrations --format sarif -o mongopat.sarif\n\n"
        "  mongopat check --report report.json --fail-on warning --format junit -o mongopat.xml\n\n"
        "  mongopat check --dump ./export --write-snapshot schema.json"
    )
)
@reads_source()
def check(
    source: SourceSpec,
    collection: CollectionOption = None,
    report: Annotated[
        str | None, typer.Option("--report", metavar="FILE", help="A saved report instead of a source.")
    ] = None,
    access: AccessOption = None,
    config: Annotated[
        str | None, typer.Option("--config", help="Check configuration (default: ./mongopat.yaml if present).")
    ] = None,
    dir: DirOption = None,
    snapshot: Annotated[
        str | None, typer.Option("--snapshot", help="Compare with this committed schema snapshot.")
    ] = None,
    write_snapshot: Annotated[
        str | None, typer.Option("--write-snapshot", help="Record the analysed shape to this file.")
    ] = None,
    fail_on: Annotated[
        str, typer.Option("--fail-on", help="Lowest severity that fails: info, warning or error.")
    ] = "error",
    threshold: Annotated[
        list[str] | None, typer.Option("--threshold", "-t", help="Override a rule threshold: RULE.KEY=NUMBER.")
    ] = None,
    format: CheckFormatOption = "table",
    output: Annotated[
        str | None,
        typer.Option("--output", "-o", metavar="FILE", help="Write the output to this file instead of stdout."),
    ] = None,
    quiet: QuietOption = False,
) -> None:
    """The CI gate: exit 0 when all is well, 1 when a finding reaches --fail-on, 2 on usage or input errors."""
    from mongopat.check.formats import to_json, to_junit, to_sarif
    from mongopat.render.check import print_check
    from mongopat.render.progress import collection_bars

    apply_output_flags(quiet, False)

    def body() -> int:
        spec = source
        progress, start = collection_bars(State.progress_console())
        arguments = (spec, report, access, config, dir, snapshot, write_snapshot, fail_on,
                     command.parse_threshold_options(threshold or []), collection)  # fmt: skip
        if progress is None:
            result = command.check(*arguments)
        else:
            with progress:
                result = command.check(*arguments, progress=start)
        if format == "table":
            print_check(result, State.stdout())
            return 0 if result["ok"] else 1
        if format == "json":
            text = json_text(to_json(result))
        elif format == "junit":
            text = to_junit(result)
        else:
            text = json_text(to_sarif(result))
        if output:
            write_text(output, text)
        else:
            sys.stdout.write(text)
        return 0 if result["ok"] else 1

    run(body, source.uri)
