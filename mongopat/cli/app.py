"""The ``mongopat`` typer application and its global options (``-q``, ``-v``, ``--no-color``, ``--version``);
each command group's module adds its commands to it."""

from __future__ import annotations

from typing import Annotated

import typer

from mongopat import __version__
from mongopat.cli.output import State

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
