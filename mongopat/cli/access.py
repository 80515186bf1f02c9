"""``mongopat access``: access-pattern files, drafted from what the deployment records."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Annotated

import typer

from mongopat import command
from mongopat.cli.app import app
from mongopat.cli.errors import run
from mongopat.cli.options import (
    CollectionOption,
    DraftFormatOption,
    QuietOption,
    VerboseOption,
    reads_source,
)
from mongopat.cli.output import (
    State,
    apply_output_flags,
    emit_json,
    write_text,
)
from mongopat.sources import SourceSpec

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
    format: DraftFormatOption = "yaml",
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Draft an access-pattern file from logs, top, $queryStats, the profiler and the collections (reads only)."""
    from mongopat.draft.render import print_summary, to_json, to_yaml
    from mongopat.render.progress import byte_bar

    apply_output_flags(quiet, verbose)

    def body() -> int:
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
