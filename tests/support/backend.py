"""The database a test runs on, as the ``mongo`` fixture gives it: which lane, which engine, how the CLI
reaches it, and a second client for a writer of its own."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.server import ServerProcess

# On SecantusDB the interleaving harnesses run their first seed only: it scans a collection per conditional
# write (the README's conformance table), and the application writes before each of mongopat's calls.
SECANTUS_ONLINE_SEEDS = int(os.environ.get("MONGOPAT_SECANTUS_ONLINE_SEEDS", "1"))


@dataclass
class MongoTarget:
    """A test's database: ``real`` on the server lane; ``engine`` is mongomock, secantusdb or mongodb; the
    database (``db_name``) is new for the test and dropped after it."""

    client: Any
    uri: str
    db_name: str
    real: bool
    engine: str = "mongomock"
    server: ServerProcess | None = None  # the process this session started, to kill and restart

    @property
    def db(self) -> Any:
        return self.client[self.db_name]

    def cli_args(self) -> list[str]:
        return ["--uri", self.uri, "--db", self.db_name]

    def new_client(self) -> Any:
        """A client of its own (its own connections), for a second writer."""
        import pymongo

        return pymongo.MongoClient(self.uri, serverSelectionTimeoutMS=5000)


@dataclass
class Server:
    """The server lane's deployment: a SecantusDB process this session started, or MONGOPAT_TEST_URI's."""

    uri: str
    engine: str
    process: ServerProcess | None


def engine_of(client: Any) -> str:
    return "secantusdb" if "secantusVersion" in client.admin.command("buildInfo") else "mongodb"


def first_seeds_only(mongo: MongoTarget, seed: int) -> None:
    """Skip ``seed`` beyond :data:`SECANTUS_ONLINE_SEEDS` on SecantusDB (every seed runs elsewhere)."""
    if mongo.engine == "secantusdb" and seed > SECANTUS_ONLINE_SEEDS:
        pytest.skip(f"seed {seed}: SecantusDB runs {SECANTUS_ONLINE_SEEDS} (MONGOPAT_SECANTUS_ONLINE_SEEDS)")
