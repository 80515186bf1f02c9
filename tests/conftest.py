"""Shared fixtures. Every test that touches a database takes its client from ``mongo``, which runs it in two
lanes: ``mongomock`` (in process) and ``server`` (a real server over the wire: a SecantusDB process this
session starts on a free loopback port, or the deployment MONGOPAT_TEST_URI names). MONGOPAT_TEST_LANES
picks lanes (``mongomock``, ``server`` or both, comma-separated; default both).

Where an engine departs from MongoDB's documented behaviour, the test carries
``@pytest.mark.diverges(engine, reason)``: on that engine it is an expected failure (strict, so a fixed
engine is noticed; ``sometimes=True`` where the engine departs only in some runs, such as a race with its
journal), on the others it runs as usual. The reason is a one-line reproduction. The README's
conformance table lists every one.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support.backend import MongoTarget, Server, engine_of
from tests.support.server import ServerProcess, daemon_path, environment_flag
from tests.support.targets import KINDS, Target, make_target

REAL_SERVER_URI = os.environ.get("MONGOPAT_TEST_URI")
LANES = [lane.strip() for lane in os.environ.get("MONGOPAT_TEST_LANES", "mongomock,server").split(",") if lane.strip()]
# CI sets it: a server lane that cannot start fails the run instead of being skipped.
REQUIRE_SERVER = environment_flag("MONGOPAT_REQUIRE_SERVER")
# Only the tests that take a database (CI runs the server lane so, beside a full run on mongomock).
DATABASE_TESTS_ONLY = environment_flag("MONGOPAT_DATABASE_TESTS_ONLY")
ENGINES = ("mongomock", "secantusdb", "mongodb")


def pytest_configure(config: Any) -> None:
    config.addinivalue_line(
        "markers", "diverges(engine, reason): the engine departs from MongoDB here; expected to fail on it"
    )
    config.addinivalue_line("markers", "server_only(reason): needs a real server (processes, threads, the wire)")
    unknown = set(LANES) - {"mongomock", "server"}
    if unknown:
        raise pytest.UsageError(f"MONGOPAT_TEST_LANES: unknown lane(s) {sorted(unknown)}; use mongomock, server")


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    if not DATABASE_TESTS_ONLY:
        return
    kept = [item for item in items if "mongo" in getattr(item, "fixturenames", ())]
    chosen = set(map(id, kept))
    config.hook.pytest_deselected(items=[item for item in items if id(item) not in chosen])
    items[:] = kept


@pytest.fixture(scope="session")
def real_server(tmp_path_factory: Any) -> Any:
    """The server lane's deployment, started on first use and stopped when the session ends."""
    import pymongo

    if REAL_SERVER_URI:
        with pymongo.MongoClient(REAL_SERVER_URI, serverSelectionTimeoutMS=5000) as client:
            yield Server(REAL_SERVER_URI, engine_of(client), None)
        return
    program = daemon_path()
    if program is None:
        message = "the server lane needs SecantusDB (pip install -e '.[test]') or MONGOPAT_TEST_URI"
        if REQUIRE_SERVER:
            pytest.fail(message)
        pytest.skip(message)
    process = ServerProcess(tmp_path_factory.mktemp("server"), program)
    process.start()
    try:
        yield Server(process.uri, "secantusdb", process)
    finally:
        process.stop()


def apply_divergences(request: Any, engine: str) -> None:
    for marker in request.node.iter_markers("diverges"):
        marked, reason = marker.args
        assert marked in ENGINES, f"diverges: unknown engine {marked!r}"
        if marked == engine:
            strict = not marker.kwargs.get("sometimes", False)
            request.applymarker(pytest.mark.xfail(reason=f"{engine}: {reason}", strict=strict))


@pytest.fixture(params=LANES)
def mongo(request: Any) -> Any:
    name = f"mongopat_test_{uuid.uuid4().hex[:10]}"
    if request.param == "server":
        import pymongo

        server = request.getfixturevalue("real_server")
        client = pymongo.MongoClient(server.uri, serverSelectionTimeoutMS=5000)
        target = MongoTarget(client, server.uri, name, real=True, engine=server.engine, server=server.process)
    else:
        for marker in request.node.iter_markers("server_only"):
            pytest.skip(f"server lane only: {marker.args[0]}")
        from mongopat.sources.mongo import mongomock_client

        client = mongomock_client("tests")
        target = MongoTarget(client, "mongomock://tests", name, real=False)
    apply_divergences(request, target.engine)
    yield target
    try:
        client.drop_database(name)
    finally:
        if target.real:
            client.close()


@pytest.fixture(params=KINDS)
def target(request: Any, mongo: MongoTarget, tmp_path: Path) -> Target:
    """The shop dataset in a database of ``mongo`` and in a dump folder: a migration command on each."""
    return make_target(request.param, mongo, tmp_path)
