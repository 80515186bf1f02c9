"""Time-series collections: the options a cadence calls for, what each MongoDB version refuses, buckets
packed and unpacked as a dump holds them, time-series collections read from dumps, archives and servers,
the advice (MP113 against MP101), and the timeseries step on both backends."""

from __future__ import annotations

import datetime
import json
import random
from pathlib import Path
from typing import Any

import bson
import pytest
from bson import Binary, ObjectId, json_util

from mongopat.access.loader import AccessFileError, parse_access_text
from mongopat.command import analyze, recommend
from mongopat.errors import InputError, OperationFailed
from mongopat.migrate.bookkeeping import CHANGELOG
from mongopat.migrate.script import load_folder
from mongopat.migrate.server.runner import Runner, RunOptions
from mongopat.sources import SourceSpec
from mongopat.sources.dump import DumpSource
from mongopat.timeseries.buckets import BUCKETS_PREFIX, MeasurementError, pack, unpack
from mongopat.timeseries.limits import Workload, judge, parse_version
from mongopat.timeseries.options import TimeSeriesOptions, custom_span_for, granularity_for
from tests.support.dumps import write_archive, write_bson_dump
from tests.support.evidence import findings, report_of
from tests.support.timeseries import NO_TIMESERIES, START, migration_file, readings

# -- options and limits --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "granularity"),
    [(1, "seconds"), (59, "seconds"), (60, "minutes"), (3599, "minutes"), (3600, "hours"), (86400, "hours")],
)
def test_granularity_follows_the_time_between_two_readings_of_a_series(seconds, granularity):
    assert granularity_for(seconds) == granularity


@pytest.mark.parametrize(
    ("seconds", "span"),
    [
        (2, None),  # 1,000 readings in 33 minutes: the seconds granularity's hour is near enough
        (10, 3 * 3600),  # 1,000 readings in 2.8 hours: three times the hour a seconds bucket spans
        (3600, None),  # hourly readings: 30 days hold 720
        (86400, 31_536_000),  # daily readings: a year (the longest span) holds 365, 30 days 30
    ],
)
def test_a_custom_span_where_it_fills_buckets_twice_as_well(seconds, span):
    assert custom_span_for(seconds) == span


def test_options_round_trip_through_what_a_server_lists():
    listed = {
        "timeseries": {"timeField": "t", "metaField": "m", "granularity": "minutes", "bucketMaxSpanSeconds": 86400}
    }
    options = TimeSeriesOptions.from_collection({**listed, "expireAfterSeconds": 600})
    assert options == TimeSeriesOptions("t", "m", "minutes", None, 600)
    assert options.same_as(listed["timeseries"]) and options.create_options()["granularity"] == "minutes"
    custom = TimeSeriesOptions.from_collection({"timeseries": {"timeField": "t", "bucketMaxSpanSeconds": 7200}})
    assert custom.bucket_max_span_seconds == 7200 and custom.needs_version() == "6.3"
    assert TimeSeriesOptions.from_collection({"validator": {}}) is None
    with pytest.raises(InputError, match="granularity 'weeks'"):
        TimeSeriesOptions("t", granularity="weeks")


@pytest.mark.parametrize(
    ("workload", "version", "blocked"),
    [
        (Workload(), None, []),
        (Workload(updates_per_sec=1), None, ["before 7.0"]),
        (Workload(updates_per_sec=1), (6, 3), ["before 7.0"]),
        (Workload(inserts_per_sec=100, updates_per_sec=1), (7, 0), []),
        (Workload(inserts_per_sec=100, updates_per_sec=50), (8, 0), ["rewrites its whole compressed bucket"]),
        (Workload(deletes_per_sec=1), (6, 0), ["before 7.0"]),
        (Workload(deletes_per_sec=1), (7, 0), []),
        (Workload(change_streams=True), (8, 0), ["change stream"]),
        (Workload(largest_document_bytes=5 * 1024 * 1024), None, ["4 MB"]),
        (Workload(unique_indexes=("email_1",)), None, ["unique index email_1"]),
        (Workload(text_indexes=("notes_text",)), None, ["text index notes_text"]),
        (Workload(), (4, 4), ["no time-series collections"]),
    ],
)
def test_the_limits_a_workload_meets_by_version(workload, version, blocked):
    verdict = judge(workload, version, "declared")
    assert len(verdict.blockers) == len(blocked)
    for blocker, words in zip(verdict.blockers, blocked, strict=True):
        assert words in blocker.describe()
    assert verdict.version == (version or (5, 0))


def test_versions_are_read_as_written():
    assert parse_version("7.0.3") == (7, 0, 3) and parse_version("6.3") > parse_version("6.0.14")
    with pytest.raises(InputError, match="not a MongoDB version"):
        parse_version("seven")


# -- buckets -------------------------------------------------------------------------------------------------


def test_buckets_close_at_1000_readings_at_the_end_of_their_span_and_when_time_goes_back():
    options = TimeSeriesOptions("ts", "sensor", "seconds")
    one = [{"_id": i, "ts": START + datetime.timedelta(seconds=i), "sensor": "a", "v": i} for i in range(2500)]
    assert [len(b["data"]["ts"]) for b in pack(one, options)] == [1000, 1000, 500]
    spread = [{"_id": i, "ts": START + datetime.timedelta(seconds=10 * i), "sensor": "a"} for i in range(1080)]
    buckets = list(pack(spread, options))  # three hours at one reading every ten seconds: an hour a bucket
    assert [len(b["data"]["ts"]) for b in buckets] == [360, 360, 360]
    assert all(b["control"]["min"]["ts"].second == 0 for b in buckets)  # starts rounded to the minute
    back = [{"ts": START + datetime.timedelta(minutes=5), "sensor": "a"}, {"ts": START, "sensor": "a"}]
    assert len(list(pack(back, options))) == 2


def test_readings_out_of_time_order_fill_the_buckets_their_span_holds_as_on_6_3():
    """A reading goes into an open bucket of its series whose span holds its time (6.3's reopening), else
    opens one at its own time rounded down: shuffled readings fill overlapping buckets, a few times as many
    as sorted ones, not one bucket per turn back in time; past the open bytes allowed, the least recently
    written bucket closes and late readings open more."""
    options = TimeSeriesOptions("ts", "sensor", "minutes")
    docs = [{"_id": i, "ts": START + datetime.timedelta(minutes=7 * i), "sensor": f"s{i % 3}"} for i in range(900)]
    shuffled = docs[:]
    random.Random(1).shuffle(shuffled)
    in_order, reopened = len(list(pack(docs, options))), list(pack(shuffled, options))
    assert (in_order, len(reopened)) == (15, 35) and sum(len(b["data"]["ts"]) for b in reopened) == 900
    assert len(list(pack(shuffled, options, open_bytes=2000))) > 200


def test_packed_buckets_unpack_to_the_same_readings_and_pack_the_same_twice():
    options = TimeSeriesOptions("ts", "meta", "minutes")
    docs = [
        {"_id": i, "ts": START + datetime.timedelta(minutes=i), "meta": {"b": i % 2, "a": "x"}, "v": i * 1.5}
        for i in range(300)
    ]
    docs[7]["extra"] = "only here"
    docs[8]["meta"] = {"a": "x", "b": 0}  # the same series whatever the order of its fields
    buckets = list(pack(docs, options))
    assert len(buckets) == 2 and [b["meta"] for b in buckets] == [{"a": "x", "b": 0}, {"a": "x", "b": 1}]
    back = sorted((m for b in buckets for m in unpack(b, options).measurements), key=lambda m: m["_id"])
    assert [(m["_id"], m["ts"], m["v"], m.get("extra")) for m in back] == [
        (d["_id"], d["ts"], d["v"], d.get("extra")) for d in docs
    ]
    assert buckets[0]["control"]["min"]["v"] == 0 and buckets[1]["control"]["max"]["extra"] == "only here"
    assert [b["_id"] for b in pack(docs, options)] == [b["_id"] for b in buckets]
    with pytest.raises(MeasurementError, match="not a date"):
        list(pack([{"ts": "yesterday"}], options))


def test_bucket_bounds_take_mongodbs_order_across_types_and_nan():
    """control.min and max are the least and greatest of a column in BSON's order: NaN (a Decimal128 sNaN
    too) below every number, numbers below strings."""
    options = TimeSeriesOptions("ts", "sensor", "minutes")
    values = [5, float("nan"), "text", bson.Decimal128("sNaN"), 7.5, bson.Decimal128("-1")]
    docs = [
        {"_id": i, "ts": START + datetime.timedelta(minutes=i), "sensor": "a", "v": v} for i, v in enumerate(values)
    ]
    (only,) = pack(docs, options)
    low, high = only["control"]["min"]["v"], only["control"]["max"]["v"]
    assert isinstance(low, float) and low != low and high == "text"
    numbers = [{**doc, "v": v} for doc, v in zip(docs, [5, 7.5, bson.Decimal128("-1"), 2, 3, 4], strict=True)]
    (only,) = pack(numbers, options)
    assert (only["control"]["min"]["v"], only["control"]["max"]["v"]) == (bson.Decimal128("-1"), 7.5)


def test_a_compressed_bucket_is_counted_not_read():
    bucket = {
        "_id": ObjectId(),
        "control": {"version": 2, "min": {"ts": START}, "max": {"ts": START}, "count": 5},
        "meta": "a",
        "data": {"ts": Binary(b"\x09\x00", 7), "v": Binary(b"\x01\x00", 7)},
    }
    found = unpack(bucket, TimeSeriesOptions("ts", "sensor"))
    assert found.measurements == [] and found.compressed == 5


# -- reading time-series collections -----------------------------------------------------------------------------


def write_timeseries_dump(folder: Path, name: str, docs: list[dict], options: TimeSeriesOptions | None) -> Path:
    """A time-series collection as mongodump writes it: its buckets, and its options in its metadata."""
    folder.mkdir(parents=True, exist_ok=True)
    packing = options or TimeSeriesOptions("ts", "sensor", "seconds")
    (folder / f"{BUCKETS_PREFIX}{name}.bson").write_bytes(b"".join(bson.encode(b) for b in pack(docs, packing)))
    if options is not None:
        meta = {"options": {"timeseries": options.create_options()}, "indexes": [], "type": "timeseries"}
        (folder / f"{name}.metadata.json").write_text(json_util.dumps(meta))
    return folder


def test_a_dump_folder_time_series_collection_is_read_as_its_readings(tmp_path):
    docs = readings(600)
    options = TimeSeriesOptions("ts", "sensor", "minutes")
    write_timeseries_dump(tmp_path / "db", "weather", docs, options)
    write_bson_dump(tmp_path / "db", "stations", [{"_id": 1}])
    source = DumpSource(tmp_path / "db")
    assert source.collections() == ["stations", "weather"] and source.timeseries("weather") == options
    read = sorted((d for d, _size in source.documents("weather", None)), key=lambda d: d["n"])
    assert [(d["_id"], d["ts"], d["sensor"], d["temp"]) for d in read] == [
        (d["_id"], d["ts"], d["sensor"], d["temp"]) for d in docs
    ]
    [entry] = [c for c in analyze(SourceSpec(dump=str(tmp_path / "db")))["collections"] if c["name"] == "weather"]
    assert entry["count"] == 600 and entry["timeseries"]["buckets"] == 10 and entry["timeseries"]["series"] == 10
    assert entry["timeseries"]["options"] == options.create_options()
    assert any("600 measurements in 10 buckets" in note for note in entry["notes"])


def test_buckets_without_their_options_or_compressed_are_said_not_skipped(tmp_path):
    write_timeseries_dump(tmp_path / "a", "weather", readings(100), None)
    [entry] = analyze(SourceSpec(dump=str(tmp_path / "a")))["collections"]
    assert entry["name"] == "weather" and any("cannot be read as measurements" in n for n in entry["notes"])
    folder = write_timeseries_dump(tmp_path / "b", "weather", readings(100), TimeSeriesOptions("ts", "sensor"))
    compressed = {
        "_id": ObjectId(),
        "control": {"version": 2, "min": {"ts": START}, "max": {"ts": START}, "count": 40},
        "meta": "z",
        "data": {"ts": Binary(b"\x09\x00", 7)},
    }
    with (folder / f"{BUCKETS_PREFIX}weather.bson").open("ab") as handle:
        handle.write(bson.encode(compressed))
    [entry] = analyze(SourceSpec(dump=str(folder)))["collections"]
    assert entry["count"] == 140 and entry["sampling"]["documents"] == 100
    assert any("40 measurements of 1 compressed buckets" in n and "not analysed" in n for n in entry["notes"])


def test_an_archive_time_series_collection_is_read_from_its_buckets(tmp_path):
    options = TimeSeriesOptions("ts", "sensor", "minutes")
    docs = readings(300)
    archive = write_archive(
        tmp_path / "dump.archive",
        {("db", "weather"): list(pack(docs, options)), ("db", "stations"): [{"_id": 1}]},
        timeseries={("db", "weather"): options.create_options()},
    )
    source = DumpSource(archive)
    assert source.collections() == ["stations", "weather"]
    assert sorted(d["n"] for d, _size in source.documents("weather", None)) == list(range(300))


def test_a_server_time_series_collection_is_analysed_as_its_readings(mongo):
    try:
        mongo.db.create_collection("weather", timeseries={"timeField": "ts", "metaField": "sensor"})
    except NotImplementedError:
        pytest.skip("mongomock creates no time-series collection (the README's conformance table)")
    mongo.db.weather.insert_many(readings(200))
    [entry] = analyze(SourceSpec(uri=mongo.uri, db=mongo.db_name))["collections"]
    assert entry["name"] == "weather" and entry["count"] == 200
    assert entry["timeseries"]["options"]["metaField"] == "sensor"


# -- the advice ----------------------------------------------------------------------------------------------------


def test_readings_inserted_only_get_a_time_series_collection_sized_by_their_cadence(tmp_path):
    report = report_of(tmp_path, {"readings": readings(3000, every=2.0, sensors=10)})
    assert findings(report, rule="MP101") == []
    [rec] = findings(report, rule="MP113")
    assert rec.migration == {
        "step": "timeseries", "collection": "readings", "to": "readings_ts", "time_field": "ts", "meta_field": "sensor",
        "granularity": "seconds", "bucket_max_span_seconds": None, "measurements_per_bucket": 300.0,
    }  # fmt: skip
    assert rec.evidence["seconds_between_readings"] == 2.0 and rec.evidence["buckets_estimate"] == 10
    [readings_after, buckets] = rec.prediction["collections"]
    assert readings_after["after"]["documents"] == 3000 and buckets["after"]["documents"] == 10
    # The bytes are a bound (uncompressed buckets), near what packing the readings takes.
    options = TimeSeriesOptions("ts", "sensor", "seconds")
    packed = sum(len(bson.encode(b)) for b in pack(iter(readings(3000, every=2.0, sensors=10)), options))
    assert buckets["at_most"] == ["data_bytes"] and packed <= buckets["after"]["data_bytes"] <= packed * 1.1
    assert "No workload is declared" in rec.rationale


def test_one_observation_per_station_is_bucketed_by_time_alone_or_not_at_all(tmp_path):
    """2,000 stations, one observation each, over a week: no series to group by. By time alone, buckets
    fill; read by station, as a declared read says, a bucket would hold one reading: no advice."""
    docs = readings(2000, every=7 * 86400, sensors=2000)
    for doc in docs:
        doc["type"] = "FM-13" if doc["n"] % 500 else "SAO"  # a report type: one value nearly everywhere
    report = report_of(tmp_path, {"obs": docs})
    [rec] = findings(report, rule="MP113")
    assert rec.migration["meta_field"] is None and "No field labels a series" in rec.rationale
    read = "version: 1\ncollections:\n  obs:\n    queries:\n      - {name: q, filter: {sensor: eq, ts: range}}\n"
    assert findings(report, read, rule="MP113") == []


@pytest.mark.parametrize(
    ("access", "refusal"),
    [
        ("writes: {inserts_per_sec: 5, updates_per_sec: 1}", "before 7.0"),
        ("change_streams: true\n    writes: {inserts_per_sec: 5}", "change stream"),
    ],
)
def test_a_workload_a_time_series_collection_refuses_gets_buckets_and_says_why(tmp_path, access, refusal):
    report = report_of(tmp_path, {"readings": readings(3000, every=2.0, sensors=10)})
    text = f"version: 1\ncollections:\n  readings:\n    {access}\n"
    assert findings(report, text, rule="MP113") == []
    [bucket] = findings(report, text, rule="MP101")
    assert refusal in bucket.evidence["time_series_collection_refused"][0] and "does not fit" in bucket.rationale


def test_updates_on_7_0_are_a_caution_not_a_refusal(tmp_path):
    report = report_of(tmp_path, {"readings": readings(3000, every=2.0, sensors=10)})
    text = "version: 1\nmongodb_version: '7.0'\ncollections:\n  readings:\n    writes: {inserts_per_sec: 5, updates_per_sec: 0.1}\n"
    [rec] = findings(report, text, rule="MP113")
    assert rec.evidence["mongodb_version"] == "7.0" and any("updates/s work" in t for t in rec.tradeoffs)


def test_daily_readings_of_one_series_get_a_custom_span_on_6_3(tmp_path):
    days = [{"_id": i, "date": START + datetime.timedelta(days=i), "rate": 1 + i % 9 / 10} for i in range(1500)]
    report = report_of(tmp_path, {"yields": days})
    [old] = findings(report, rule="MP113")
    assert old.migration["granularity"] == "hours" and old.migration["meta_field"] is None
    assert "On 6.3+" in old.rationale
    [new] = findings(report, "version: 1\nmongodb_version: '6.3'\ncollections: {}\n", rule="MP113")
    assert new.migration["granularity"] is None and new.migration["bucket_max_span_seconds"] == 31_536_000
    assert new.evidence["measurements_per_bucket"] > old.evidence["measurements_per_bucket"]


def test_documents_without_a_date_in_the_time_field_refuse_a_time_series_collection(tmp_path):
    docs = readings(3000, every=2.0, sensors=10)
    for doc in docs[::50]:
        doc["ts"] = None
    assert findings(report_of(tmp_path, {"readings": docs}), rule="MP113") == []


def test_the_access_file_takes_a_version_and_change_streams():
    access = parse_access_text("version: 1\nmongodb_version: 7.10\ncollections:\n  r: {change_streams: true}\n")
    assert access.mongodb_version == "7.10" and access.collections["r"].change_streams
    with pytest.raises(AccessFileError, match=r"access.yaml:2.*not a MongoDB version"):
        parse_access_text("version: 1\nmongodb_version: seven\ncollections: {}\n", "access.yaml")


# -- the step on a dump folder ---------------------------------------------------------------------------------


def test_on_a_dump_folder_the_readings_become_buckets_mongorestore_restores_and_down_gives_the_file_back(tmp_path):
    from mongopat import command

    data = tmp_path / "db"
    docs = readings(1200)
    docs[3]["ts"] = "not a date"
    write_bson_dump(data, "readings", docs)
    original = (data / "readings.bson").read_bytes()
    migrations = migration_file(tmp_path / "m")
    spec = SourceSpec(dump=str(data))
    # A document without a date cannot be a reading: up stops at its verification, leaving it where it is.
    with pytest.raises(OperationFailed, match="1 document.s. of readings hold no date in ts"):
        command.migrate_up(spec, str(migrations))
    assert sum(1 for _ in DumpSource(data).documents("readings_ts", None)) == 1199
    docs[3]["ts"] = START  # the cause fixed, the next up resumes
    write_bson_dump(data, "readings", docs)
    original = (data / "readings.bson").read_bytes()
    [result] = command.migrate_up(spec, str(migrations))
    assert result["state"] == "applied"
    metadata = json_util.loads((data / "readings_ts.metadata.json").read_text())
    assert metadata["type"] == "timeseries"  # what mongorestore reads to create the collection
    assert metadata["options"]["timeseries"] == {"timeField": "ts", "metaField": "sensor", "granularity": "seconds"}
    assert (data / f"{BUCKETS_PREFIX}readings_ts.bson").exists() and not (data / "readings_ts.bson").exists()
    source = DumpSource(data)
    moved = sorted((d for d, _ in source.documents("readings_ts", None)), key=lambda d: d["n"])
    assert [(d["_id"], d["ts"]) for d in moved] == [(d["_id"], d["ts"]) for d in docs]
    assert command.migrate_verify(spec, str(migrations)) == {"0001_ts": []}
    command.migrate_down(spec, str(migrations), to="base")
    assert (data / "readings.bson").read_bytes() == original
    assert sorted(p.name for p in data.iterdir() if not p.name.startswith("mongopat_")) == ["readings.bson"]


def test_the_guide_of_a_time_series_migration_is_proven_on_a_dump_folder(tmp_path):
    from mongopat import command

    data = tmp_path / "db"
    write_bson_dump(data, "readings", readings(1200))
    access = tmp_path / "access.yaml"
    access.write_text(
        "version: 1\ncollections:\n  readings:\n    writes: {inserts_per_sec: 5}\n    queries:\n"
        "      - {name: sensor_hour, filter: {sensor: eq, ts: range}, sort: {ts: 1}, per_sec: 2}\n"
    )
    spec = SourceSpec(dump=str(data))
    result = recommend(analyze(spec), str(access), source=spec)
    [rec] = [r for r in result["recommendations"] if r["code"] == "MP113"]
    assert rec["index_steps"] == [
        {"step": "create_index", "collection": "readings_ts", "keys": {"sensor": 1, "ts": 1}, "name": "sensor_1_ts_1"}
    ]
    [read] = rec["prediction"]["reads"]
    assert read["examined_after"] < read["examined_before"]
    recs = tmp_path / "recs.json"
    recs.write_text(json.dumps(result, default=str))
    command.migrate_plan(str(recs), str(tmp_path / "m"), only=["MP113"])
    command.migrate_up(spec, str(tmp_path / "m"))
    checked = command.migrate_guide_check(spec, str(tmp_path / "m"), str(access), None)
    [proof] = checked["migrations"]
    assert checked["ok"] and proof["reads_compared"] > 0 and proof["documents_compared"] > 0


# -- the step on a server ---------------------------------------------------------------------------------------


def run(db: Any, folder: Path, **options: Any) -> Runner:
    return Runner(db, load_folder(folder), RunOptions(**{"batch_size": 250, "lock_timeout": 0.3, **options}))


def raw_readings(db: Any, name: str) -> list[bytes]:
    return sorted(bson.encode(d) for d in db[name].find())


@pytest.mark.diverges("mongomock", NO_TIMESERIES)
def test_up_with_the_application_writing_then_down_loses_nothing(mongo, tmp_path):
    db = mongo.db
    docs = readings(1000)
    db.readings.insert_many(docs)
    before = raw_readings(db, "readings")
    folder = migration_file(tmp_path / "m")
    written: list[dict] = []

    def application(*_args: Any) -> None:  # the application inserts a reading after every batch
        reading = {"_id": ObjectId(), "ts": START + datetime.timedelta(hours=5), "sensor": "s0", "temp": 1.0, "n": -1}
        db.readings.insert_one(reading)
        written.append(reading)

    [result] = run(db, folder, on_batch=application).up()
    assert result["state"] == "applied"
    # Passes chase the application's inserts a bounded number of times; what it wrote after the last one
    # is the step's pending documents, which the next up copies.
    pending = run(db, folder).status()[0]["pending_documents"]
    assert db.readings_ts.count_documents({}) + pending == 1000 + len(written) and pending <= 1
    options = next(c for c in db.list_collections() if c["name"] == "readings_ts")["options"]
    assert options["timeseries"]["timeField"] == "ts"
    assert run(db, folder).verify() == {"0001_ts": []}
    # After up, before it switched: one more into the old collection (the next up copies it), one into the new.
    late = {"_id": ObjectId(), "ts": START, "sensor": "s1", "temp": 2.0, "n": -2}
    db.readings.insert_one(late)
    assert run(db, folder).status()[0]["pending_documents"] == pending + 1
    run(db, folder).up()
    assert db.readings_ts.count_documents({"_id": late["_id"]}) == 1
    assert db.readings_ts.count_documents({}) == db.readings.count_documents({}) == 1000 + len(written) + 1
    new = {"_id": ObjectId(), "ts": START, "sensor": "s2", "temp": 3.0, "n": -3}
    db.readings_ts.insert_one(new)
    run(db, folder).down()
    assert "readings_ts" not in db.list_collection_names()
    after = raw_readings(db, "readings")
    assert set(before) <= set(after) and len(after) == len(before) + len(written) + 2
    assert db.readings.find_one({"_id": new["_id"]})["temp"] == 3.0


class Boom(Exception):
    pass


@pytest.mark.diverges("mongomock", NO_TIMESERIES)
def test_a_crash_at_any_batch_resumes_to_every_reading_once(mongo, tmp_path):
    db = mongo.db
    db.readings.insert_many(readings(1000))
    rng = random.Random(5)
    for attempt in range(3):
        db.drop_collection("readings_ts")
        db.drop_collection(CHANGELOG)
        folder = migration_file(tmp_path / f"m{attempt}")
        cut = rng.randint(1, 4)
        calls = {"n": 0}

        def fault(*_args: Any, cut: int = cut, calls: dict = calls) -> None:
            calls["n"] += 1
            if calls["n"] == cut:
                raise Boom(f"injected at batch {cut}")

        with pytest.raises(Boom):
            run(db, folder, on_batch=fault).up()
        run(db, folder).up()
        ids = [d["_id"] for d in db.readings_ts.find({}, {"_id": 1})]
        assert len(ids) == len(set(ids)) == 1000, f"attempt {attempt}, cut at batch {cut}"


def test_a_collection_of_the_target_name_is_never_written_or_dropped(mongo, tmp_path):
    db = mongo.db
    db.readings.insert_many(readings(100))
    db.readings_ts.insert_one({"_id": 1, "theirs": True})
    with pytest.raises(OperationFailed, match="readings_ts exists already"):
        run(db, migration_file(tmp_path / "m")).up()
    assert list(db.readings_ts.find()) == [{"_id": 1, "theirs": True}]


def test_a_server_without_time_series_collections_fails_with_a_clear_error(mongo, tmp_path):
    if mongo.engine != "mongomock":
        pytest.skip("servers that create time-series collections run the step (the tests above)")
    mongo.db.readings.insert_many(readings(100))
    with pytest.raises(OperationFailed, match="cannot create time-series collections"):
        run(mongo.db, migration_file(tmp_path / "m")).up()
    assert mongo.db.readings.count_documents({}) == 100
