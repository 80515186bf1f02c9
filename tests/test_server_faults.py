"""Faults of a live server, survived: the server killed and restarted mid-``migrate up``, the connection cut
mid-batch, the lock's lease expiring while a run is paused, the server dying while ``analyze`` samples.

Each ends in a clear error or a pause, then a resume to the result of an undisturbed run, with every
acknowledged application write kept. Faults done to the server process run in the server lane only (on
the process this session started; a deployment given by MONGOPAT_TEST_URI is not killed: they skip).
"""

from __future__ import annotations

import contextlib
import datetime
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from mongopat.errors import OperationFailed
from mongopat.migrate.bookkeeping import BACKUP, CHANGELOG, LOCK, utcnow
from mongopat.migrate.operations import OPERATIONS
from mongopat.migrate.runner import RunOptions
from mongopat.migrate.script import load_folder
from mongopat.migrate.server.runner import Runner
from tests.support.application import writer_cases
from tests.support.migrations import STEPS, load, snapshot, write
from tests.support.server import wait_for

PROCESS = "faults are done to a server process"


def own_server(mongo: Any) -> Any:
    if mongo.server is None:
        pytest.skip("the server lane runs on MONGOPAT_TEST_URI's deployment, which the tests do not kill")
    return mongo.server


def kill_after_flush(mongo: Any, server: Any) -> None:
    """Kill the server once what it acknowledged is on disk: SecantusDB acknowledges a majority write before
    its journal holds it (the conformance test below), which MongoDB does not. Writes acknowledged after the
    flush may still be lost there: the run then resumes from an older checkpoint, to the same end."""
    mongo.client.admin.command("fsync")
    server.kill()


@pytest.mark.server_only(PROCESS)
@pytest.mark.diverges(
    "secantusdb", "insert_many 100 (w: majority), SIGKILL at once, restart: 0 documents (in some runs)", sometimes=True
)
def test_a_majority_acknowledged_write_survives_the_server_killed_at_once(mongo):
    """MongoDB acknowledges a ``w: "majority"`` write once it is in the on-disk journal (a standalone running
    with journaling, and every member of the majority of a replica set): a server killed right after the
    acknowledgement keeps it. mongopat's changelog and backups rely on it."""
    from pymongo import WriteConcern

    server = own_server(mongo)
    mongo.db.kept.with_options(write_concern=WriteConcern("majority")).insert_many([{"i": i} for i in range(100)])
    server.kill()
    server.start()
    assert mongo.db.kept.count_documents({}) == 100


def undisturbed(mongo: Any, tmp_path: Any, steps: list[dict]) -> dict:
    reference = mongo.client[mongo.db_name + "_ref"]
    try:
        load(reference)
        write(tmp_path / "ref", "0001_m", *steps)
        Runner(reference, load_folder(tmp_path / "ref"), RunOptions(batch_size=10)).up()
        return snapshot(reference)
    finally:
        mongo.client.drop_database(reference.name)


def expire_lease(db: Any) -> None:
    """What a minute's wait does to a dead run's lease (60 s), without the wait."""
    db[LOCK].update_one({}, {"$set": {"expires_at": utcnow() - datetime.timedelta(seconds=1)}})


def mongopat(*args: str, **kwargs: Any) -> Any:
    return subprocess.Popen([sys.executable, "-m", "mongopat", *args], **kwargs)


@pytest.mark.server_only(PROCESS)
def test_the_server_killed_mid_up_and_restarted_then_up_again(mongo, tmp_path):
    server = own_server(mongo)
    steps = [STEPS["computed"], STEPS["outlier"]]
    expected = undisturbed(mongo, tmp_path, steps)
    db = mongo.db
    load(db)
    folder = tmp_path / "run"
    write(folder, "0001_m", *steps)
    common = ["--uri", mongo.uri, "--db", mongo.db_name, "--dir", str(folder), "--timeout-ms", "2000"]
    run = mongopat(
        "migrate", "up", *common, "--yes", "--batch-size", "10", "--max-docs-per-sec", "150",
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for(lambda: db[BACKUP].count_documents({}) >= 20, 60, "a written batch")
        kill_after_flush(mongo, server)
        # The run retries transient faults from its last checkpoint (8 times, backing off up to 10 s): an
        # outage of a few seconds is waited out. The server comes back on the same port and data.
        time.sleep(3)
        server.start()
        out, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, err
    assert "transient fault(s) retried from the last checkpoint" in out, out
    assert snapshot(db) == expected
    assert Runner(db, load_folder(folder)).verify() == {"0001_m": []}


def _shut(end: socket.socket) -> None:
    with contextlib.suppress(OSError):
        end.shutdown(socket.SHUT_RDWR)


class CuttingProxy:
    """A TCP proxy on loopback that closes both sides of every connection open when ``cut`` is called."""

    def __init__(self, port: int) -> None:
        self.target = ("127.0.0.1", port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopped:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            with self.lock:
                self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                _shut(end)

    def cut(self) -> None:
        with self.lock:
            for end in self.sockets:
                _shut(end)
            self.sockets = []

    def close(self) -> None:
        self.stopped = True
        self.listener.close()
        self.cut()


def _up_through_cuts(
    db: Any, folder: Any, proxy: CuttingProxy, batch_size: int = 10, client_side: bool = False
) -> list[str]:
    """``up`` through ``proxy``, which cuts every connection after some batches, three times over; a run
    that stops is followed by another, as an operator would (the dead run's lease expired)."""
    import pymongo

    cuts = {"n": 0}

    def cut_now_and_then(_migration: str, _index: int, done: int) -> None:
        if cuts["n"] < 3 and done >= (cuts["n"] + 1) * 3 * batch_size:
            cuts["n"] += 1
            proxy.cut()

    outcomes = []
    for _attempt in range(6):
        try:
            options = RunOptions(batch_size=batch_size, on_batch=cut_now_and_then, client_side=client_side)
            Runner(db, load_folder(folder), options).up()
            outcomes.append("done")
            break
        except (OperationFailed, pymongo.errors.PyMongoError) as exc:
            outcomes.append(type(exc).__name__)
            expire_lease(db)
    assert outcomes[-1] == "done", outcomes
    assert cuts["n"] >= 1, "no connection was cut"
    return outcomes


@pytest.mark.server_only(PROCESS)
@pytest.mark.parametrize("name", ["computed", "subset", "bucket"])
def test_connections_cut_mid_batch_then_the_run_resumes(mongo, tmp_path, name):
    """Every connection cut after some batches: each cut is retried or stops the run with a clear error; the
    runs that follow give the undisturbed result."""
    import pymongo

    server = own_server(mongo)
    steps = [STEPS[name]]
    expected = undisturbed(mongo, tmp_path, steps)
    load(mongo.db)
    folder = tmp_path / "run"
    write(folder, "0001_m", *steps)
    proxy = CuttingProxy(server.port)
    client = pymongo.MongoClient(f"mongodb://127.0.0.1:{proxy.port}", serverSelectionTimeoutMS=3000)
    try:
        _up_through_cuts(client[mongo.db_name], folder, proxy)
    finally:
        client.close()
        proxy.close()
    assert snapshot(mongo.db) == expected
    assert Runner(mongo.db, load_folder(folder)).verify() == {"0001_m": []}


@pytest.mark.server_only(PROCESS)
@pytest.mark.parametrize(("name", "client_side"), writer_cases(["computed", "outlier", "attribute"]))
def test_connections_cut_while_the_application_writes_keep_every_acknowledged_write(mongo, tmp_path, name, client_side):
    """The same cuts while an application writes on a connection of its own (not through the proxy)."""
    import pymongo

    from tests.support.application import Application, check_writes_kept, setup, with_writer_thread

    server = own_server(mongo)
    step, folder = setup(mongo.db, tmp_path, name, 31)
    proxy = CuttingProxy(server.port)
    client = pymongo.MongoClient(f"mongodb://127.0.0.1:{proxy.port}", serverSelectionTimeoutMS=3000)
    try:
        with mongo.new_client() as other:
            app = Application(other[mongo.db_name].orders, 31)
            target = client[mongo.db_name]
            with_writer_thread(app, lambda: _up_through_cuts(target, folder, proxy, 5, client_side))
            app.enabled = False
    finally:
        client.close()
        proxy.close()
    Runner(mongo.db, load_folder(folder)).up()  # the application stopped: its last old-shape writes
    assert mongo.db.orders.count_documents(OPERATIONS[step.name].pending(step)) == 0
    assert Runner(mongo.db, load_folder(folder)).verify() == {"0001_online": []}
    check_writes_kept(mongo.db, app, step)


def test_a_lease_that_expires_while_a_run_is_paused_stops_that_run(mongo, tmp_path):
    """A run paused past its lease (a stopped VM, a long GC) finds another run holding the lock: it stops
    before writing again, and the other run's result is the undisturbed one."""
    steps = [STEPS["computed"]]
    expected = undisturbed(mongo, tmp_path, steps)
    db = mongo.db
    load(db)
    folder = tmp_path / "run"
    write(folder, "0001_m", *steps)
    taken = {"done": False}

    def pause_past_the_lease(_migration: str, _index: int, done: int) -> None:
        if done >= 30 and not taken["done"]:
            taken["done"] = True
            expire_lease(db)
            # Another run takes the lock over and finishes the migration while this one is paused.
            Runner(db, load_folder(folder), RunOptions(batch_size=10)).up()

    with pytest.raises(OperationFailed, match="lock was lost"):
        Runner(db, load_folder(folder), RunOptions(batch_size=10, on_batch=pause_past_the_lease)).up()
    assert taken["done"]
    assert db[CHANGELOG].find_one({"_id": "0001_m"})["state"] == "applied"
    assert snapshot(db) == expected


@pytest.mark.server_only(PROCESS)
def test_analyze_fails_within_its_timeout_when_the_server_dies_mid_sample(mongo):
    server = own_server(mongo)
    # Enough documents that a fast machine is still reading them a second in (20,000 took under 1.5 s).
    mongo.db.events.insert_many([{"n": i, "tags": ["a", "b"][: i % 3], "at": {"x": i}} for i in range(80000)])
    started = time.monotonic()
    run = mongopat(
        "analyze", "--uri", mongo.uri, "--db", mongo.db_name, "--full-scan", "--timeout-ms", "2000", "-q",
        "-f", "json", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        time.sleep(1.0)
        assert run.poll() is None, "analyze finished before the server was killed"
        server.kill()
        _out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.send_signal(signal.SIGKILL)
        server.start()
    elapsed = time.monotonic() - started
    assert run.returncode == 2, err
    assert err.startswith("error: ") and "internal error" not in err, err
    assert elapsed < 30, f"took {elapsed:.1f} s to fail"
