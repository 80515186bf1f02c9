"""Running against production: transient faults retried to the same result, permanent ones stop the run,
the throttle holds its rate, replication lag pauses the run."""

import dataclasses
import datetime
import random
import time

import pytest
from pymongo.errors import AutoReconnect, CursorNotFound, NetworkTimeout, NotPrimaryError, OperationFailure

from mongopat.errors import OperationFailed
from mongopat.migrate.dump_folder.runner import DumpRunner
from mongopat.migrate.script import load_folder
from mongopat.migrate.server.runner import Runner, RunOptions
from mongopat.migrate.throttling import LagGuard, Throttle, backoff, is_transient
from tests.support.dumps import big_dump
from tests.support.migrations import STEPS, final_state_without_faults, load, snapshot, write
from tests.support.migrations import write as write_migration


class FaultyCollection:
    def __init__(self, collection, plan):
        self._collection, self._plan = collection, plan

    def with_options(self, *args, **kwargs):
        try:
            return FaultyCollection(self._collection.with_options(*args, **kwargs), self._plan)
        except NotImplementedError:
            raise

    def __getattr__(self, name):
        attribute = getattr(self._collection, name)
        if not callable(attribute) or name.startswith("_") or name == "rename":
            return attribute

        def call(*args, **kwargs):
            self._plan["calls"] += 1
            if self._plan["calls"] in self._plan["at"]:
                raise self._plan["error"]
            return attribute(*args, **kwargs)

        return call


class FaultyDatabase:
    """Raises ``error`` on the chosen calls of the migrated and backup collections (the changelog and
    lock are left alone, as a test of the data path)."""

    def __init__(self, db, at, error):
        self._db = db
        self._plan = {"calls": 0, "at": set(at), "error": error}

    def __getitem__(self, name):
        if name.startswith(("mongopat_changelog", "mongopat_lock")):
            return self._db[name]
        return FaultyCollection(self._db[name], self._plan)

    def __getattr__(self, name):
        return getattr(self._db, name)


@pytest.mark.parametrize(
    "error",
    [
        AutoReconnect("connection reset"),
        NotPrimaryError("not primary"),
        NetworkTimeout("timed out"),
        CursorNotFound("cursor id 42 not found", code=43),
        OperationFailure("WriteConflict", code=112),
    ],
    ids=["AutoReconnect", "NotWritablePrimary", "NetworkTimeout", "CursorNotFound", "WriteConflict"],
)
@pytest.mark.parametrize("workers", [1, 2])
def test_transient_faults_are_retried_to_the_same_result(mongo, tmp_path, error, workers):
    steps = [STEPS["computed"], STEPS["outlier"]]
    expected = final_state_without_faults(mongo, tmp_path, steps)
    rng = random.Random(str(error))
    for attempt in range(3):
        db = mongo.db
        for name in db.list_collection_names():
            db[name].drop()
        load(db)
        write(tmp_path / f"run{attempt}", "0001_m", *steps)
        faults = sorted(rng.sample(range(2, 60), 3))
        faulty = FaultyDatabase(db, faults, error)
        runner = Runner(faulty if workers == 1 else _parallel_db_of(faulty, db), load_folder(tmp_path / f"run{attempt}"),
                        RunOptions(batch_size=40, retry_base=0.0, workers=workers))  # fmt: skip
        [result] = runner.up()
        assert runner.retried >= 1, faults
        assert snapshot(db) == expected, faults
        assert any("retried" in note for note in result["notes"])


def test_a_permanent_error_stops_the_run_and_resumes_once_fixed(mongo, tmp_path):
    db = mongo.db
    load(db)
    write(tmp_path, "0001_m", STEPS["computed"])
    failing = FaultyDatabase(db, range(5, 10_000), OperationFailure("Document failed validation", code=121))
    with pytest.raises(OperationFailed, match="failed validation"):
        Runner(failing, load_folder(tmp_path), RunOptions(batch_size=40, retry_base=0.0)).up()
    assert db.mongopat_changelog.find_one({"_id": "0001_m"})["state"] == "failed"
    [result] = Runner(db, load_folder(tmp_path), RunOptions(batch_size=40)).up()
    assert result["state"] == "applied" and db.orders.count_documents({"total": {"$exists": False}}) == 0


def test_classification_and_backoff():
    assert is_transient(AutoReconnect("x")) and is_transient(OperationFailure("x", code=189))
    assert not is_transient(OperationFailure("auth", code=18)) and not is_transient(OperationFailure("dup", code=11000))
    assert [backoff(n, 0.2, 1.0) for n in (1, 2, 3, 4)] == [0.2, 0.4, 0.8, 1.0]


def test_throttle_holds_the_rate_within_ten_percent(tmp_path):
    data = big_dump(tmp_path)
    migrations = write_migration(tmp_path / "m", "0001_v2", {"step": "computed", "collection": "readings", "field": "v2",
                                                             "expression": "v * 2"})  # fmt: skip
    seen = []
    options = RunOptions(
        batch_size=250, max_docs_per_sec=5000, progress=lambda *a: seen.append((time.monotonic(), a[2]))
    )
    DumpRunner(data, load_folder(migrations), options).up()
    (t0, d0), (t1, d1) = seen[0], seen[-1]
    rate = (d1 - d0) / (t1 - t0)
    assert d1 == 15_000 and t1 - t0 > 2.5
    assert abs(rate - 5000) / 5000 < 0.10, rate


def test_throttle_with_a_fake_clock():
    now = [0.0]
    slept = []
    throttle = Throttle(100, clock=lambda: now[0], sleep=lambda s: (slept.append(s), now.__setitem__(0, now[0] + s)))
    throttle.start()
    for done in range(10, 101, 10):
        now[0] += 0.01  # each batch of 10 takes 10 ms of work
        throttle.after(done)
    assert now[0] == pytest.approx(1.0) and len(slept) == 10


class FakeAdmin:
    def __init__(self, lags, refuse=False):
        self.lags, self.refuse, self.calls = list(lags), refuse, 0

    def command(self, name):
        self.calls += 1
        if self.refuse:
            raise OperationFailure("not authorized on admin to execute command { replSetGetStatus: 1 }", code=13)
        lag = self.lags.pop(0) if self.lags else 0
        primary = datetime.datetime(2026, 1, 1, 12, 0, 0)
        return {"members": [{"stateStr": "PRIMARY", "optimeDate": primary},
                            {"stateStr": "SECONDARY", "optimeDate": primary - datetime.timedelta(seconds=lag)},
                            {"stateStr": "SECONDARY", "optimeDate": primary}]}  # fmt: skip


def test_lag_backoff_pauses_then_resumes():
    slept = []
    guard = LagGuard(FakeAdmin([30, 12, 2]), max_lag=5, interval=1.0, sleep=slept.append)
    assert guard.wait() == 2.0 and slept == [1.0, 1.0]
    assert guard.wait() == 0.0 and guard.paused == 2.0


def test_lag_not_permitted_is_skipped_with_a_note():
    guard = LagGuard(FakeAdmin([], refuse=True), max_lag=5)
    assert guard.wait() == 0.0 and "clusterMonitor" in guard.note and not guard.enabled


def test_plan_refuses_shard_key_changes_and_validator_violations(tmp_path):
    from mongopat.migrate.plan import plan
    from mongopat.migrate.plan_refusals import refusals
    from mongopat.migrate.steps import build_step

    sharded = {"shard_key": {"customerId": 1, "createdAt": 1}, "validator": None}
    assert refusals(build_step({"step": "rename_field", "collection": "o", "from": "customerId", "to": "cid"}), sharded)
    assert refusals(build_step(STEPS["bucket"]), sharded)  # buckets cannot carry customerId and createdAt
    assert refusals(build_step(STEPS["bucket"]), {"shard_key": {"sensor": "hashed"}, "validator": None}) == []
    assert refusals(build_step(STEPS["computed"]), sharded) == []
    validated = {"shard_key": None, "validator": {"$jsonSchema": {"required": ["ram"], "additionalProperties": False,
                                                                    "properties": {"_id": {}, "ram": {}, "cpu": {}}}}}  # fmt: skip
    reasons = refusals(build_step(STEPS["attribute"]), validated)
    assert any("removes ram" in r for r in reasons) and any("adds attributes" in r for r in reasons)
    assert (
        refusals(
            build_step(STEPS["polymorphic"]), {"shard_key": None, "validator": {"$jsonSchema": {"required": ["x"]}}}
        )
        == []
    )
    recs = [
        {"code": "MP104", "pattern": "computed", "collection": "orders", "migration": STEPS["computed"]},
        {"code": "MP101", "pattern": "bucket", "collection": "readings", "migration": STEPS["bucket"]},
    ]
    refused: list[str] = []
    files, notes = plan(
        recs, tmp_path, collection_info=lambda name: sharded if name == "readings" else {}, refused=refused
    )
    assert [f.code for f in files] == ["MP104"] and len(refused) == 1 and "sharded" in refused[0]


def test_plan_cli_checks_the_target(mongo, tmp_path):
    import json as _json

    from typer.testing import CliRunner

    from mongopat.cli import app

    recs = tmp_path / "recs.json"
    recs.write_text(_json.dumps({"recommendations": [{"code": "MP104", "pattern": "computed", "collection": "orders",
                                                       "migration": STEPS["computed"]}]}))  # fmt: skip
    mongo.client["config"]["collections"].replace_one(
        {"_id": f"{mongo.db_name}.orders"}, {"_id": f"{mongo.db_name}.orders", "key": {"total": 1}}, upsert=True
    )
    try:
        result = CliRunner().invoke(app, ["migrate", "plan", "--from", str(recs), "--dir", str(tmp_path / "m"), "--yes",
                                          "--uri", mongo.uri, "--db", mongo.db_name])  # fmt: skip
        assert result.exit_code == 1 and "part of the shard key" in result.output
        assert not (tmp_path / "m").exists() or not list((tmp_path / "m").iterdir())
    finally:
        mongo.client["config"]["collections"].delete_one({"_id": f"{mongo.db_name}.orders"})


class LockedCollection:
    """mongomock is not thread-safe: serialise every call (and materialise cursors) under one lock. On a
    real server (MONGOPAT_TEST_URI) the workers run truly in parallel."""

    def __init__(self, collection, lock):
        self._collection, self._lock = collection, lock

    def with_options(self, *args, **kwargs):
        return LockedCollection(self._collection.with_options(*args, **kwargs), self._lock)

    def __getattr__(self, name):
        attribute = getattr(self._collection, name)
        if not callable(attribute) or name.startswith("_"):
            return attribute

        def call(*args, **kwargs):
            with self._lock:
                result = attribute(*args, **kwargs)
                return list(result) if name in ("find", "aggregate", "list_indexes") else result

        return call


class LockedDatabase:
    def __init__(self, db):
        import threading

        self._db, self._lock = db, threading.RLock()

    def __getitem__(self, name):
        return LockedCollection(self._db[name], self._lock)

    def __getattr__(self, name):
        attribute = getattr(self._db, name)
        if callable(attribute):

            def call(*args, **kwargs):
                with self._lock:
                    return attribute(*args, **kwargs)

            return call
        return attribute


def _parallel_db_of(wrapper, db):
    return wrapper if getattr(db.client, "__module__", "").startswith("pymongo") else LockedDatabase(wrapper)


def _parallel_db(db):
    return db if getattr(db.client, "__module__", "").startswith("pymongo") else LockedDatabase(db)


@pytest.mark.parametrize("workers", [2, 3])
def test_workers_give_the_result_of_one_worker_and_survive_crashes(mongo, tmp_path, workers):
    steps = [STEPS["computed"], STEPS["outlier"], STEPS["document_versioning"]]
    expected = final_state_without_faults(mongo, tmp_path, steps, client_side=True)
    rng = random.Random(workers)
    for attempt in range(3):
        db = mongo.db
        for name in db.list_collection_names():
            db[name].drop()
        load(db)
        folder = tmp_path / f"w{attempt}"
        write(folder, "0001_m", *steps)
        cut, calls = rng.randint(1, 12), {"n": 0}

        def fault(*_args, cut=cut, calls=calls):
            calls["n"] += 1
            if calls["n"] == cut:
                raise RuntimeError(f"crash at batch {cut}")

        # Workers share the client-side path's ranges (a step the server computes is one pass of its own).
        options = RunOptions(batch_size=30, workers=workers, client_side=True)
        with pytest.raises(RuntimeError):
            Runner(_parallel_db(db), load_folder(folder), dataclasses.replace(options, on_batch=fault)).up()
        entry = db.mongopat_changelog.find_one({"_id": "0001_m"})
        assert any(step.get("ranges") for step in entry["steps"])  # each range checkpointed on its own
        Runner(_parallel_db(db), load_folder(folder), options).up()
        assert snapshot(db) == expected, f"attempt {attempt}, crash at batch {cut}"
        assert Runner(db, load_folder(folder)).verify() == {"0001_m": []}


def test_chunk_mapping():
    from bson import MaxKey, MinKey

    from mongopat.analysis.shards import chunks_seen

    chunks = [{"min": {"k": MinKey()}, "max": {"k": 100}, "shard": "s0"}, {"min": {"k": 100}, "max": {"k": 200}, "shard": "s1"},
              {"min": {"k": 200}, "max": {"k": MaxKey()}, "shard": "s1"}]  # fmt: skip
    assert chunks_seen([5, 150, 160], chunks, "k") == {
        "s0": {"chunks": 1, "chunks_seen": 1},
        "s1": {"chunks": 2, "chunks_seen": 1},
    }
    assert chunks_seen(["text"], chunks, "k")["s1"]["chunks_seen"] == 1  # strings sort after numbers: the last chunk


def test_sharded_collections_report_shard_key_and_chunks_seen(mongo):
    """A client that answers like mongos for one sharded collection (collStats with shards, config data)."""
    from mongopat.analysis.collection import AnalyzeOptions
    from mongopat.command import analyze_source
    from mongopat.sources import MongoSource

    if mongo.real:
        pytest.skip("fakes a sharded cluster on top of mongomock")
    db = mongo.db
    db.orders.insert_many([{"_id": i, "customer": i % 300} for i in range(600)])
    config = mongo.client["config"]
    config.collections.insert_one({"_id": f"{mongo.db_name}.orders", "key": {"customer": 1}, "uuid": "u-1"})
    config.chunks.insert_many([
        {"uuid": "u-1", "min": {"customer": bson_min()}, "max": {"customer": 100}, "shard": "shardA"},
        {"uuid": "u-1", "min": {"customer": 100}, "max": {"customer": 200}, "shard": "shardB"},
        {"uuid": "u-1", "min": {"customer": 200}, "max": {"customer": 10_000}, "shard": "shardB"},
        {"uuid": "u-1", "min": {"customer": 10_000}, "max": {"customer": bson_max()}, "shard": "shardA"},
    ])  # fmt: skip

    class MongosDatabase:
        def __init__(self, real):
            self._real = real

        def command(self, name, *args, **kwargs):
            if name == "collStats":
                return {"sharded": True, "size": 1, "storageSize": 1, "avgObjSize": 1, "totalIndexSize": 1,
                        "shards": {"shardA": {"count": 200}, "shardB": {"count": 400}}}  # fmt: skip
            return self._real.command(name, *args, **kwargs)

        def __getattr__(self, name):
            return getattr(self._real, name)

        def __getitem__(self, name):
            return self._real[name]

    class MongosClient:
        admin = type("Admin", (), {"command": staticmethod(lambda *a, **k: {"ok": 1})})()

        def get_database(self, name, **kwargs):
            return MongosDatabase(mongo.client[name])

        def __getitem__(self, name):
            return mongo.client[name]

    try:
        source = MongoSource(f"mongodb://mongos.example/{mongo.db_name}", client=MongosClient())
        report = analyze_source(source, ["orders"], AnalyzeOptions(sample_size=100))
    finally:
        config.collections.delete_many({"uuid": "u-1"})
        config.chunks.delete_many({"uuid": "u-1"})
    sharding = report["collections"][0]["sharding"]
    assert sharding["sharded"] and sharding["shard_key"] == {"customer": 1}
    assert sharding["shards"]["shardA"]["documents"] == 200 and sharding["shards"]["shardB"]["chunks"] == 2
    assert sharding["shards"]["shardA"]["chunks_seen"] >= 1 and sharding["shards"]["shardB"]["chunks_seen"] >= 1
    assert sharding["shards"]["shardA"]["chunks_seen"] <= 1  # keys never reach the last chunk (>= 10,000)


def bson_min():
    from bson import MinKey

    return MinKey()


def bson_max():
    from bson import MaxKey

    return MaxKey()


def test_throttle_on_a_server_run(mongo, tmp_path):
    db = mongo.db
    load(db)
    write(tmp_path, "0001_m", STEPS["computed"])
    seen = []
    # The throttle is a ceiling: on SecantusDB a batch of 10 conditional writes takes longer than the 0.1 s
    # that 100 documents a second allow (a collection scan each, the conformance table), so it gets 20.
    rate = 20 if mongo.engine == "secantusdb" else 100
    options = RunOptions(
        batch_size=10, max_docs_per_sec=rate, progress=lambda *a: seen.append((time.monotonic(), a[2]))
    )
    Runner(db, load_folder(tmp_path), options).up()
    (t0, d0), (t1, d1) = seen[0], seen[-1]
    assert d1 == 230 and abs((d1 - d0) / (t1 - t0) - rate) / rate < 0.10
