"""What only a real server can show: writers on connections of their own, running truly concurrently with a
migration; a ``migrate up`` process killed with SIGKILL and run again; the server's own statistics giving the
same evidence as an export of the same data; drafting from the profiler; proving a guide on a scratch server.

Each test takes the ``mongo`` fixture's server lane only (mongomock lives in one process and is not
thread-safe). Collections stay small: SecantusDB plans ``{_id, $expr}`` as a collection scan (the README's
conformance table), so each conditional write costs a scan there.
"""

from __future__ import annotations

import datetime
import json
import signal
import subprocess
import sys
from typing import Any

import pytest
from typer.testing import CliRunner

from mongopat.cli import app
from mongopat.migrate.bookkeeping import BACKUP, CHANGELOG, LOCK, utcnow
from mongopat.migrate.operations import OPERATIONS
from mongopat.migrate.runner import RunOptions
from mongopat.migrate.script import load_folder
from mongopat.migrate.server.runner import Runner
from tests.support.application import (
    Application,
    check_writes_kept,
    setup,
    with_writer_thread,
    writer_cases,
)
from tests.support.dumps import write_bson_dump
from tests.support.migrations import STEPS as RUNTIME_STEPS
from tests.support.migrations import dataset, load, snapshot, write
from tests.support.server import wait_for

runner = CliRunner()
THREADS = "mongomock is not thread-safe: the writer must run on a connection of its own"
PROCESSES = "mongomock lives inside one process: a second process cannot reach its data"


@pytest.mark.server_only(THREADS)
@pytest.mark.parametrize(("name", "client_side"), writer_cases(["computed", "outlier", "attribute"]))
def test_worker_threads_over_id_ranges_while_the_application_writes(mongo, tmp_path, name, client_side):
    db = mongo.db
    step, folder = setup(db, tmp_path, name, 22)
    with mongo.new_client() as other:
        app_ = Application(other[mongo.db_name].orders, 22)
        options = RunOptions(batch_size=4, workers=3, client_side=client_side)
        with_writer_thread(app_, lambda: Runner(db, load_folder(folder), options).up())
        app_.enabled = False
    Runner(db, load_folder(folder), RunOptions(batch_size=4)).up()
    assert db.orders.count_documents(OPERATIONS[step.name].pending(step)) == 0
    assert Runner(db, load_folder(folder)).verify() == {"0001_online": []}
    check_writes_kept(db, app_, step)


def _mongopat(*args: str) -> list[str]:
    return [sys.executable, "-m", "mongopat", *args]


@pytest.mark.server_only(PROCESSES)
@pytest.mark.parametrize(
    "names",
    [["computed", "outlier"], ["bucket"], ["subset", "document_versioning"]],
    ids=["computed+outlier", "bucket", "subset+document_versioning"],
)
def test_a_migrate_up_process_killed_mid_step_resumes_to_the_same_result(mongo, tmp_path, names):
    """``migrate up`` in a process of its own, killed with SIGKILL once it has written part of a step, then
    run again: the same bytes as an undisturbed run, and ``down`` gives the original bytes back."""
    steps = [RUNTIME_STEPS[name] for name in names]
    reference = mongo.client[mongo.db_name + "_ref"]
    try:
        load(reference)
        write(tmp_path / "ref", "0001_m", *steps)
        Runner(reference, load_folder(tmp_path / "ref"), RunOptions(batch_size=10)).up()
        expected = snapshot(reference)
    finally:
        mongo.client.drop_database(reference.name)

    db = mongo.db
    load(db)
    original = snapshot(db)
    folder = tmp_path / "killed"
    write(folder, "0001_m", *steps)
    common = ["--uri", mongo.uri, "--db", mongo.db_name, "--dir", str(folder)]
    # Throttled so that the kill lands inside the first step, after some of its batches were written.
    slow = subprocess.Popen(
        _mongopat("migrate", "up", *common, "--yes", "--batch-size", "10", "--max-docs-per-sec", "150"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for(lambda: db[BACKUP].count_documents({}) >= 20 or slow.poll() is not None, 60, "a written batch")
        slow.send_signal(signal.SIGKILL)
        slow.wait(timeout=10)
    finally:
        if slow.poll() is None:
            slow.kill()
    assert slow.returncode == -signal.SIGKILL, f"the run ended before it was killed: {slow.stderr.read()!r}"
    assert db[CHANGELOG].find_one({"_id": "0001_m"})["state"] != "applied"
    # The killed run's lease (60 s) is still live: a minute later the next run takes the lock over. The
    # lease is moved into the past here instead of waiting for it.
    db[LOCK].update_one({}, {"$set": {"expires_at": utcnow() - datetime.timedelta(seconds=1)}})
    resumed = subprocess.run(_mongopat("migrate", "up", *common, "--yes"), capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert snapshot(db) == expected
    verified = subprocess.run(_mongopat("migrate", "verify", *common), capture_output=True, text=True)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    down = subprocess.run(
        _mongopat("migrate", "down", *common, "--yes", "--to", "base"), capture_output=True, text=True
    )
    assert down.returncode == 0, down.stderr
    assert snapshot(db) == original


def _report_on(args: list[str]) -> dict[str, Any]:
    result = runner.invoke(app, ["analyze", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# What an analysis measures of the documents themselves; storage statistics and index usage exist only
# on a server, and the sampling note says where the documents came from.
EVIDENCE = ("count", "document_size", "max_depth", "fields", "time", "drift", "references", "patterns_in_place")


def _evidence(report: dict[str, Any]) -> dict[str, Any]:
    return {collection["name"]: {key: collection[key] for key in EVIDENCE} for collection in report["collections"]}


@pytest.mark.server_only("compares the server's sampling with an export of the same data")
@pytest.mark.parametrize("full_scan", [False, True], ids=["sampled-whole", "full-scan"])
def test_analyze_on_the_server_gives_the_evidence_a_dump_of_the_same_data_gives(mongo, tmp_path, full_scan):
    data = dataset()
    load(mongo.db)
    mongo.db.orders.create_index([("status", 1), ("createdAt", -1)])
    for name, documents in data.items():
        indexes = [{"key": {"_id": 1}, "name": "_id_"}]
        if name == "orders":
            indexes.append({"key": {"status": 1, "createdAt": -1}, "name": "status_1_createdAt_-1"})
        write_bson_dump(tmp_path / "dump", name, documents, indexes)
    extra = ["--full-scan"] if full_scan else []
    server = _report_on([*mongo.cli_args(), "--read-preference", "primary", *extra])
    dump = _report_on(["--dump", str(tmp_path / "dump"), "--db", mongo.db_name])
    assert sorted(_evidence(server)) == sorted(data)
    assert _evidence(server) == _evidence(dump)
    for collection in server["collections"]:
        indexes = sorted(i["name"] for i in collection["indexes"])
        assert indexes == (["_id_", "status_1_createdAt_-1"] if collection["name"] == "orders" else ["_id_"])


@pytest.mark.server_only("a second collection read by the server's $sample")
def test_analyze_samples_a_large_collection_with_sample_on_the_server(mongo):
    mongo.db.events.insert_many([{"n": i, "kind": "k" if i % 3 else "j"} for i in range(3000)])
    report = _report_on([*mongo.cli_args(), "--sample", "500"])
    [events] = report["collections"]
    assert events["count"] == 3000
    assert events["sampling"]["method"] == "$sample" and events["sampling"]["documents"] == 500
    kind = next(f for f in events["fields"] if f["path"] == "kind")
    assert kind["presence"] == 1.0


@pytest.mark.server_only("the server's profiler")
def test_access_draft_reads_the_profiler_and_says_what_the_server_lacks(mongo):
    db = mongo.db
    db.orders.insert_many([{"_id": i, "customerId": i % 5, "status": "new"} for i in range(50)])
    db.command("profile", 2)
    try:
        for i in range(20):
            list(db.orders.find({"customerId": i % 5}))
        db.orders.update_many({"customerId": 1}, {"$set": {"status": "paid"}})
    finally:
        db.command("profile", 0)
    result = runner.invoke(app, ["access", "draft", *mongo.cli_args(), "--top-interval", "0.1", "-f", "json"])
    assert result.exit_code == 0, result.output
    draft = json.loads(result.stdout)
    statuses = {s["name"]: s for s in draft["sources"]}
    profile = statuses["system.profile"]
    assert profile["used"], profile
    assert "customerId" in draft["access_yaml"], draft["access_yaml"]
    if mongo.engine == "secantusdb":
        # SecantusDB 0.7.0b3 has no $queryStats stage (MongoDB has it from 7.1; the draft says so).
        assert not statuses["$queryStats"]["used"] and "not available" in statuses["$queryStats"]["detail"]


@pytest.mark.server_only("proves the guide in two scratch databases of a real server")
def test_guide_check_on_a_scratch_server_creates_and_drops_its_databases(mongo, tmp_path):
    from tests.support.scenarios import iot_folder

    dump, access, migrations = iot_folder(tmp_path)
    up = runner.invoke(app, ["migrate", "up", "--dump", str(dump), "--dir", str(migrations), "-y", "-q"])
    assert up.exit_code == 0, up.output
    before = set(mongo.client.list_database_names())
    result = runner.invoke(
        app,
        ["migrate", "guide", "--check", "--dump", str(dump), "--dir", str(migrations), "--access", str(access),
         "--scratch-uri", mongo.uri, "-f", "json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    checked = json.loads(result.stdout)
    assert checked["ok"] and checked["migrations"] and all(m["reads_compared"] for m in checked["migrations"])
    assert set(mongo.client.list_database_names()) == before
