"""Errors that reach the user as one clear line and a documented exit code.

Exit codes: 0 ok, 1 findings or a failed operation, 2 usage or input error.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


class MongopatError(Exception):
    """An error the CLI prints without a traceback."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __reduce__(self):  # keep the hint when raised in a worker process
        return (_rebuild, (type(self), self.message, self.hint))

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class InputError(MongopatError):
    """Bad input: a file, an option, a value the user gave."""


class SourceError(MongopatError):
    """The data source cannot be reached or read (server down, auth, permissions, unreadable dump)."""


class OperationFailed(MongopatError):
    """An operation ran and failed; exit 1."""

    exit_code = EXIT_FINDINGS


def _rebuild(cls: type[MongopatError], message: str, hint: str | None) -> MongopatError:
    return cls(message, hint=hint)
