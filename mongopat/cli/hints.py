"""What to run next, printed after a command (on stderr, silenced by ``--quiet``): each hint a command that
runs as printed, naming the source and folder only where the project file (``mongopat.yaml``) does not."""

from __future__ import annotations

import shlex

from mongopat.cli.output import State
from mongopat.sources import SourceSpec


def source_flags(spec: SourceSpec) -> str:
    """The flags that name ``spec`` again: none where the project file names it."""
    from mongopat.project import current
    from mongopat.redact import redact_uri

    project = current()
    if project.names_source(spec.uri, spec.dump):
        return "" if not spec.db or spec.db == project.db else f" --db {shlex.quote(spec.db)}"
    if spec.dump:
        flags = f" --dump {shlex.quote(spec.dump)}"
    elif spec.uri:
        flags = f" --uri {shlex.quote(redact_uri(spec.uri))}"
    else:
        return ""
    return flags + (f" --db {shlex.quote(spec.db)}" if spec.db else "")


def folder_flag(folder: str) -> str:
    """``--dir FOLDER``, or nothing where it is the folder the project file (or the default) gives."""
    from mongopat.project import current

    return "" if current().names_folder(folder) else f" --dir {shlex.quote(folder)}"


def access_flag(access: str | None) -> str:
    """``--access FILE`` (``access`` or a placeholder), or nothing where the project file names the file."""
    from mongopat.project import current

    if current().names_access(access):
        return ""
    return f" --access {shlex.quote(access)}" if access else " --access FILE"


def hint(text: str) -> None:
    State.note(f"next: {text}")
