"""Buckets made by hand (the bucket pattern in place) unwound into a time-series collection by the
timeseries step: every element a reading with its bucket's series, none twice after a crash, pushes the
application makes while up runs carried, and down putting what the application wrote to the time-series
collection back into buckets (elements changed or removed, counts kept, new readings in new buckets),
untouched buckets byte for byte."""

from __future__ import annotations

import datetime
import json
import random
from pathlib import Path
from typing import Any

import bson
import pytest
from bson import ObjectId

from mongopat.command import migrate_down, migrate_up, migrate_verify
from mongopat.migrate.bookkeeping import CHANGELOG
from mongopat.migrate.script import load_folder
from mongopat.migrate.server.runner import Runner, RunOptions
from mongopat.sources import SourceSpec
from mongopat.sources.dump import DumpSource
from mongopat.timeseries.sync import canonical
from mongopat.timeseries.unwind import Readings, made_id
from tests.support.dumps import write_bson_dump
from tests.support.timeseries import NO_TIMESERIES, START, hand_buckets, unwind_file

UNWOUND = Readings("ts", "readings", "sensor", "count", "start", "end")


def unwound(buckets: list[dict]) -> list[bytes]:
    return sorted(canonical(r) for b in buckets for r in UNWOUND.of(b))


def run(db: Any, folder: Path, **options: Any) -> Runner:
    return Runner(db, load_folder(folder), RunOptions(**{"batch_size": 7, "lock_timeout": 0.3, **options}))


def test_an_element_becomes_a_reading_with_its_bucket_s_series_and_a_stable_id():
    [bucket] = hand_buckets(1, 3, 1)
    readings = UNWOUND.of(bucket)
    assert [r["ts"] for r in readings] == [e["ts"] for e in bucket["readings"]]
    assert all(r["sensor"] == "s0" and "count" not in r for r in readings)
    assert readings[1]["_id"] == made_id(bucket["_id"], 1, bucket["readings"][1]["ts"]) == UNWOUND.of(bucket)[1]["_id"]
    # Its id starts with its time, as a client's ObjectId does.
    assert readings[1]["_id"].generation_time == bucket["readings"][1]["ts"].replace(tzinfo=datetime.timezone.utc)
    bucket["readings"].append({"temp": 1.0})  # no time: no reading, counted as refused
    assert len(UNWOUND.of(bucket)) == 3 and UNWOUND.refused(bucket) == 1


def test_on_a_dump_folder_buckets_unwind_and_down_gives_the_file_back(tmp_path):
    data, buckets = tmp_path / "db", hand_buckets()
    write_bson_dump(data, "readings", buckets)
    original = (data / "readings.bson").read_bytes()
    spec, folder = SourceSpec(dump=str(data)), unwind_file(tmp_path / "m")
    [result] = migrate_up(spec, str(folder))
    assert result["state"] == "applied"
    moved = [d for d, _ in DumpSource(data).documents("readings_ts", None)]
    assert sorted(canonical(d) for d in moved) == unwound(buckets) and len(moved) == 40 * 25
    assert migrate_verify(spec, str(folder)) == {"0001_ts": []}
    migrate_down(spec, str(folder), to="base")
    assert (data / "readings.bson").read_bytes() == original


@pytest.mark.diverges("mongomock", NO_TIMESERIES)
def test_pushes_while_up_runs_are_carried_and_a_crash_resumes_to_every_reading_once(mongo, tmp_path):
    db = mongo.db
    db.readings.insert_many(hand_buckets())
    rng = random.Random(3)
    calls = {"n": 0}

    def application(*_args: Any) -> None:  # pushes a reading into a bucket after each batch; a crash at 4
        calls["n"] += 1
        if calls["n"] <= 6:
            bucket = rng.choice(list(db.readings.find({}, {"_id": 1})))["_id"]
            reading = {"ts": START + datetime.timedelta(minutes=rng.randint(0, 999)), "temp": rng.random()}
            db.readings.update_one({"_id": bucket}, {"$push": {"readings": reading}, "$inc": {"count": 1}})
        if calls["n"] == 4:
            raise RuntimeError("injected")

    folder = unwind_file(tmp_path / "m")
    with pytest.raises(RuntimeError):
        run(db, folder, on_batch=application).up()
    run(db, folder, on_batch=application).up()
    ids = [d["_id"] for d in db.readings_ts.find({}, {"_id": 1})]
    assert len(ids) == len(set(ids)), "a reading copied twice"
    assert sorted(canonical(d) for d in db.readings_ts.find()) == unwound(list(db.readings.find()))


@pytest.mark.diverges("mongomock", NO_TIMESERIES)
def test_down_puts_the_application_s_writes_back_into_buckets(mongo, tmp_path):
    db = mongo.db
    buckets = hand_buckets()
    db.readings.insert_many(buckets)
    before = {d["_id"]: bson.encode(d) for d in db.readings.find()}
    folder = unwind_file(tmp_path / "m")
    run(db, folder).up()
    first, second = buckets[0], buckets[1]
    changed = made_id(first["_id"], 2, first["readings"][2]["ts"])
    removed = made_id(second["_id"], 0, second["readings"][0]["ts"])
    db.readings_ts.update_many({"_id": changed}, {"$set": {"temp": -5.0}})
    db.readings_ts.delete_many({"_id": removed})
    new = [{"_id": ObjectId(), "ts": START + datetime.timedelta(days=2, minutes=i), "sensor": "s9", "temp": 1.0 * i}
           for i in range(3)]  # fmt: skip
    db.readings_ts.insert_many(new)
    run(db, folder).down()
    assert "readings_ts" not in db.list_collection_names()
    after = {d["_id"]: d for d in db.readings.find()}
    assert after[first["_id"]]["readings"][2] == {**first["readings"][2], "temp": -5.0}
    assert after[first["_id"]]["count"] == 25
    assert after[second["_id"]]["readings"] == second["readings"][1:] and after[second["_id"]]["count"] == 24
    [made] = [d for i, d in after.items() if i not in before]
    assert (
        made["sensor"] == "s9" and made["count"] == 3 and made["start"] == new[0]["ts"] and made["end"] == new[2]["ts"]
    )
    assert [e["_id"] for e in made["readings"]] == [r["_id"] for r in new]
    untouched = set(before) - {first["_id"], second["_id"]}
    assert all(bson.encode(after[i]) == before[i] for i in untouched), "a bucket the application left alone changed"


@pytest.mark.diverges("mongomock", NO_TIMESERIES)
def test_a_bucket_pushed_to_and_its_reading_changed_in_the_copy_is_refused(mongo, tmp_path):
    from mongopat.errors import OperationFailed

    db = mongo.db
    buckets = hand_buckets(8, 5, 2)
    db.readings.insert_many(buckets)
    folder = unwind_file(tmp_path / "m")
    run(db, folder).up()
    db.readings.update_one({"_id": buckets[0]["_id"]}, {"$set": {"readings.1.temp": 7.0}})
    db.readings_ts.update_many({"_id": made_id(buckets[0]["_id"], 3, buckets[0]["readings"][3]["ts"])},
                               {"$set": {"temp": 8.0}})  # fmt: skip
    kept = sorted(bson.encode(d) for d in db.readings.find())
    with pytest.raises(OperationFailed, match="cannot tell"):
        run(db, folder).down()
    assert sorted(bson.encode(d) for d in db.readings.find()) == kept
    assert db[CHANGELOG].find_one({"_id": "0001_ts"}) is not None


# -- the advice ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("access", "fires"),
    [
        (None, True),
        # The buckets' updates are the pushes of readings: inserts once unwound.
        ("version: 1\ncollections:\n  readings:\n    writes: {updates_per_sec: 40}\n", True),
        ("version: 1\ncollections:\n  readings:\n    change_streams: true\n", False),
        ("version: 1\ncollections:\n  readings:\n    writes: {deletes_per_sec: 1}\n", False),
        ("version: 1\nmongodb_version: '7.0'\ncollections:\n  readings:\n    writes: {deletes_per_sec: 1}\n", True),
    ],
)
def test_buckets_made_by_hand_get_a_time_series_collection_unless_the_workload_refuses_one(tmp_path, access, fires):
    from tests.support.evidence import findings, report_of

    report = report_of(tmp_path, {"readings": hand_buckets(400, 60, 10)})
    found = findings(report, access, rule="MP113")
    assert len(found) == (1 if fires else 0)
    if fires:
        [rec] = found
        assert rec.migration["unwind"] == "readings" and rec.migration["meta_field"] == "sensor"
        assert rec.migration["count_field"] == "count" and rec.migration["start_field"] == "start"
        assert rec.evidence["readings"] == 24_000 and rec.evidence["seconds_between_readings"] == 60.0


def test_from_the_advice_to_down_on_a_dump_folder_predictions_come_true(tmp_path):
    from mongopat.command import analyze, migrate_plan, migrate_predictions, recommend

    data = tmp_path / "db"
    write_bson_dump(data, "readings", hand_buckets(400, 60, 10))
    original = (data / "readings.bson").read_bytes()
    spec = SourceSpec(dump=str(data))
    result = recommend(analyze(spec), None, source=spec)
    assert [r["code"] for r in result["recommendations"] if r["code"] == "MP113"] == ["MP113"]
    recs = tmp_path / "recs.json"
    recs.write_text(json.dumps(result, default=str))
    migrate_plan(str(recs), str(tmp_path / "m"), only=["MP113"])
    [applied] = migrate_up(spec, str(tmp_path / "m"))
    assert applied["state"] == "applied"
    found = migrate_predictions(spec, str(tmp_path / "m"))[applied["id"]]
    assert found and not [d for d in found if d["beyond_tolerance"]], found
    buckets = next(d for d in found if d["collection"].startswith("system.buckets") and d["figure"] == "data_bytes")
    assert buckets["measured"] <= buckets["predicted"], "the uncompressed bytes are a bound"
    migrate_down(spec, str(tmp_path / "m"), to="base")
    assert (data / "readings.bson").read_bytes() == original
