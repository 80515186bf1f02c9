"""``mongopat recommend`` and ``mongopat rules``: the advice, and the rules it comes from."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from mongopat import command
from mongopat.cli.app import app
from mongopat.cli.errors import run
from mongopat.cli.hints import folder_flag, hint
from mongopat.cli.options import (
    AccessOption,
    CollectionOption,
    FormatOption,
    HtmlOption,
    QuietOption,
    RecommendFormatOption,
    ShowValuesOption,
    VerboseOption,
    reads_source,
)
from mongopat.cli.output import (
    Output,
    State,
    apply_output_flags,
    emit_json,
    write_text,
)
from mongopat.cli.progress import analyze_with_progress
from mongopat.errors import InputError, MongopatError
from mongopat.sources import SourceSpec


@app.command(
    epilog=(
        "Examples:\n\n"
        "  mongopat recommend --dump ./export --access access.yaml\n\n"
        "  mongopat recommend --report report.json --access access.yaml --format markdown > advice.md\n\n"
        "  mongopat recommend --report report.json --threshold MP201.warn_length=500 --format json"
    )
)
@reads_source()
def recommend(
    source: SourceSpec,
    report: Annotated[
        str | None, typer.Option("--report", metavar="FILE", help="A report from 'mongopat analyze --output'.")
    ] = None,
    access: AccessOption = None,
    threshold: Annotated[
        list[str] | None, typer.Option("--threshold", "-t", help="Override a rule threshold: RULE.KEY=NUMBER.")
    ] = None,
    rule: Annotated[list[str] | None, typer.Option("--rule", "-r", help="Run only this rule (code or name).")] = None,
    collection: CollectionOption = None,
    sample: Annotated[
        int | None, typer.Option("--sample", metavar="N", help="Documents to read per collection.")
    ] = None,
    output: Annotated[
        str | None,
        typer.Option(
            "--output",
            "-o",
            metavar="FILE",
            help="Write the result to this file instead of printing it: markdown with -f markdown, else the JSON "
            "(what 'migrate plan --from' reads).",
        ),
    ] = None,
    html: HtmlOption = None,
    show_values: ShowValuesOption = False,
    format: RecommendFormatOption = "table",
    explain: Annotated[
        bool,
        typer.Option(
            "--explain",
            help="With --uri: ask the server's planner how it runs each read an index finding names, today "
            "(explain with queryPlanner: planned, not run).",
        ),
    ] = False,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Recommend design patterns and flag anti-patterns from measured evidence and declared access patterns."""
    from mongopat.analysis.collection import AnalyzeOptions
    from mongopat.render.html import render_html
    from mongopat.render.recommendations import print_recommendations, to_markdown
    from mongopat.report import load_report, write_report

    apply_output_flags(quiet, verbose)

    def body() -> int:
        if report and (source.uri or source.dump):
            raise MongopatError("give either --report or a source (--uri/--dump), not both")
        if report:
            data = load_report(report)
        else:
            spec = source
            data = analyze_with_progress(spec, collection, AnalyzeOptions(sample_size=sample, keep_example=show_values))
        if explain and not source.uri:
            raise InputError("--explain asks a server's planner: give --uri")
        result = command.recommend(
            data, access, command.parse_threshold_options(threshold or []), rule, None if report else source, explain
        )
        if html:
            write_text(html, render_html(data, result, show_values))
        as_json = bool(output) and format != "markdown"  # the file plan reads
        if output:  # the result is in the file: the terminal is told where, and nothing else
            if as_json:
                write_report(result, output)
            else:
                write_text(output, to_markdown(result))
            State.note(f"recommendations written to {output}")
        elif format == "json":
            emit_json(result)
        elif format == "markdown":
            sys.stdout.write(to_markdown(result))
        else:
            print_recommendations(result, State.stdout(), verbose=State.verbose)
        if any(rec.get("migration") for rec in result["recommendations"]):
            saved = output if as_json else "recs.json"
            first = "" if as_json else "save them with --format json -o recs.json, then "
            hint(f"{first}mongopat migrate plan --from {saved}{folder_flag('migrations')} (one file per migration)")
        return 0

    run(body, source.uri)


@app.command(
    name="rules", epilog="Examples:\n\n  mongopat rules\n\n  mongopat rules MP101\n\n  mongopat rules --format json"
)
def list_rules(
    rule: Annotated[str | None, typer.Argument(help="One rule, by code or name: its description in full.")] = None,
    format: FormatOption = "table",
) -> None:
    """List the detectors: code, name, kind and title; one rule with its thresholds and what it looks for."""

    from mongopat.render.rules import print_rule, print_rules

    def body() -> int:
        rules = command.list_rules()
        if rule is not None:
            rules = command.find_rules(rule)
        Output(format, as_json=lambda found: {"rules": found}, table=print_rule if rule else print_rules).show(rules)
        return 0

    run(body)
