"""The ``mongopat`` command line: a thin typer layer over :mod:`mongopat.command`, one module per command
group (``analyze``, ``recommend``, ``access``, ``check``, ``tools``, ``migrate``); the options several
commands share are declared once in :mod:`mongopat.cli.options`, how results are printed is
:mod:`mongopat.cli.output`, and every failure goes through :mod:`mongopat.cli.errors`.

Exit codes: 0 ok, 1 findings or a failed operation, 2 usage or input error.

Commands import what they use when they run: each command loads only its own modules, and a migration on
a dump folder starts without rich's tables, the analysis or pymongo.
"""

from __future__ import annotations

import os
import sys

# Importing a command group's module adds its commands to the app, in the order --help lists them.
# isort: off
from mongopat.cli import analyze, recommend, access, check, tools, migrate  # noqa: F401

# isort: on
from mongopat.cli.app import app
from mongopat.cli.output import State
from mongopat.errors import EXIT_FINDINGS, EXIT_USAGE, MongopatError
from mongopat.heap import keep_headroom

__all__ = ["app", "main"]


def main() -> None:
    keep_headroom()
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
