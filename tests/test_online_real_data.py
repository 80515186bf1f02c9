"""The migration mongopat recommends for real data, run while an application writes: MP101's bucket step
on weather observations from MongoDB's public sample (tests/fixtures/real), nested documents and all (the
advice from all 400 observations; the run on the first 120, since mongomock scans a collection per write).
The application inserts observations in both shapes, counts in both, and deletes in both, before every
call mongopat makes (the harness of ``tests.support.application``)."""

from __future__ import annotations

import copy
import datetime
import random
from typing import Any

import bson
import pytest
from bson import Decimal128

from mongopat.command import analyze, recommend
from mongopat.migrate.operations import OPERATIONS, bucket, transform
from mongopat.migrate.runner import RunOptions
from mongopat.migrate.script import load_folder, render
from mongopat.migrate.server.runner import Runner
from mongopat.migrate.steps import build_step
from mongopat.sources import SourceSpec, open_source
from tests.support.application import SEEDS, Application, InterleavingDatabase
from tests.support.application import check_writes_kept as check_kept
from tests.support.backend import first_seeds_only
from tests.support.paths import REAL
from tests.support.readings import ReadingsApplication, check_readings_kept, every_reading

ARCHIVE = str(REAL / "sample_weatherdata.archive.gz")


def documents(archive: str, collection: str) -> list[dict[str, Any]]:
    with open_source(SourceSpec(dump=str(REAL / archive))) as source:
        return [doc for doc, _size in source.documents(collection, None)]


def observations() -> list[dict[str, Any]]:
    return documents("sample_weatherdata.archive.gz", "data")


def bucket_step() -> dict[str, Any]:
    """A bucket step on the real observations, by station and day, of their nested measurements. No
    migration is offered for them (one observation per station or so: buckets of one reading would only
    grow the collection; MP113 says so, MP101 leaving the advice to it), so its key fields are taken from
    that finding and its measurements and placeholder values from the analysis. Day-long windows of at most 3 observations make the application's new observations
    (of a few stations) fill buckets the run then meets full."""
    report = analyze(SourceSpec(dump=ARCHIVE))
    result = recommend(report, str(REAL / "weatherdata.access.yaml"), {"MP113": {"min_documents": 100}})
    [advice] = [r for r in result["recommendations"] if r["code"] == "MP113"]
    assert advice["migration"] is None
    fields = {f["path"]: f for f in report["collections"][0]["fields"]}
    measurements = ["airTemperature.value", "dewPoint.value", "pressure.value"]
    sentinels = {m: [s["value"] for s in fields[m]["numbers"]["sentinels"]] for m in measurements}
    return {
        "step": "bucket", "collection": "data", "series_key": advice["evidence"]["meta_field"],
        "time_field": advice["evidence"]["time_field"], "window_seconds": 86_400, "max_bucket_size": 3,
        "measurements": measurements, "sentinels": {m: v for m, v in sentinels.items() if v},
    }  # fmt: skip


@pytest.mark.parametrize("seed", SEEDS)
def test_real_weather_observations_are_bucketed_and_back_while_the_application_writes(mongo, tmp_path, seed):
    first_seeds_only(mongo, seed)
    db = mongo.db
    originals = observations()[:120]
    db.data.insert_many(copy.deepcopy(originals))
    spec = bucket_step()
    assert (spec["series_key"], spec["time_field"]) == ("st", "ts")
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "0001_bucket.yaml").write_text(render("0001_bucket", "bucket data", [spec], "test"))

    def observation(ident: int, rng: random.Random) -> dict[str, Any]:
        """A new observation of one of a few stations: a real one again, a little later, under a new _id."""
        new = copy.deepcopy(rng.choice(originals[:4]))
        new["_id"], new["ts"] = ident, new["ts"] + datetime.timedelta(minutes=rng.randint(1, 60))
        return new

    app = ReadingsApplication(db.data, seed, spec=spec, make=observation, skip=frozenset())
    options = RunOptions(batch_size=40)
    Runner(InterleavingDatabase(db, app), load_folder(folder), options).up()
    app.enabled = False
    Runner(db, load_folder(folder), options).up()
    assert db.data.count_documents(bucket.pending(build_step(spec))) == 0
    assert Runner(db, load_folder(folder)).verify() == {"0001_bucket": []}
    check_readings_kept(db, app, "data")
    assert max(b["count"] for b in db.data.find(bucket.buckets_filter())) == 3
    assert len(every_reading(db, "data", spec)) == len(originals) + len(app.inserted) - len(app.deleted)

    app.enabled, app.new_shape_inserts = True, False
    Runner(InterleavingDatabase(db, app), load_folder(folder), options).down("base")
    app.enabled = False
    check_readings_kept(db, app, "data")
    assert db.data.count_documents(bucket.buckets_filter()) == 0
    # Observations the application left alone are the very bytes they were.
    touched = set(app.counters) | app.deleted
    now = {doc["_id"]: doc for doc in db.data.find()}
    untouched = [doc for doc in originals if doc["_id"] not in touched]
    assert untouched and all(bson.encode(now[doc["_id"]]) == bson.encode(doc) for doc in untouched)


@pytest.mark.parametrize("seed", SEEDS)
def test_real_sales_get_their_total_while_the_application_writes(mongo, tmp_path, seed):
    """MP104's computed total on real sales (Decimal128 prices, quantities), while the application counts,
    sets statuses, pushes items, inserts and deletes; then rolled back, untouched sales byte for byte."""
    first_seeds_only(mongo, seed)
    db = mongo.db
    originals = documents("sample_supplies.archive.gz", "sales")[:120]
    db.sales.insert_many(copy.deepcopy(originals))
    result = recommend(
        analyze(SourceSpec(dump=str(REAL / "sample_supplies.archive.gz"))), str(REAL / "supplies.access.yaml")
    )
    [spec] = [r["migration"] for r in result["recommendations"] if r["code"] == "MP104"]
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "0001_total.yaml").write_text(render("0001_total", "sale totals", [spec], "test"))

    def sale(ident: int, rng: random.Random) -> dict[str, Any]:
        new = copy.deepcopy(rng.choice(originals))
        new["_id"] = ident
        return new

    def item(rng: random.Random) -> dict[str, Any]:
        return {"name": f"app{rng.randint(0, 10**6)}", "price": Decimal128("1.50"), "quantity": 2}

    app = Application(db.sales, seed, make=sale, element=item)
    options = RunOptions(batch_size=17)
    Runner(InterleavingDatabase(db, app), load_folder(folder), options).up()
    app.enabled = False
    Runner(db, load_folder(folder), options).up()
    step = build_step(spec)
    assert db.sales.count_documents(OPERATIONS["computed"].pending(step)) == 0
    assert Runner(db, load_folder(folder)).verify() == {"0001_total": []}
    check_kept(db, app, step)
    # The total of the items: exact in decimal, as the prices are. A sale the application pushed an item
    # into after its total was stored is the application's to keep up to date (the computed pattern).
    for doc in db.sales.find({"_id": {"$nin": list(app.pushed)}}):
        assert doc["total"] == transform(doc, step).document["total"]
        assert isinstance(doc["total"], Decimal128) and doc["total"].to_decimal() > 0

    app.enabled = True
    Runner(InterleavingDatabase(db, app), load_folder(folder), options).down("base")
    app.enabled = False
    check_kept(db, app, step)
    assert db.sales.count_documents({"total": {"$exists": True}}) == 0
    touched = set(app.counters) | set(app.statuses) | set(app.pushed) | app.deleted
    now = {doc["_id"]: doc for doc in db.sales.find()}
    untouched = [doc for doc in originals if doc["_id"] not in touched]
    assert untouched and all(bson.encode(now[doc["_id"]]) == bson.encode(doc) for doc in untouched)
