"""``mongopat migrate``: versioned migrations, planned, written, run, checked and explained."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from mongopat import command
from mongopat.cli.app import app
from mongopat.cli.errors import run
from mongopat.cli.hints import access_flag, folder_flag, hint, source_flags
from mongopat.cli.options import (
    AccessOption,
    BatchOption,
    DbOption,
    DirOption,
    FormatOption,
    GuideFormatOption,
    LockTimeoutOption,
    QuietOption,
    VerboseOption,
    YesOption,
    migrates,
    reads_source,
)
from mongopat.cli.output import (
    Output,
    State,
    Stdout,
    apply_output_flags,
    confirm,
    emit_json,
    write_text,
)
from mongopat.cli.progress import step_bars
from mongopat.errors import MongopatError
from mongopat.render import migrations as printed
from mongopat.sources import SourceSpec

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
    dir: DirOption = None,
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
    dir: DirOption = None,
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
    dir: DirOption = None,
    format: FormatOption = "table",
) -> None:
    """Applied, pending, failed and edited-after-apply migrations."""

    def body() -> int:
        output = Output(format, as_json=lambda rows: {"migrations": rows}, table=printed.print_status)
        rows = command.migrate_status(target, dir)
        output.show(rows)
        if any(row.get("state") == "pending" for row in rows):
            hint(f"mongopat migrate up{source_flags(target)}{folder_flag(dir)}")
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
    dir: DirOption = None,
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
            help="On a server: threads over disjoint _id ranges for document steps (default 1; a step the "
            "server computes: stretches it works on at once, by default one per shard holding chunks of a "
            "collection sharded on _id). On a dump folder: processes rewriting one large file, each a part of "
            "it (default: CPUs, max 4).",
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
        with step_bars(options):
            results = command.migrate_up(target, dir, to, options)
        output.show(results)
        if not dry_run and any(result.get("state") == "applied" for result in results):
            where = f"{source_flags(target)}{folder_flag(dir)}"
            guide = f"mongopat migrate guide{where}{access_flag(None)}"
            hint(f"mongopat migrate verify{where}; '{guide}' shows what the application must change")
        return 0

    run(body, target.uri)


@migrate_app.command(
    "down",
    epilog="Examples:\n\n  mongopat migrate down --yes\n\n  mongopat migrate down --to base --yes",
)
@migrates()
def migrate_down(
    target: SourceSpec,
    dir: DirOption = None,
    to: Annotated[
        str | None, typer.Option("--to", metavar="NAME", help="Revert every migration after this id; base: all.")
    ] = None,
    batch_size: BatchOption = 1000,
    lock_timeout: LockTimeoutOption = 30.0,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be reverted; change nothing.")] = False,
    format: FormatOption = "table",
    yes: YesOption = False,
    quiet: QuietOption = False,
) -> None:
    """Revert the last applied migration (or every one after --to), restoring the original documents."""
    apply_output_flags(quiet, False)

    def body() -> int:
        from mongopat.migrate.runner import RunOptions

        if dry_run:
            planned = command.migrate_down_plan(target, dir, to)
            Output(format, as_json=lambda p: {"down_version": 1, "dry_run": True, "would_revert": p},
                   table=printed.print_down_plan).show(planned)  # fmt: skip
            return 0
        what = "every migration" if to == "base" else f"every migration after {to}" if to else "the last migration"
        if not confirm(f"Revert {what}?", yes):
            return 1
        with step_bars(RunOptions(batch_size=batch_size, lock_timeout=lock_timeout)) as options:
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
    dir: DirOption = None,
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
    dir: DirOption = None,
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
    dir: DirOption = None,
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
    dir: DirOption = None,
    access: AccessOption = None,
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
    dir: DirOption = None,
    access: AccessOption = None,
    report: Annotated[
        str | None, typer.Option("--report", metavar="FILE", help="A saved report instead of a source.")
    ] = None,
    every: Annotated[bool, typer.Option("--all", help="Every migration, applied ones too.")] = False,
    format: GuideFormatOption = "markdown",
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
