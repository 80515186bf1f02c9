"""``mongopat unpack`` and ``mongopat demo``: an archive as a folder, and the whole product on sample data."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mongopat import command
from mongopat.cli.app import app
from mongopat.cli.errors import run
from mongopat.cli.options import (
    DbOption,
    FormatOption,
)
from mongopat.cli.output import (
    State,
    emit_json,
)


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
    format: FormatOption = "table",
) -> None:
    """Write a mongodump archive out as the dump folder mongodump would have written, to run migrations on."""

    def body() -> int:
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


@app.command(
    epilog="Examples:\n\n  mongopat init --dump dump/sample_weatherdata --access access.yaml\n\n"
    "  mongopat init --uri mongodb://db.example.com/shop   (credentials: MONGOPAT_URI in the environment)"
)
def init(
    uri: Annotated[
        str | None, typer.Option("--uri", metavar="URI", help="The deployment, without credentials (MONGOPAT_URI).")
    ] = None,
    dump: Annotated[
        str | None, typer.Option("--dump", metavar="PATH", help="A dump folder or a mongodump --archive file.")
    ] = None,
    db: DbOption = None,
    dir: Annotated[str, typer.Option("--dir", metavar="FOLDER", help="The migrations folder.")] = "migrations",
    access: Annotated[
        str | None, typer.Option("--access", "-a", metavar="FILE", help="The access-pattern file.")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing mongopat.yaml.")] = False,
) -> None:
    """Write mongopat.yaml here: the source, migrations folder and access file every command then reads."""
    from mongopat.project import write_project

    def body() -> int:
        path = write_project(Path.cwd(), uri, dump, db, dir, access, force)
        State.say(f"wrote {path}")
        State.say("next: mongopat recommend   (then migrate plan, migrate up: no --uri, --dump or --dir needed)")
        return 0

    run(body)
