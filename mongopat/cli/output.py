"""How the command line prints: the output flags it keeps, standard output as printers use it, a command's
result in its ``--format``, JSON on standard output, the files it writes and the questions it asks.

rich is imported only when something is drawn with it: a scripted run (``migrate up`` in CI, a JSON
report) prints plain lines and never loads it.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mongopat.errors import MongopatError

if TYPE_CHECKING:
    from rich.console import Console


class State:
    """The output flags of this run (``--quiet``, ``--verbose``, ``--no-color``, before or after the
    subcommand) and the consoles made with them."""

    quiet = False
    verbose = False
    no_color = "NO_COLOR" in os.environ

    @classmethod
    def stdout(cls) -> Console:
        # A terminal gives its width; piped or captured output is 80 columns, the convention of terminal
        # tools, unless COLUMNS says otherwise (COLUMNS=200 mongopat ... > out.txt for wide tables).
        from rich.console import Console

        width = None if sys.stdout.isatty() else int(os.environ.get("COLUMNS", "80"))
        return Console(no_color=cls.no_color, highlight=False, soft_wrap=False, width=width)

    @classmethod
    def say(cls, text: str, style: str | None = None) -> None:
        """One line of plain text on stdout: through rich on a terminal (for the style), written as it is
        otherwise."""
        if sys.stdout.isatty():
            cls.stdout().print(text, markup=False, style=style)
        else:
            sys.stdout.write(text + "\n")

    @classmethod
    def stderr(cls) -> Console:
        from rich.console import Console

        return Console(stderr=True, no_color=cls.no_color, highlight=False)

    @classmethod
    def progress_console(cls) -> Console | None:
        """stderr's console for progress bars; None under --quiet, so that rich is not loaded for them."""
        return None if cls.quiet else cls.stderr()

    @classmethod
    def note(cls, text: str) -> None:
        """A line on stderr that ``--quiet`` silences (where a file went, what is being done)."""
        if not cls.quiet:
            cls.stderr().print(text, markup=False, soft_wrap=True)


def apply_output_flags(quiet: bool, verbose: bool) -> None:
    """--quiet/--verbose are accepted before and after the subcommand alike."""
    State.quiet = State.quiet or quiet
    State.verbose = (State.verbose or verbose) and not State.quiet


class Stdout:
    """Standard output as a printer receives it: ``say`` for a plain line, and rich's console (every
    other attribute) made only once a printer draws with it."""

    say = staticmethod(State.say)
    _console: Console | None = None  # made at the first drawing, then kept: a printer draws many times

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            self._console = State.stdout()
        return getattr(self._console, name)


def check_format(value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise MongopatError(f"unknown --format {value!r}", hint=f"one of {', '.join(allowed)}")


class Output:
    """A command's output: its ``--format`` checked before the command runs, then the result printed by
    the format's printer (``printers``: format name -> function of the result and :class:`Stdout`), or, for
    ``json``, the result's versioned shape (``as_json`` of it) on standard output."""

    def __init__(
        self, format: str, as_json: Callable[[Any], Any] | None = None, **printers: Callable[[Any, Any], None]
    ) -> None:
        check_format(format, (*printers, "json"))
        self.format, self.as_json, self.printers = format, as_json, printers

    @property
    def json(self) -> bool:
        return self.format == "json"

    def show(self, result: Any) -> None:
        if self.json:
            emit_json(result if self.as_json is None else self.as_json(result))
        else:
            self.printers[self.format](result, Stdout())


def json_default(value: Any) -> Any:
    """Dates as ISO-8601 UTC strings; other BSON values as relaxed Extended JSON."""
    from bson import json_util as bson_json

    if isinstance(value, datetime.datetime):
        return value.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return json.loads(bson_json.dumps(value, json_options=bson_json.RELAXED_JSON_OPTIONS))


def json_text(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, default=json_default) + "\n"


def emit_json(data: Any) -> None:
    sys.stdout.write(json_text(data))


def write_text(path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise MongopatError(f"cannot write {path}: {exc.strerror or exc}") from None
    State.note(f"written to {path}")


def confirm(question: str, yes: bool) -> bool:
    """Ask only on a terminal; --yes, or no terminal, never waits for input."""
    if yes or not sys.stdin.isatty():
        return True
    import typer

    return typer.confirm(question)
