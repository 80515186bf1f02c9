"""Where a migration command runs, for the tests that run one on both kinds of source: a database of the
``mongo`` fixture or a dump folder, each holding the shop dataset (``tests.support.migrations``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from mongopat.migrate.bookkeeping import Lock
from mongopat.migrate.dump_folder.files import FileLock
from tests.support.backend import MongoTarget
from tests.support.dumps import files, make_dump
from tests.support.migrations import load, snapshot

KINDS = ("database", "dump")


@dataclass(frozen=True)
class Target:
    kind: Literal["database", "dump"]
    args: list[str]  # the CLI options that name it: --uri and --db, or --dump
    collections: Callable[[], dict[str, Any]]  # its collections as bytes, mongopat's bookkeeping left out
    state: Callable[[], dict[str, Any]]  # all a read-only command must leave alone (a folder: every file)
    databases: Callable[[], set[str] | None]  # the deployment's databases; None for a dump folder
    lock: Callable[[], Lock | FileLock]  # a new handle on its migration lock


def every_file(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def make_target(kind: str, mongo: MongoTarget, tmp_path: Path) -> Target:
    """The shop dataset in a new database of ``mongo``, or (mongomock lane only: a folder needs no server)
    in a dump folder under ``tmp_path``."""
    if kind == "database":
        load(mongo.db)
        return Target(
            "database",
            mongo.cli_args(),
            lambda: snapshot(mongo.db),
            lambda: snapshot(mongo.db),
            lambda: set(mongo.client.list_database_names()),
            lambda: Lock(mongo.db, lease_seconds=60),
        )
    if mongo.real:
        pytest.skip("a dump folder needs no server: it runs in the mongomock lane")
    data = make_dump(tmp_path)
    return Target(
        "dump",
        ["--dump", str(data)],
        lambda: files(data),
        lambda: every_file(data),
        lambda: None,
        lambda: FileLock(data, lease_seconds=60),
    )
