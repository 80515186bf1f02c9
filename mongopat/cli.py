"""The ``mongopat`` command line: a thin typer layer over :mod:`mongopat.command`.

Exit codes: 0 ok, 1 findings or a failed operation, 2 usage or input error.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mongopat import __version__, command
from mongopat.cli_options import (
    BatchOption,
    CollectionOption,
    DbOption,
    DirOption,
    FormatOption,
    HtmlOption,
    LockTimeoutOption,
    QuietOption,
    ShowValuesOption,
    VerboseOption,
    YesOption,
    migrates,
    reads_source,
)
from mongopat.cli_output import (
    Output,
    State,
    Stdout,
    apply_output_flags,
    check_format,
    confirm,
    emit_json,
    json_text,
    write_text,
)
from mongopat.errors import EXIT_FINDINGS, EXIT_USAGE, InputError, MongopatError, SourceError
from mongopat.render import migrations as printed
from mongopat.sources import SourceSpec

if TYPE_CHECKING:
    from mongopat.analysis.collection import AnalyzeOptions
    from mongopat.migrate.runner import RunOptions

# Commands import what they use when they run: each command loads only its own modules, and a migration on
# a dump folder starts without rich's tables, the analysis or pymongo.

app = typer.Typer(
    name="mongopat",
    help=(
        "Schema advisor and migration tool for MongoDB.\n\n"
        "Examples:\n\n"
        "  mongopat analyze --dump ./export\n\n"
        "  mongopat analyze --uri mongodb://localhost:27017/shop --format json --output report.json"
    ),
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"mongopat {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Print only results and errors: no progress, no notes.")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Print notes on how each figure was obtained.")
    ] = False,
    no_color: Annotated[bool, typer.Option("--no-color", help="No colours (NO_COLOR is honoured too).")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    State.quiet = quiet
    State.verbose = verbose and not quiet
    State.no_color = State.no_color or no_color


def fail(error: MongopatError, uri: str | None = None) -> typer.Exit:
    """Print the error (the URI's secrets masked, whoever wrote the message) and the exit to give."""
    from mongopat.redact import scrub

    console = State.stderr()
    console.print("[bold red]error:[/] ", markup=True, end="")
    console.print(scrub(error.message, uri), markup=False, highlight=False, soft_wrap=True)
    if error.hint:
        console.print(f"  hint: {scrub(error.hint, uri)}", markup=False, highlight=False, soft_wrap=True)
    return typer.Exit(error.exit_code)


def run(action: Callable[[], int | None], uri: str | None = None) -> None:
    """Run a command body; turn every expected failure into a message and its exit code."""
    try:
        code = action()
    except MongopatError as error:
        raise fail(error, uri) from None
    except KeyboardInterrupt:
        State.stderr().print("interrupted")
        raise typer.Exit(130) from None
    except OSError as error:  # the file system refused: read-only, full, no permission, a file gone
        raise fail(_file_error(error)) from None
    except Exception as error:
        driver_error = _driver_error(error, uri)
        if driver_error is None:
            raise
        raise fail(driver_error, uri) from None
    if code:
        raise typer.Exit(code)


def _file_error(error: OSError) -> MongopatError:
    where = error.filename if error.filename is not None else "a file"
    return SourceError(
        f"{where}: {error.strerror or error}",
        hint="what was done before it stands (a migration resumes where it stopped): fix the cause, run again",
    )


def _driver_error(error: Exception, uri: str | None) -> MongopatError | None:
    """A pymongo error as a one-line message (None for anything else). pymongo is only in memory when a
    command connected to a server, so there is nothing to import when it is not."""
    if "pymongo" not in sys.modules:
        return None
    from pymongo.errors import PyMongoError

    from mongopat.sources.mongo import describe_error

    return describe_error(error, uri) if isinstance(error, PyMongoError) else None


def analyze_with_progress(spec: SourceSpec, collections: list[str] | None, options: AnalyzeOptions) -> dict[str, Any]:
    from mongopat.render.progress import collection_bars

    progress, start = collection_bars(State.progress_console())
    if progress is None:
        return command.analyze(spec, collections, options)
    with progress:
        return command.analyze(spec, collections, options, start)


@contextlib.contextmanager
def _step_bars(options: RunOptions) -> Iterator[RunOptions]:
    """``options`` with a progress bar per migration step while the run lasts, on a terminal."""
    from mongopat.render.progress import step_bars

    display = step_bars(options, State.progress_console())
    try:
        yield options
    finally:
        if display is not None:
            display.stop()


# -- commands ------------------------------------------------------------------------------------


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
        check_format(format, ("table", "json"))
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
        return 0

    run(body, source.uri)


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
    access: Annotated[
        str | None,
        typer.Option("--access", "-a", metavar="FILE", help="Access-pattern YAML: what the application does."),
    ] = None,
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
    format: Annotated[
        str, typer.Option("--format", "-f", metavar="table|json|markdown", help="table, json or markdown.")
    ] = "table",
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
        check_format(format, ("table", "json", "markdown"))
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
            State.note(f"next: {first}mongopat migrate plan --from {saved} --dir migrations (one file per migration)")
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


access_app = typer.Typer(help="Access-pattern files: draft one from what the deployment records.", no_args_is_help=True)
app.add_typer(access_app, name="access")


@access_app.command(
    "draft",
    epilog=(
        "Examples:\n\n"
        "  mongopat access draft --log /var/log/mongodb/mongod.log --db shop > access.yaml\n\n"
        "  mongopat access draft --uri mongodb://monitor@db1/shop --top-interval 30 -o access.yaml\n\n"
        "  mongopat access draft --dump ./export --log mongod.log.gz --format json"
    ),
)
@reads_source()
def access_draft(
    source: SourceSpec,
    log: Annotated[
        list[str] | None, typer.Option("--log", "-l", help="MongoDB JSON log file (plain or gzip); repeatable.")
    ] = None,
    top_interval: Annotated[
        float, typer.Option("--top-interval", help="Seconds between the two 'top' readings.", min=0.1)
    ] = 10.0,
    sample: Annotated[
        int | None, typer.Option("--sample", metavar="N", help="Documents to read per collection for insert rates.")
    ] = None,
    output: Annotated[
        str | None, typer.Option("--output", "-o", metavar="FILE", help="Write the YAML here instead of stdout.")
    ] = None,
    collection: CollectionOption = None,
    format: Annotated[
        str,
        typer.Option(
            "--format", "-f", metavar="yaml|json", help="yaml (the file) or json (the file and the evidence)."
        ),
    ] = "yaml",
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Draft an access-pattern file from logs, top, $queryStats, the profiler and the collections (reads only)."""
    from mongopat.draft.render import print_summary, to_json, to_yaml
    from mongopat.render.progress import byte_bar

    apply_output_flags(quiet, verbose)

    def body() -> int:
        check_format(format, ("yaml", "json"))
        console = State.stderr()
        total = sum(os.path.getsize(p) for p in log or [] if os.path.exists(p))
        progress, update = byte_bar(State.progress_console() if log else None, "reading logs", total)
        with progress or contextlib.nullcontext():
            draft = command.draft_access(source, log, top_interval, sample, update if progress else None, collection)
        text = to_yaml(draft)
        if output:
            write_text(output, text)
        if format == "json":
            emit_json(to_json(draft))
        elif not output:
            sys.stdout.write(text)
        if not State.quiet:
            print_summary(draft, console)
        if not draft.has_evidence():
            tried = "; ".join(f"{s.name}: {s.detail}" for s in draft.statuses)
            console.print(
                f"error: no source gave evidence ({tried}). Enable one: profiling (db.setProfilingLevel(1)), "
                "$queryStats (MongoDB 7.1+, queryStatsRead), the 'top' command (clusterMonitor), or pass --log "
                "mongod.log",
                markup=False,
                soft_wrap=True,
            )
            return 1
        return 0

    run(body, source.uri)


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
    access: Annotated[
        str | None, typer.Option("--access", "-a", metavar="FILE", help="Access-pattern file (its check: section too).")
    ] = None,
    config: Annotated[
        str | None, typer.Option("--config", help="Check configuration (default: ./mongopat.yaml if present).")
    ] = None,
    dir: DirOption = "migrations",
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
    format: Annotated[
        str, typer.Option("--format", "-f", metavar="table|json|junit|sarif", help="table, json, junit or sarif.")
    ] = "table",
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
        check_format(format, ("table", "json", "junit", "sarif"))
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


@app.command(
    epilog="Examples:\n\n  mongopat unpack sample_weatherdata.archive.gz --to dump\n\n"
    "  mongopat migrate up --dump dump/sample_weatherdata --dir migrations"
)
def unpack(
    archive: Annotated[str, typer.Argument(help="A mongodump --archive file (plain or --gzip).")],
    to: Annotated[
        str, typer.Option("--to", metavar="NAME", help="Folder to write <database>/<collection>.bson into.")
    ] = "dump",
    db: DbOption = None,
    format: Annotated[str, typer.Option("--format", "-f", metavar="table|json", help="table or json.")] = "table",
) -> None:
    """Write a mongodump archive out as the dump folder mongodump would have written, to run migrations on."""

    def body() -> int:
        check_format(format, ("table", "json"))
        result = command.unpack(archive, to, db)
        if format == "json":
            emit_json(result)
            return 0
        for unpacked in result["databases"]:
            documents = sum(unpacked["collections"].values())
            State.say(
                f"unpacked {len(unpacked['collections'])} collection(s), {documents:,} document(s) into "
                f"{unpacked['folder']}"
            )
            for note in unpacked["notes"]:
                State.say(f"  note: {note}")
            State.say(
                f"next: mongopat recommend --dump {unpacked['folder']} (migrate up, status and rehearse run on it too)"
            )
        return 0

    run(body)


@app.command(epilog="Examples:\n\n  mongopat demo\n\n  mongopat demo /tmp/mongopat-demo")
def demo(
    folder: Annotated[
        str, typer.Argument(help="A new or empty folder for the dataset, migrations and reports.")
    ] = "mongopat-demo",
) -> None:
    """Write a realistic dataset and run analyze, recommend, plan, up, verify and check on it (no server needed)."""
    from mongopat.demo import run_demo

    def body() -> int:
        console = State.stdout()
        return run_demo(
            Path(folder),
            # Never broken across lines: a command the demo prints, alone or in a sentence, runs as copied.
            lambda text: console.print(text, markup=False, highlight=False, soft_wrap=True),
            lambda text: console.print(f"$ {text}", markup=False, style="bold cyan", soft_wrap=True),
        )

    run(body)


PLAN_SAMPLE = 1000  # documents per collection transformed by 'migrate plan --uri'

migrate_app = typer.Typer(
    help="Versioned migrations: plan them from recommendations, write them by hand.", no_args_is_help=True
)
app.add_typer(migrate_app, name="migrate")


@migrate_app.command(
    "plan",
    epilog=(
        "Examples:\n\n"
        "  mongopat recommend --dump ./export --access access.yaml -f json -o recs.json\n\n"
        "  mongopat migrate plan --from recs.json\n\n"
        "  mongopat migrate plan --from recs.json --only MP101 --only orders --dry-run\n\n"
        "  mongopat migrate plan --from recs.json --uri mongodb://... --db shop --add-validators"
    ),
)
def migrate_plan(
    from_: Annotated[
        str, typer.Option("--from", metavar="FILE", help="Recommendations from 'mongopat recommend --format json'.")
    ],
    dir: DirOption = "migrations",
    only: Annotated[
        list[str] | None, typer.Option("--only", help="Rule code, pattern or collection to plan (repeatable).")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would be written; write nothing.")] = False,
    uri: Annotated[
        str | None,
        typer.Option(
            "--uri", envvar="MONGOPAT_URI", help="Check the steps against this target (shard keys, validators)."
        ),
    ] = None,
    db: DbOption = None,
    add_validators: Annotated[
        bool,
        typer.Option(
            "--add-validators",
            help="End each shape change with a validator step for the new shape (moderate, warn); needs --uri.",
        ),
    ] = False,
    format: FormatOption = "table",
    yes: YesOption = False,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Write one migration file per recommendation that carries a migration, for review and commit.

    With --uri, each step is checked against the target (shard keys, validators) and a sample of its
    collection transformed as the step would: a step that would leave documents failing the collection's
    validator is warned about."""
    apply_output_flags(quiet, verbose)

    def body() -> int:
        output = Output(format, table=printed.print_plan)

        target = SourceSpec(uri=uri, db=db) if uri else None
        asked = lambda count: confirm(f"Write {count} migration file(s) to {dir}?", yes)  # noqa: E731
        result = command.migrate_plan(from_, dir, only, dry_run, target, add_validators, asked)
        if result is None:
            return 1
        if not output.json:
            for warning in result["warnings"]:
                State.stderr().print(f"warning: {warning}", markup=False, style="yellow")
        output.show(result)
        return 1 if result["refused"] else 0

    run(body, uri)


@migrate_app.command(
    "new",
    epilog=(
        "Examples:\n\n"
        "  mongopat migrate new bucket_readings --pattern bucket -c readings -p series_key=sensorId -p time_field=ts"
    ),
)
def migrate_new(
    name: Annotated[str, typer.Argument(help="What the migration does, in a few words.")],
    pattern: Annotated[
        str, typer.Option("--pattern", help="Step type: a pattern (bucket, subset...) or a generic step.")
    ],
    collection: Annotated[str, typer.Option("--collection", "-c", help="The collection it changes.")],
    param: Annotated[
        list[str] | None, typer.Option("--param", "-p", help="A step parameter: KEY=VALUE (VALUE is YAML).")
    ] = None,
    dir: DirOption = "migrations",
) -> None:
    """Write a new migration file with one step, parameters to fill in where not given."""

    def body() -> int:
        State.say(f"wrote {command.migrate_new(dir, name, pattern, collection, param)}")
        return 0

    run(body)


@migrate_app.command(
    "status",
    epilog=(
        "Examples:\n\n  mongopat migrate status --uri mongodb://localhost/shop\n\n"
        "  mongopat migrate status --dump ./export --dir migrations -f json"
    ),
)
@migrates()
def migrate_status(
    target: SourceSpec,
    dir: DirOption = "migrations",
    format: FormatOption = "table",
) -> None:
    """Applied, pending, failed and edited-after-apply migrations."""

    def body() -> int:
        output = Output(format, as_json=lambda rows: {"migrations": rows}, table=printed.print_status)
        output.show(command.migrate_status(target, dir))
        return 0

    run(body, target.uri)


@migrate_app.command(
    "up",
    epilog=(
        "Examples:\n\n  mongopat migrate up --uri mongodb://localhost/shop --dry-run\n\n"
        "  mongopat migrate up --to 0003_bucket_readings --yes"
    ),
)
@migrates()
def migrate_up(
    target: SourceSpec,
    dir: DirOption = "migrations",
    to: Annotated[
        str | None, typer.Option("--to", metavar="NAME", help="Apply up to and including this migration id.")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Counts and before/after samples; writes nothing.")
    ] = False,
    batch_size: BatchOption = 1000,
    lock_timeout: LockTimeoutOption = 30.0,
    max_docs_per_sec: Annotated[
        float | None, typer.Option("--max-docs-per-sec", help="Throttle: documents per second at most.", min=1)
    ] = None,
    max_lag: Annotated[
        float | None,
        typer.Option("--max-lag", help="Pause while a secondary lags by more than this many seconds.", min=0),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            help="On a server: threads over disjoint _id ranges for document steps (default 1). On a dump "
            "folder: processes bucketing one large JSON file (default: CPUs, max 4).",
            min=1,
        ),
    ] = None,
    client_side: Annotated[
        bool,
        typer.Option(
            "--client-side",
            help="On a server: transform every document in mongopat, even for steps the server can compute "
            "itself (set, unset and rename of fields, schema versioning, polymorphic, approximation).",
        ),
    ] = False,
    write_concern: Annotated[
        str, typer.Option("--write-concern", help="'majority' (default) or a number of members that must acknowledge.")
    ] = "majority",
    yes: YesOption = False,
    format: FormatOption = "table",
    quiet: QuietOption = False,
) -> None:
    """Apply pending migrations in order, in batches, resuming an interrupted one."""
    apply_output_flags(quiet, False)

    def body() -> int:
        import json

        from bson import json_util as bson_json

        from mongopat.migrate.runner import RunOptions

        output = Output(
            format,
            as_json=lambda results: {"dry_run": dry_run, "migrations": json.loads(bson_json.dumps(results))},
            table=printed.print_up,
        )
        options = RunOptions(
            batch_size=batch_size,
            lock_timeout=lock_timeout,
            dry_run=dry_run,
            max_docs_per_sec=max_docs_per_sec,
            max_lag=max_lag,
            workers=workers,
            client_side=client_side,
            write_concern=write_concern,
        )
        command.check_run_options(options)  # before anything is asked or read
        if not dry_run:
            pending, old_shape = command.pending_work(target, dir)
            if not pending and not old_shape:
                State.say("nothing to apply")
                return 0
            question = f"Apply {len(pending)} migration(s) ({', '.join(pending)})?" if pending else ""
            if old_shape:
                question += f" Migrate {old_shape:,} document(s) written in the old shape since their migration ran?"
            if not confirm(question.strip(), yes):
                return 1
        with _step_bars(options):
            results = command.migrate_up(target, dir, to, options)
        output.show(results)
        return 0

    run(body, target.uri)


@migrate_app.command(
    "down",
    epilog="Examples:\n\n  mongopat migrate down --yes\n\n  mongopat migrate down --to base --yes",
)
@migrates()
def migrate_down(
    target: SourceSpec,
    dir: DirOption = "migrations",
    to: Annotated[
        str | None, typer.Option("--to", metavar="NAME", help="Revert every migration after this id; base: all.")
    ] = None,
    batch_size: BatchOption = 1000,
    lock_timeout: LockTimeoutOption = 30.0,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be reverted; change nothing.")] = False,
    format: Annotated[str, typer.Option("--format", "-f", metavar="table|json", help="table or json.")] = "table",
    yes: YesOption = False,
    quiet: QuietOption = False,
) -> None:
    """Revert the last applied migration (or every one after --to), restoring the original documents."""
    apply_output_flags(quiet, False)

    def body() -> int:
        from mongopat.migrate.runner import RunOptions

        check_format(format, ("table", "json"))
        if dry_run:
            planned = command.migrate_down_plan(target, dir, to)
            Output(format, as_json=lambda p: {"down_version": 1, "dry_run": True, "would_revert": p},
                   table=printed.print_down_plan).show(planned)  # fmt: skip
            return 0
        what = "every migration" if to == "base" else f"every migration after {to}" if to else "the last migration"
        if not confirm(f"Revert {what}?", yes):
            return 1
        with _step_bars(RunOptions(batch_size=batch_size, lock_timeout=lock_timeout)) as options:
            reverted = command.migrate_down(target, dir, to, options)
        Output(format, as_json=lambda r: {"down_version": 1, "dry_run": False, "reverted": r},
               table=printed.print_down).show(reverted)  # fmt: skip
        return 0

    run(body, target.uri)


@migrate_app.command(
    "verify",
    epilog=(
        "Examples:\n\n  mongopat migrate verify --uri mongodb://localhost/shop\n\n"
        "  mongopat migrate verify 0003_bucket_readings --dump ./export"
    ),
)
@migrates()
def migrate_verify(
    target: SourceSpec,
    migration_id: Annotated[str | None, typer.Argument(help="One migration id; default: every applied one.")] = None,
    dir: DirOption = "migrations",
    format: FormatOption = "table",
) -> None:
    """Re-check applied migrations: no document lost, the new shape holds. Exit 1 on any problem."""

    def body() -> int:
        output = Output(
            format,
            as_json=lambda shown: {
                "migrations": [
                    {"id": k, "ok": not v, "problems": v, "prediction": shown[1].get(k, [])}
                    for k, v in shown[0].items()
                ]
            },
            table=lambda shown, out: (printed.print_verify(shown[0], out), printed.print_predictions(shown[1], out)),
        )
        results = command.migrate_verify(target, dir, migration_id)
        output.show((results, command.migrate_predictions(target, dir, migration_id)))
        return 1 if any(results.values()) else 0

    run(body, target.uri)


@migrate_app.command(
    "stamp",
    epilog=(
        "Examples:\n\n  mongopat migrate stamp 0003_bucket_readings --uri mongodb://localhost/shop\n\n"
        "  mongopat migrate stamp base --dump ./export --yes"
    ),
)
@migrates()
def migrate_stamp(
    target: SourceSpec,
    migration_id: Annotated[str, typer.Argument(help="Record up to and including this id; base: forget all.")],
    dir: DirOption = "migrations",
    force: Annotated[
        bool, typer.Option("--force", help="Record even though documents are still in the old shape.")
    ] = False,
    yes: YesOption = False,
    format: FormatOption = "table",
) -> None:
    """Record migrations as applied without running them, for data already in their shape (checked first:
    exit 1 with the documents each step finds in the old shape). 'stamp base' forgets every one."""

    def body() -> int:
        output = Output(format, table=printed.print_stamp)
        if migration_id == "base" and not confirm(
            "Forget every applied migration (and what mongopat kept for their down)? The data stays as it is.", yes
        ):
            return 1
        result = command.migrate_stamp(target, dir, migration_id, force)
        output.show(result)
        return 1 if result.get("refused") else 0

    run(body, target.uri)


@migrate_app.command(
    "repair",
    epilog=(
        "Examples:\n\n  mongopat migrate repair 0003_bucket_readings --uri mongodb://localhost/shop\n\n"
        "  mongopat migrate repair 0003_bucket_readings --dump ./export --yes"
    ),
)
@migrates()
def migrate_repair(
    target: SourceSpec,
    migration_id: Annotated[str, typer.Argument(help="The applied migration whose file was edited.")],
    dir: DirOption = "migrations",
    force: Annotated[bool, typer.Option("--force", help="Record the file even though its steps changed.")] = False,
    yes: YesOption = False,
    format: FormatOption = "table",
) -> None:
    """Accept an edit of an applied migration's file: show what changed against the applied version and
    record the new checksum. Exit 1 when refused (its steps changed; --force records it anyway)."""

    def accepted(result: dict[str, Any]) -> bool:  # asked with the diff in view
        if format != "json" and result.get("diff"):
            State.stdout().print(result["diff"], markup=False, highlight=False, end="")
        return confirm(f"Record the edited {migration_id} as applied?", yes)

    def body() -> int:
        output = Output(format, table=printed.print_repair)
        result = command.migrate_repair(target, dir, migration_id, force, accepted)
        output.show(result)
        return 1 if result.get("refused") else 0

    run(body, target.uri)


@migrate_app.command(
    "rehearse",
    epilog=(
        "Examples:\n\n  mongopat migrate rehearse --uri mongodb://localhost/shop --access access.yaml\n\n"
        "  mongopat migrate rehearse 0003_bucket_readings --dump ./export --sample 2000 -f json\n\n"
        '  mongopat migrate rehearse --uri "$PROD" --scratch-uri mongodb://staging/ --access access.yaml'
    ),
)
@migrates()
def migrate_rehearse(
    target: SourceSpec,
    ids: Annotated[list[str] | None, typer.Argument(help="Migration ids; default: the pending ones.")] = None,
    dir: DirOption = "migrations",
    access: Annotated[
        str | None,
        typer.Option("--access", "-a", metavar="FILE", help="Access-pattern file: the guide is checked too."),
    ] = None,
    sample: Annotated[
        int, typer.Option("--sample", metavar="N", help="Documents copied per collection.", min=1)
    ] = 10_000,
    scratch_uri: Annotated[
        str | None,
        typer.Option("--scratch-uri", help="Rehearse on this deployment (default: the source's, scratch databases)."),
    ] = None,
    format: FormatOption = "table",
    quiet: QuietOption = False,
) -> None:
    """A dress rehearsal that never writes to the source: a sample copied into scratch, up, verify, the
    guide's check (--access), down --to base, compared byte for byte. Exit 1 on any difference."""
    apply_output_flags(quiet, False)

    def step(message: str) -> None:  # progress on stderr: stdout stays the report
        if not State.quiet:
            State.stderr().print(message, markup=False)

    def body() -> int:
        output = Output(format, table=printed.print_rehearsal)
        result = command.migrate_rehearse(target, dir, ids, access, sample, scratch_uri, step)
        output.show(result)
        return 0 if result["ok"] else 1

    run(body, target.uri)


@migrate_app.command(
    "unlock",
    epilog=(
        "Examples:\n\n  mongopat migrate unlock --uri mongodb://localhost/shop\n\n"
        "  mongopat migrate unlock --dump ./export --force --yes"
    ),
)
@migrates()
def migrate_unlock(
    target: SourceSpec,
    force: Annotated[
        bool, typer.Option("--force", help="Release a live lease too (its run may still be writing).")
    ] = False,
    yes: YesOption = False,
    format: FormatOption = "table",
) -> None:
    """Show who holds the migration lock; release it once its lease has expired (--force: a live one).
    Exit 0 when the lock is free or released, 1 when it stays held."""

    def released(seen: dict[str, Any]) -> bool:
        if yes:
            return True
        if not sys.stdin.isatty():
            raise MongopatError("--force on a live lease needs confirmation: add --yes (no terminal to ask on)")
        return typer.confirm(f"Release the live lease of {seen.get('host')} (pid {seen.get('pid')})?")

    def body() -> int:
        output = Output(format, table=printed.print_unlock)
        result = command.migrate_unlock(target, force, released)
        output.show(result)
        return 0 if result["state"] == "free" or result["released"] else 1

    run(body, target.uri)


@migrate_app.command(
    "guide",
    epilog=(
        "Examples:\n\n  mongopat migrate guide --dump ./export --access access.yaml\n\n"
        "  mongopat migrate guide 0003_bucket_readings --report report.json --access access.yaml -f json\n\n"
        "  mongopat migrate guide --all --report report.json --access access.yaml -o GUIDE.md\n\n"
        "  mongopat migrate guide --check --dump ./export --access access.yaml"
    ),
)
@reads_source()
def migrate_guide(
    source: SourceSpec,
    ids: Annotated[list[str] | None, typer.Argument(help="Migration ids; default: the pending ones.")] = None,
    dir: DirOption = "migrations",
    access: Annotated[
        str, typer.Option("--access", "-a", metavar="FILE", help="The access-pattern file: what the application does.")
    ] = "",
    report: Annotated[
        str | None, typer.Option("--report", metavar="FILE", help="A saved report instead of a source.")
    ] = None,
    every: Annotated[bool, typer.Option("--all", help="Every migration, applied ones too.")] = False,
    format: Annotated[
        str, typer.Option("--format", "-f", metavar="markdown|json", help="markdown or json.")
    ] = "markdown",
    output: Annotated[
        str | None,
        typer.Option("--output", "-o", metavar="FILE", help="Write the guide to this file instead of stdout."),
    ] = None,
    check_: Annotated[
        bool,
        typer.Option(
            "--check", help="Prove the guide on a dump folder migrated by 'migrate up --dump': exit 1 on a difference."
        ),
    ] = False,
    samples: Annotated[int, typer.Option("--samples", help="--check: documents sampled per read.", min=1)] = 5,
    scratch_uri: Annotated[
        str | None,
        typer.Option(
            "--scratch-uri",
            help="--check: prove on this server, in two scratch databases it creates and drops "
            "(default: the embedded engine, in memory).",
        ),
    ] = None,
    quiet: QuietOption = False,
) -> None:
    """What the application must change: every read and write of the access file rewritten for the new shape."""
    apply_output_flags(quiet, False)

    def body() -> int:
        check_format(format, ("markdown", "json"))
        if not access:
            raise MongopatError("--access is required: the guide rewrites the reads and writes it declares")
        if check_:
            result = command.migrate_guide_check(source, dir, access, ids, samples, scratch_uri=scratch_uri)
            if format == "json":
                emit_json(result)
            else:
                printed.print_guide_check(result, Stdout())
            return 0 if result["ok"] else 1
        from mongopat.render.progress import collection_bars

        progress, start = collection_bars(State.progress_console())
        if progress is None:
            document = command.migrate_guide(dir, access, source, report, ids, every)
        else:
            with progress:
                document = command.migrate_guide(dir, access, source, report, ids, every, start)
        if format == "json":
            from bson import json_util as bson_json

            # Relaxed Extended JSON, the form drivers accept: a date in a step's value stays a date.
            options = bson_json.RELAXED_JSON_OPTIONS
            text = bson_json.dumps(document, json_options=options, indent=2, ensure_ascii=False) + "\n"
        else:
            from mongopat.render.guide import guide_markdown

            text = guide_markdown(document)
            console = State.stdout()
            if not output and console.is_terminal:
                from rich.markdown import Markdown

                console.print(Markdown(text))
                return 0
        if output:
            write_text(output, text)
        else:
            sys.stdout.write(text)
        return 0

    run(body, source.uri)


def main() -> None:
    try:
        app()
    except MongopatError as error:  # raised outside a command body (should not happen, but never a traceback)
        State.stderr().print(f"error: {error.message}", markup=False)
        sys.exit(EXIT_USAGE)
    except Exception as error:  # a bug: one line for the user, the traceback only when asked for
        if os.environ.get("MONGOPAT_DEBUG"):
            raise
        State.stderr().print(
            f"internal error: {type(error).__name__}: {error} (set MONGOPAT_DEBUG=1 for the traceback)", markup=False
        )
        sys.exit(EXIT_FINDINGS)
