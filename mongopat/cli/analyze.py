"""``mongopat analyze``: measure collections."""

from __future__ import annotations

from typing import Annotated

import typer

from mongopat.cli.app import app
from mongopat.cli.errors import run
from mongopat.cli.hints import access_flag, hint, source_flags
from mongopat.cli.options import (
    CollectionOption,
    FormatOption,
    HtmlOption,
    QuietOption,
    ShowValuesOption,
    VerboseOption,
    reads_source,
)
from mongopat.cli.output import (
    State,
    apply_output_flags,
    emit_json,
    write_text,
)
from mongopat.cli.progress import analyze_with_progress
from mongopat.sources import SourceSpec


@app.command(
    epilog=(
        "Examples:\n\n"
        "  mongopat analyze --dump ./export\n\n"
        "  mongopat analyze --uri mongodb://user@host/shop -c orders --sample 5000\n\n"
        "  mongopat analyze --dump ./export --format json --output report.json"
    )
)
@reads_source(seed=True)
def analyze(
    source: SourceSpec,
    collection: CollectionOption = None,
    sample: Annotated[
        int | None,
        typer.Option(
            "--sample",
            metavar="N",
            help="Documents to read per collection (server default 1000 with $sample; dumps: all).",
        ),
    ] = None,
    full_scan: Annotated[
        bool, typer.Option("--full-scan", help="Read every document on a server instead of a $sample (heavier).")
    ] = False,
    distinct_limit: Annotated[
        int,
        typer.Option("--distinct-limit", help="Distinct values counted exactly per field before estimating.", min=100),
    ] = 10_000,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers", help="Processes reading one large dump file in parallel (default: CPUs, max 4).", min=1
        ),
    ] = None,
    output: Annotated[
        str | None,
        typer.Option(
            "--output", "-o", metavar="FILE", help="Write the JSON report to this file instead of printing the report."
        ),
    ] = None,
    html: HtmlOption = None,
    json_schema: Annotated[
        str | None,
        typer.Option("--json-schema", help="Write per collection a $jsonSchema validator (collMod) to this file."),
    ] = None,
    show_values: ShowValuesOption = False,
    format: FormatOption = "table",
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Sample collections and measure fields, types, arrays, sizes, insert rates, drift, references and indexes."""
    from mongopat.analysis.collection import AnalyzeOptions
    from mongopat.report import write_report

    apply_output_flags(quiet, verbose)

    def body() -> int:
        spec = source
        options = AnalyzeOptions(
            sample_size=sample, distinct_limit=distinct_limit, keep_example=show_values, full_scan=full_scan
        )
        if workers is not None:
            options.workers = workers
        report = analyze_with_progress(spec, collection, options)
        if output:
            write_report(report, output)
        if json_schema:
            from mongopat.validators import validators_document

            write_report(validators_document(report), json_schema)
        # Each output loads its own renderer: a JSON run (a CI job, a benchmark) never imports rich's tables.
        if html:
            from mongopat.render.html import render_html

            write_text(html, render_html(report, None, show_values))
        if output:  # the report is in the file: the terminal is told where, and nothing else
            State.note(f"report written to {output}")
        elif format == "json":
            emit_json(report)
        else:
            from mongopat.render.console import print_report

            print_report(report, State.stdout(), verbose=State.verbose)
            hint(
                f"mongopat recommend{source_flags(source)}{access_flag(None)} (the advice; an access file says "
                "what the application does: 'mongopat access draft' writes one)"
            )
        return 0

    run(body, source.uri)
