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

import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bson
import pytest
from bson import json_util

from tests.server_process import ServerProcess, daemon_path, environment_flag

REAL_SERVER_URI = os.environ.get("MONGOPAT_TEST_URI")
LANES = [lane.strip() for lane in os.environ.get("MONGOPAT_TEST_LANES", "mongomock,server").split(",") if lane.strip()]
# CI sets it: a server lane that cannot start fails the run instead of being skipped.
REQUIRE_SERVER = environment_flag("MONGOPAT_REQUIRE_SERVER")
# Only the tests that take a database (CI runs the server lane so, beside a full run on mongomock).
DATABASE_TESTS_ONLY = environment_flag("MONGOPAT_DATABASE_TESTS_ONLY")
ENGINES = ("mongomock", "secantusdb", "mongodb")
# On SecantusDB the interleaving harnesses run their first seed only: it scans a collection per conditional
# write (the README's conformance table), and the application writes before each of mongopat's calls.
SECANTUS_ONLINE_SEEDS = int(os.environ.get("MONGOPAT_SECANTUS_ONLINE_SEEDS", "1"))


def first_seeds_only(mongo: MongoTarget, seed: int) -> None:
    """Skip ``seed`` beyond :data:`SECANTUS_ONLINE_SEEDS` on SecantusDB (every seed runs elsewhere)."""
    if mongo.engine == "secantusdb" and seed > SECANTUS_ONLINE_SEEDS:
        pytest.skip(f"seed {seed}: SecantusDB runs {SECANTUS_ONLINE_SEEDS} (MONGOPAT_SECANTUS_ONLINE_SEEDS)")


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


@dataclass
class MongoTarget:
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
    uri: str
    engine: str
    process: ServerProcess | None


def engine_of(client: Any) -> str:
    return "secantusdb" if "secantusVersion" in client.admin.command("buildInfo") else "mongodb"


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


def write_export(folder: Path, collection: str, documents: list[dict[str, Any]], canonical: bool = False) -> Path:
    """A mongoexport file: one Extended JSON document a line."""
    folder.mkdir(parents=True, exist_ok=True)
    options = json_util.CANONICAL_JSON_OPTIONS if canonical else json_util.RELAXED_JSON_OPTIONS
    path = folder / f"{collection}.json"
    with path.open("w", encoding="utf-8") as handle:
        for document in documents:
            handle.write(json_util.dumps(document, json_options=options) + "\n")
    return path


def write_bson_dump(
    folder: Path, collection: str, documents: list[dict[str, Any]], indexes: list[dict] | None = None
) -> Path:
    """A mongodump file, with its metadata.json when indexes are given."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{collection}.bson"
    with path.open("wb") as handle:
        for document in documents:
            handle.write(bson.encode(document))
    if indexes is not None:
        meta = {"indexes": [{"v": 2, **index} for index in indexes], "uuid": "", "collectionName": collection}
        (folder / f"{collection}.metadata.json").write_text(json_util.dumps(meta), encoding="utf-8")
    return path


def load_json(text: str) -> Any:
    return json.loads(text)


def write_archive(
    path: Path,
    collections: dict[tuple[str, str], list[dict[str, Any]]],
    compress: bool = False,
    block: int = 3,
    indexes: dict[tuple[str, str], list[dict]] | None = None,
    views: list[tuple[str, str]] = (),
    timeseries: dict[tuple[str, str], dict[str, Any]] | None = None,
) -> Path:
    """A ``mongodump --archive`` file: magic, prelude, then blocks of ``block`` documents that alternate
    between the collections (as concurrent dumps interleave them), each collection closed by an EOF header.
    A collection of ``timeseries`` (its options) is one of type timeseries: its documents are its buckets,
    in blocks of ``system.buckets.<name>``."""
    timeseries = timeseries or {}
    import gzip as gzip_module
    import struct

    terminator = b"\xff\xff\xff\xff"
    out = [struct.pack("<I", 0x8199E26D)]
    out.append(
        bson.encode(
            {"concurrent_collections": 4, "version": "0.1", "server_version": "7.0.0", "tool_version": "100.9.0"}
        )
    )
    for (db, name), _docs in collections.items():
        meta: dict[str, Any] = {
            "indexes": [{"v": 2, "key": {"_id": 1}, "name": "_id_"}, *((indexes or {}).get((db, name), []))]
        }
        kind = "collection"
        if (db, name) in timeseries:
            meta, kind = {"indexes": [], "options": {"timeseries": timeseries[(db, name)]}}, "timeseries"
        out.append(
            bson.encode({"db": db, "collection": name, "metadata": json_util.dumps(meta), "size": 0, "type": kind})
        )
    for db, name in views:
        out.append(bson.encode({"db": db, "collection": name, "metadata": "{}", "size": 0, "type": "view"}))
    out.append(terminator)
    cursors = {key: 0 for key in collections}
    while cursors:
        for key in list(cursors):
            docs = collections[key]
            start = cursors[key]
            chunk = docs[start : start + block]
            namespace = f"system.buckets.{key[1]}" if key in timeseries else key[1]
            if chunk:
                out.append(bson.encode({"db": key[0], "collection": namespace, "EOF": False, "CRC": 0}))
                out.extend(bson.encode(doc) for doc in chunk)
                out.append(terminator)
                cursors[key] = start + block
            if cursors[key] >= len(docs):
                out.append(bson.encode({"db": key[0], "collection": namespace, "EOF": True, "CRC": 0}))
                out.append(terminator)
                del cursors[key]
    data = b"".join(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip_module.compress(data) if compress else data)
    return path
