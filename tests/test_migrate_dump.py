"""Migrations on dump folders: whole-file atomic rewrites, byte-identical rollback, crash and SIGKILL
recovery, the file lock, and the format of every file kept."""

import datetime
import io
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import bson
import pytest
from bson import ObjectId, json_util
from typer.testing import CliRunner

from mongopat.cli import app
from mongopat.errors import OperationFailed
from mongopat.migrate.bookkeeping import utcnow
from mongopat.migrate.catalog import index_name
from mongopat.migrate.dump_folder.files import _nonblank_lines
from mongopat.migrate.dump_folder.runner import DumpRunner
from mongopat.migrate.operations import STEP_OPERATIONS
from mongopat.migrate.runner import RunOptions
from mongopat.migrate.script import load_folder
from tests.support.dumps import big_dump, files, make_dump
from tests.support.migrations import STEPS, write
from tests.support.paths import REPOSITORY, SAMPLE_CONFIGS

runner = CliRunner()


class Boom(RuntimeError):
    pass


def make_runner(data: Path, migrations: Path, **options) -> DumpRunner:
    return DumpRunner(data, load_folder(migrations), RunOptions(**{"batch_size": 50, "lock_timeout": 0.3, **options}))


@pytest.mark.parametrize(
    "name",
    [
        "computed",
        "outlier",
        "subset",
        "bucket",
        "tree",
        "pre_aggregation",
        "extended_reference",
        "attribute",
        "document_versioning",
        "create_index",
        "rename_collection",
        "copy_collection",
    ],
)
def test_each_step_round_trip_on_a_json_dump(tmp_path, name):
    data = make_dump(tmp_path)
    before = files(data)
    migrations = write(tmp_path / "m", "0001_step", STEPS[name])
    make_runner(data, migrations).up()
    assert files(data) != before
    assert make_runner(data, migrations).verify() == {"0001_step": []}
    make_runner(data, migrations).down()
    assert files(data) == before
    assert not [p for p in data.iterdir() if p.name.startswith(("mongopat_backup", "."))]


@pytest.mark.parametrize("fmt", ["bson", "json.gz"])
def test_formats_are_kept(tmp_path, fmt):
    data = make_dump(tmp_path, fmt)
    before = files(data)
    migrations = write(tmp_path / "m", "0001_m", STEPS["outlier"], STEPS["bucket"])
    make_runner(data, migrations).up()
    suffix = ".bson" if fmt == "bson" else ".json.gz"
    assert (data / f"orders{suffix}").exists() and (data / f"orders_items_overflow{suffix}").exists()
    assert (data / f"readings{suffix}").exists()
    make_runner(data, migrations).down()
    assert files(data) == before


def test_canonical_exports_stay_canonical(tmp_path):
    data = tmp_path / "db"
    data.mkdir()
    docs = [{"_id": i, "n": bson.Int64(i), "items": [{"price": 1.5, "qty": 2}]} for i in range(5)]
    (data / "orders.json").write_text(
        "".join(json_util.dumps(d, json_options=json_util.CANONICAL_JSON_OPTIONS) + "\n" for d in docs)
    )
    make_runner(data, write(tmp_path / "m", "0001_m", STEPS["computed"])).up()
    line = (data / "orders.json").read_text().splitlines()[0]
    assert '"$numberLong"' in line and '"total"' in line


def reference_state(tmp_path, steps) -> dict[str, bytes]:
    data = make_dump(tmp_path / "reference")
    make_runner(data, write(tmp_path / "reference_m", "0001_m", *steps)).up()
    return files(data)


def test_exception_at_random_points_then_resume(tmp_path):
    steps = [STEPS["computed"], STEPS["outlier"], STEPS["bucket"]]
    expected = reference_state(tmp_path, steps)
    rng = random.Random(5)
    for attempt in range(8):
        data = make_dump(tmp_path / f"run{attempt}")
        migrations = write(tmp_path / f"m{attempt}", "0001_m", *steps)
        cut = rng.randint(1, 10)
        calls = {"n": 0}

        def fault(*_args, cut=cut, calls=calls):
            calls["n"] += 1
            if calls["n"] == cut:
                raise Boom(f"at {cut}")

        with pytest.raises(Boom):
            make_runner(data, migrations, on_batch=fault).up()
        assert not [
            p
            for p in data.iterdir()
            if p.name.endswith(".json") and p.stat().st_size == 0 and not p.name.startswith(".")
        ]
        make_runner(data, migrations).up()
        assert files(data) == expected, f"attempt {attempt}, cut {cut}"


BIG_STEPS = [
    {"step": "computed", "collection": "readings", "field": "v2", "expression": "v * 2"},
    {
        "step": "outlier",
        "collection": "readings",
        "field": "tags",
        "threshold": 50,
        "overflow_collection": "readings_tags_overflow",
    },
    {
        "step": "bucket",
        "collection": "readings",
        "series_key": "sensor",
        "time_field": "ts",
        "window_seconds": 600,
        "measurements": ["v"],
    },
]


def test_sigkill_at_random_moments_then_resume(tmp_path):
    migrations = write(tmp_path / "m", "0001_big", *BIG_STEPS)
    interrupted = _kill_at_random_moments(tmp_path, big_dump, migrations, ["--lock-timeout", "0"], 9, (0.35, 0.95), 4)
    assert interrupted >= 3  # the kills landed inside the run, not after it


def _kill_at_random_moments(
    tmp_path: Path, make_data, migrations: Path, options: list[str], seed: int, window: tuple[float, float], wanted: int
) -> int:
    """Run ``migrate up`` in a process on fresh data and SIGKILL it at a random moment of its life (a
    fraction in ``window`` of an uninterrupted run's), until ``wanted`` kills landed before the end or 8
    tries; after each, no process of the run is left, the next run (in process) ends byte-identical to
    the uninterrupted one and leaves no spill folder. Returns how many kills landed inside the run."""
    env = dict(os.environ, PYTHONPATH=str(REPOSITORY))

    def command(data: Path) -> list[str]:
        return [sys.executable, "-m", "mongopat", "-q", "migrate", "up", "--dump", str(data), "--dir",
                str(migrations), "--yes", *options]  # fmt: skip

    reference = make_data(tmp_path / "reference")
    started = time.monotonic()
    subprocess.run(command(reference), env=env, check=True, capture_output=True)
    duration = time.monotonic() - started  # the process's whole life: kills land anywhere in it
    expected = files(reference)
    rng = random.Random(seed)
    interrupted, scale = 0, 1.0
    for attempt in range(8):
        if interrupted == wanted:
            break
        data = make_data(tmp_path / f"kill{attempt}")
        process = subprocess.Popen(command(data), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(rng.uniform(*window) * duration * scale)
        process.send_signal(signal.SIGKILL)
        process.wait()
        if Path("/proc").is_dir():
            deadline = time.monotonic() + 10
            while _processes_mentioning(str(data)) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not _processes_mentioning(str(data)), "a worker outlived its killed parent"
        changelog = data / "mongopat_changelog.json"
        text = changelog.read_text() if changelog.exists() else ""
        finished = bool(text) and json_util.loads(text.splitlines()[0])["state"] == "applied"
        interrupted += not finished
        scale *= 0.7 if finished else 1.0  # the run ended first: this machine is fast now
        lock = data / "mongopat_lock.json"
        if lock.exists():  # the killed run's lease: expire it rather than wait 60 s
            held = json_util.loads(lock.read_text())
            held["expires_at"] = utcnow() - datetime.timedelta(seconds=1)
            lock.write_text(json_util.dumps(held))
        result = runner.invoke(app, ["migrate", "up", "--dump", str(data), "--dir", str(migrations), "--yes"])
        assert result.exit_code == 0, result.output
        assert files(data) == expected, f"attempt {attempt}"
        assert not list(data.glob(".mongopat-spill-*"))
        shutil.rmtree(data.parent)
    return interrupted


def test_the_file_lock(tmp_path):
    data = make_dump(tmp_path)
    migrations = write(tmp_path / "m", "0001_m", STEPS["computed"])
    holder = {
        "_id": "migrate",
        "holder": "other",
        "host": "laptop:77",
        "acquired_at": utcnow(),
        "expires_at": utcnow() + datetime.timedelta(minutes=5),
    }
    (data / "mongopat_lock.json").write_text(json_util.dumps(holder))
    with pytest.raises(OperationFailed, match="laptop:77"):
        make_runner(data, migrations).up()
    holder["expires_at"] = utcnow() - datetime.timedelta(seconds=1)
    (data / "mongopat_lock.json").write_text(json_util.dumps(holder))
    assert make_runner(data, migrations).up()[0]["state"] == "applied"
    assert not (data / "mongopat_lock.json").exists()


def test_a_step_longer_than_the_lease_keeps_its_lock(tmp_path):
    """The lease is renewed while a step runs, so a second run cannot take over a long first one."""
    data = big_dump(tmp_path)
    migrations = write(tmp_path / "m", "0001_m", BIG_STEPS[0])
    attempts: list[bool] = []

    def slow(migration_id: str, index: int, done: int) -> None:
        time.sleep(0.01)
        if done == 12_000:  # well past the first lease of 0.5 s
            other = make_runner(data, migrations, lock_timeout=0)
            try:
                other.lock.acquire(0)
                attempts.append(True)
            except OperationFailed:
                attempts.append(False)

    started = time.monotonic()
    make_runner(data, migrations, lease_seconds=0.5, batch_size=100, on_batch=slow).up()
    assert time.monotonic() - started > 1.0
    assert attempts == [False]


def test_bookkeeping_files_are_not_collections(tmp_path):
    data = make_dump(tmp_path)
    make_runner(data, write(tmp_path / "m", "0001_m", STEPS["computed"])).up()
    result = runner.invoke(app, ["analyze", "--dump", str(data), "-f", "json"])
    names = {c["name"] for c in __import__("json").loads(result.stdout)["collections"]}
    assert not any(n.startswith("mongopat_") for n in names)


def test_end_to_end_on_a_dump_folder(tmp_path):
    data = tmp_path / "shop"
    shutil.copytree(SAMPLE_CONFIGS / "ecommerce" / "shop", data)
    before = files(data)
    recs, folder = tmp_path / "recs.json", tmp_path / "migrations"
    assert (
        runner.invoke(
            app,
            [
                "recommend",
                "--dump",
                str(data),
                "--access",
                str(SAMPLE_CONFIGS / "ecommerce/access.yaml"),
                "-f",
                "json",
                "-o",
                str(recs),
            ],
        ).exit_code
        == 0
    )
    assert runner.invoke(app, ["migrate", "plan", "--from", str(recs), "--dir", str(folder), "--yes"]).exit_code == 0
    up = runner.invoke(app, ["migrate", "up", "--dump", str(data), "--dir", str(folder), "--yes"])
    assert up.exit_code == 0, up.output
    assert runner.invoke(app, ["migrate", "verify", "--dump", str(data), "--dir", str(folder)]).exit_code == 0
    status = runner.invoke(app, ["migrate", "status", "--dump", str(data), "--dir", str(folder), "-f", "json"])
    assert {m["state"] for m in __import__("json").loads(status.stdout)["migrations"]} == {"applied"}
    down = runner.invoke(app, ["migrate", "down", "--dump", str(data), "--dir", str(folder), "--to", "base", "--yes"])
    assert down.exit_code == 0, down.output
    assert files(data) == before


def test_two_concurrent_runs_exactly_one_applies(tmp_path):
    """Two processes start `migrate up` on one folder at once: one applies, the other waits for the lock,
    then finds nothing left to do (or, with a short lock timeout, stops naming the holder)."""
    data = big_dump(tmp_path)
    migrations = write(tmp_path / "m", "0001_big", *BIG_STEPS)
    env = dict(os.environ, PYTHONPATH=str(REPOSITORY))
    command = [
        sys.executable,
        "-m",
        "mongopat",
        "migrate",
        "up",
        "--dump",
        str(data),
        "--dir",
        str(migrations),
        "--yes",
        "--lock-timeout",
        "120",
    ]
    processes = [
        subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)
    ]
    outputs = [p.communicate(timeout=300) for p in processes]
    assert [p.returncode for p in processes] == [0, 0], outputs
    applied = [out for out, _err in outputs if "applied 0001_big" in out]
    assert len(applied) == 1, outputs
    assert any("nothing to apply" in out for out, _err in outputs) or len(applied) == 1
    changelog = json_util.loads((data / "mongopat_changelog.json").read_text().splitlines()[0])
    assert changelog["state"] == "applied" and changelog["read"] == 45_000  # three steps of 15,000, read once each


@pytest.mark.parametrize("fmt", ["json", "bson"])
def test_full_buckets_continue_in_the_next_sequence(tmp_path, fmt):
    """Both bucketing paths (relaxed JSON read as is, BSON decoded) keep every reading when buckets fill."""
    data = make_dump(tmp_path, fmt)
    step = dict(STEPS["bucket"], max_bucket_size=3)
    migrations = write(tmp_path / "m", "0001_small", step)
    make_runner(data, migrations).up()
    buckets = list(DumpRunner(data, load_folder(migrations)).files.read("readings"))
    assert sum(b["count"] for b in buckets) == 900 and max(b["count"] for b in buckets) == 3
    assert len({repr(b["_id"]) for b in buckets}) == len(buckets)  # sequences, not duplicate ids
    assert make_runner(data, migrations).verify() == {"0001_small": []}


def test_fast_and_decoded_bucketing_agree(tmp_path):
    json_data = make_dump(tmp_path / "j", "json")
    bson_data = make_dump(tmp_path / "b", "bson")
    migrations = write(tmp_path / "m", "0001_b", STEPS["bucket"])
    make_runner(json_data, migrations).up()
    make_runner(bson_data, migrations).up()
    fast = sorted(
        (repr(b["_id"]), b["count"], b["min"], b["max"]) for b in DumpRunner(json_data, []).files.read("readings")
    )
    slow = sorted(
        (repr(b["_id"]), b["count"], b["min"], b["max"]) for b in DumpRunner(bson_data, []).files.read("readings")
    )
    assert fast == slow


def _parallel_dump(folder: Path) -> Path:
    """Readings in a file large enough for the bucket step's worker processes."""
    data = folder / "iot"
    data.mkdir(parents=True)
    (data / "readings.json").write_text(
        "".join(
            json_util.dumps({"_id": ObjectId(f"{i:024x}"), "sensor": f"s{i % 40}", "ts": datetime.datetime(2026, 1, 1)
                             + datetime.timedelta(seconds=i), "v": i % 13 * 0.5, "note": "x" * 40}) + "\n"
            for i in range(45_000)
        )
    )  # fmt: skip
    assert (data / "readings.json").stat().st_size > 4 * 2**20  # above MIN_PARALLEL_BYTES
    return data


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to look for leftover worker processes")
def test_sigkill_during_a_parallel_bucket_migration_then_resume(tmp_path):
    """A file large enough for worker processes: killed at random moments, the run leaves no worker
    behind, and the next run removes the spill folder and ends byte-identical to an uninterrupted run."""
    migrations = write(tmp_path / "m", "0001_bucket", dict(BIG_STEPS[2], window_seconds=3600))
    interrupted = _kill_at_random_moments(tmp_path, _parallel_dump, migrations, ["--workers", "2"], 4, (0.4, 0.9), 3)
    assert interrupted >= 2  # the kills landed inside the run


@pytest.mark.parametrize("name", ["bucket", "outlier", "computed"])
def test_a_run_stopped_after_a_commit_but_before_marking_the_step_applied_resumes(tmp_path, name):
    """The last moment of a step: its files are committed (phase done) but the step still says running.
    The next run must take the step as done, not run it again on its own output."""
    data = make_dump(tmp_path)
    migrations = write(tmp_path / "m", "0001_m", STEPS[name])
    make_runner(data, migrations).up()
    expected = files(data)
    changelog = data / "mongopat_changelog.json"
    entry = json_util.loads(changelog.read_text().splitlines()[0])
    assert entry["steps"][0]["phase"] == "done"
    entry["state"] = entry["steps"][0]["state"] = "running"
    changelog.write_text(json_util.dumps(entry) + "\n")
    results = make_runner(data, migrations).up()
    assert [r["state"] for r in results] == ["applied"]
    assert files(data) == expected
    assert make_runner(data, migrations).verify() == {"0001_m": []}


def test_verify_finds_a_bucket_file_that_was_tampered_with(tmp_path):
    data = make_dump(tmp_path)
    migrations = write(tmp_path / "m", "0001_b", STEPS["bucket"])
    make_runner(data, migrations).up()
    assert make_runner(data, migrations).verify() == {"0001_b": []}
    lines = (data / "readings.json").read_bytes().splitlines(keepends=True)
    bucket = json_util.loads(lines[0])
    bucket["readings"] = bucket["readings"][1:]  # a reading lost, the count left as it was
    lines[0] = json_util.dumps(bucket).encode() + b"\n"
    (data / "readings.json").write_bytes(b"".join(lines))
    problems = make_runner(data, migrations).verify()["0001_b"]
    assert problems == ["readings: 1 bucket(s) whose count is not their readings"]
    bucket["count"] -= 1
    lines[0] = json_util.dumps(bucket).encode() + b"\n"
    (data / "readings.json").write_bytes(b"".join(lines[:-1]) + b"not json\n")
    problems = make_runner(data, migrations).verify()["0001_b"]
    assert any("not JSON documents" in p for p in problems)
    assert any("buckets hold" in p for p in problems)


@pytest.mark.parametrize("kind", ["bucket", "document"])
def test_ctrl_c_during_a_parallel_migration_prints_one_line(tmp_path, kind):
    """Ctrl-C reaches the whole process group, workers included: one line, exit 130, and the next run
    completes the migration."""
    if kind == "bucket":
        migrations = write(tmp_path / "m", "0001_bucket", dict(BIG_STEPS[2], window_seconds=3600))
    else:
        spec = {"step": "computed", "collection": "readings", "field": "double", "expression": "v * 2"}
        migrations = write(tmp_path / "m", "0001_computed", spec)
    env = dict(os.environ, PYTHONPATH=str(REPOSITORY))
    interrupted = 0
    for attempt, delay in enumerate((0.0, 0.001, 0.02, 0.0, 0.0)):
        if interrupted == 2:
            break
        data = _parallel_dump(tmp_path / f"int{attempt}")
        command = [sys.executable, "-m", "mongopat", "migrate", "up", "--dump", str(data), "--dir", str(migrations),
                   "--yes", "--workers", "2"]  # fmt: skip
        process = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
        )
        deadline = time.monotonic() + 20
        while not list(data.glob(".mongopat-spill-*")) and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)  # until the workers run
        time.sleep(delay)
        os.killpg(process.pid, signal.SIGINT)
        out, err = process.communicate(timeout=30)
        if b"applied" in out:
            continue  # finished before the signal (a signal while Python shuts down ends it with -2)
        assert process.returncode == 130, err
        assert err.decode().strip() == "interrupted"
        interrupted += 1
        result = runner.invoke(app, ["migrate", "up", "--dump", str(data), "--dir", str(migrations), "--yes"])
        assert result.exit_code == 0, result.output
        assert not list(data.glob(".mongopat-spill-*"))
    assert interrupted >= 1


def test_verify_finds_outlier_and_subset_elements_lost_from_the_files(tmp_path):
    """The step modules' own checks of what they wrote: every element kept embedded or moved."""
    data = make_dump(tmp_path)
    migrations = write(tmp_path / "m", "0001_o", STEPS["outlier"])
    make_runner(data, migrations).up()
    assert make_runner(data, migrations).verify() == {"0001_o": []}
    overflow = data / f"{STEPS['outlier']['overflow_collection']}.json"
    lines = overflow.read_bytes().splitlines(keepends=True)
    page = json_util.loads(lines[0])
    field = STEPS["outlier"]["field"]
    page[field] = page[field][1:]  # an element lost from an overflow page
    lines[0] = json_util.dumps(page).encode() + b"\n"
    overflow.write_bytes(b"".join(lines))
    [problem] = make_runner(data, migrations).verify()["0001_o"]
    assert "kept +" in problem and "moved, expected" in problem

    # The subset step's own check: its full collection holds every element the documents had.
    data = make_dump(tmp_path / "s")
    migrations = write(tmp_path / "ms", "0001_s", STEPS["subset"])
    make_runner(data, migrations).up()
    assert make_runner(data, migrations).verify() == {"0001_s": []}
    full = data / f"{STEPS['subset']['full_collection']}.json"
    full.write_bytes(b"".join(full.read_bytes().splitlines(keepends=True)[1:]))  # one element lost
    problems = make_runner(data, migrations).verify()["0001_s"]
    assert any("expected" in p and STEPS["subset"]["full_collection"] in p for p in problems)


@pytest.mark.parametrize("name", ["subset", "bucket"])
def test_a_steps_indexes_go_into_the_metadata_and_down_takes_them_back(tmp_path, name):
    """mongorestore creates the indexes a folder's ``.metadata.json`` lists: a subset's full list read by
    parent, buckets read by series and start, as a server run creates them. ``down`` gives every metadata
    file its bytes back (or removes the one the step made); verify notices an index gone."""
    data = make_dump(tmp_path)
    before = files(data)
    migrations = write(tmp_path / "m", "0001_i", STEPS[name])
    make_runner(data, migrations).up()
    step = load_folder(migrations)[0].steps[0]
    wanted = STEP_OPERATIONS[name].indexes(step)
    assert wanted
    for collection, keys in wanted:
        metadata = json_util.loads((data / f"{collection}.metadata.json").read_text())
        assert {"key": keys, "name": index_name(keys)}.items() <= next(
            spec for spec in metadata["indexes"] if spec["key"] == keys
        ).items()
    assert make_runner(data, migrations).verify() == {"0001_i": []}

    collection, keys = wanted[0]
    path = data / f"{collection}.metadata.json"
    kept = path.read_bytes()
    metadata = json_util.loads(kept)
    metadata["indexes"] = [spec for spec in metadata["indexes"] if spec["key"] != keys]
    path.write_text(json_util.dumps(metadata))
    assert make_runner(data, migrations).verify()["0001_i"] == [
        f"{collection}: index {index_name(keys)} missing from its metadata"
    ]
    path.write_bytes(kept)

    make_runner(data, migrations).down()
    assert files(data) == before


def test_down_keeps_an_index_the_collection_had_before_the_step(tmp_path):
    """The bucket step's index on series and start was already in the folder: up leaves it, and down must
    not take it away with the ones the step added."""
    data = make_dump(tmp_path)
    spec = {"v": 2, "key": {"sensor": 1, "start": 1}, "name": "sensor_1_start_1"}
    (data / "readings.metadata.json").write_text(
        json_util.dumps({"indexes": [{"v": 2, "key": {"_id": 1}, "name": "_id_"}, spec]})
    )
    before = files(data)
    migrations = write(tmp_path / "m", "0001_b", STEPS["bucket"])
    make_runner(data, migrations).up()
    assert make_runner(data, migrations).verify() == {"0001_b": []}
    make_runner(data, migrations).down()
    assert files(data) == before


@pytest.mark.parametrize("suffix", [".json", ".json.gz", ".bson"])
def test_documents_a_step_leaves_alone_keep_their_records(tmp_path, suffix):
    """A document the step does not change is written back as the file held it (its line with the
    exporter's spacing and number spelling, or its BSON bytes), not encoded again; the others as the step
    made them."""
    import gzip

    data = tmp_path / "data"
    data.mkdir()
    lines = [
        b'{ "_id" : 1, "items" : [ 1, 2 ], "price" : 1.50 }',
        b'{"_id":2,"items":[1,2,3,4,5],"price":{"$numberDouble":"2.0"}}',
        b'{"_id" : 3 , "note" : "caf\\u00e9"}',
    ]
    path = data / f"orders{suffix}"
    if suffix == ".bson":
        records = [bson.encode(json_util.loads(line)) for line in lines]
        path.write_bytes(b"".join(records))
    else:
        body = b"\r\n".join(lines) + b"\r\n"
        path.write_bytes(gzip.compress(body) if suffix.endswith(".gz") else body)
    migrations = write(tmp_path / "m", "0001_outlier", {"step": "outlier", "collection": "orders", "field": "items",
                                                        "threshold": 3, "overflow_collection": "orders_more"})  # fmt: skip
    make_runner(data, migrations).up()
    written = path.read_bytes()
    if suffix == ".bson":
        assert written.startswith(records[0]) and written.endswith(records[2])
        assert bson.decode(written[len(records[0]) : -len(records[2])])["has_overflow"] is True
        return
    out = (gzip.decompress(written) if suffix.endswith(".gz") else written).split(b"\n")
    assert out[0] == lines[0] and out[2] == lines[2] and out[3] == b""
    assert json_util.loads(out[1])["items"] == [1, 2, 3] and json_util.loads(out[1])["has_overflow"] is True


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1 << 20])
def test_verification_counts_the_lines_that_hold_a_document(size):
    """count_records counts newlines a chunk at a time; whatever the chunks, it counts what a loop over the
    lines counts: lines holding more than whitespace, the last one without its newline included."""
    rng = random.Random(size)
    for _ in range(500):
        lines = [
            rng.choice([b"{}", b"", b" ", b"\t", b"\r", b'{"a": 1}', b"\x0b", b" {} "]) for _ in range(rng.randrange(9))
        ]
        data = b"\n".join(lines) + rng.choice([b"", b"\n", b"\r\n", b" ", b"{}"])
        wanted = sum(1 for line in io.BytesIO(data) if line and not line.isspace())
        assert _nonblank_lines(io.BytesIO(data), size) == wanted, data


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to look for leftover worker processes")
def test_sigkill_during_a_parallel_document_step_then_resume(tmp_path):
    """A document step on a file large enough for worker processes: killed at random moments, no worker is
    left behind, and the next run ends byte-identical to an uninterrupted run."""
    spec = {"step": "computed", "collection": "readings", "field": "double", "expression": "v * 2"}
    migrations = write(tmp_path / "m", "0001_computed", spec)
    interrupted = _kill_at_random_moments(tmp_path, _parallel_dump, migrations, ["--workers", "2"], 5, (0.3, 0.9), 3)
    assert interrupted >= 2  # the kills landed inside the run
