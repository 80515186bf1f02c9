"""The one error ladder of the command line: every expected failure a message on standard error (secrets
masked) and its exit code (1 a failure, 2 an input error, 130 interrupted); anything else a bug."""

from __future__ import annotations

import sys
from collections.abc import Callable

import typer

from mongopat.cli.output import (
    State,
)
from mongopat.errors import MongopatError, SourceError


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
