"""Advice on real data: slices of MongoDB's public sample datasets (tests/fixtures/real, taken from the
mongodump --archive --gzip files MongoDB distributes), and time profiles of real and generated loads."""

import datetime
import json

import pytest
from typer.testing import CliRunner

from mongopat.analysis.timeline import TimeProfile, steady_rate
from mongopat.cli import app
from mongopat.command import analyze, recommend
from mongopat.sources import SourceSpec
from tests.support.paths import REAL

runner = CliRunner()


def report_of(name):
    return analyze(SourceSpec(dump=str(REAL / f"sample_{name}.archive.gz")))


@pytest.mark.parametrize("name", ["weatherdata", "supplies", "geospatial"])
def test_real_collections_imported_at_once_are_bulk_loads_and_healthy_without_access(name):
    report = report_of(name)
    by_id = next(p for p in report["collections"][0]["time"] if p["field"] == "_id")
    assert by_id["bulk_load"] is not None and by_id["bulk_load"]["share"] == 1.0
    assert steady_rate(by_id) is None
    assert recommend(report)["recommendations"] == []


def codes(name, access):
    # The slices hold a few hundred documents of thousands: the bucket rule's minimum is lowered to match.
    result = recommend(report_of(name), str(REAL / access), thresholds={"MP101": {"min_documents": 100}})
    return [(r["code"], r["collection"]) for r in result["recommendations"]], result


def test_weather_observations_one_per_station_get_no_migration_at_any_declared_rate():
    """400 observations of 390 stations: about one reading per station in any window. Buckets would hold
    one reading each and add a header to it, so no migration is offered, whether buckets made by hand or a
    time-series collection (which the declared 300 inserts/s, 2,769 readings per station per hour, would
    fill: MP113 says so and names the collection to create); the finding states both paces."""
    thresholds = {"MP101": {"min_documents": 100}, "MP113": {"min_documents": 100}}
    result = recommend(report_of("weatherdata"), str(REAL / "weatherdata.access.yaml"), thresholds=thresholds)
    assert [(r["code"], r["collection"]) for r in result["recommendations"]] == [("MP113", "data")]
    rec = result["recommendations"][0]
    assert rec["migration"] is None and rec["prediction"] is None and rec["severity"] == "info"
    evidence = rec["evidence"]
    assert evidence["meta_field"] == "st" and evidence["time_field"] == "ts" and evidence["granularity"] == "seconds"
    assert evidence["measurements_per_bucket"] == 1
    assert evidence["seconds_between_readings_declared"] == pytest.approx(390 / 300, abs=0.1)
    assert evidence["uncompressed_bucket_bytes_estimate_today"] > evidence["data_bytes_today"]
    assert "no migration is offered" in rec["rationale"] and "createCollection('data_ts'" in rec["rationale"]
    # Buckets made by hand are not offered either: a time-series collection is the form, and MP113 says so.
    found, _ = codes("weatherdata", "weatherdata.access.yaml")
    assert found == []


def test_weather_placeholders_are_sentinels_and_no_measurement_is_a_constant():
    fields = {f["path"]: f for f in report_of("weatherdata")["collections"][0]["fields"]}
    [elevation] = fields["elevation"]["numbers"]["sentinels"]
    assert elevation["value"] == 9999 and elevation["constant"] and elevation["share"] == 1.0
    temperature = fields["airTemperature.value"]["numbers"]
    assert [s["value"] for s in temperature["sentinels"]] == [999.9] and not temperature["sentinels"][0]["constant"]
    assert temperature["max"] == 999.9 and temperature["min"] < 0


def test_weather_hourly_reports_are_a_cadence_not_a_bulk_load():
    ts = next(p for p in report_of("weatherdata")["collections"][0]["time"] if p["field"] == "ts")
    assert ts["bulk_load"] is None and ts["avg_per_sec"] > 0


def test_sales_summing_items_on_every_read_get_computed_only():
    found, _ = codes("supplies", "supplies.access.yaml")
    assert found == [("MP104", "sales")]


def test_real_archive_on_the_cli_names_the_bulk_load():
    result = runner.invoke(
        app, ["analyze", "--dump", str(REAL / "sample_geospatial.archive.gz")], env={"COLUMNS": "300"}
    )
    assert result.exit_code == 0 and "bulk load" in result.output
    data = runner.invoke(app, ["analyze", "--dump", str(REAL / "sample_geospatial.archive.gz"), "-f", "json"])
    assert json.loads(data.stdout)["collections"][0]["count"] == 400


EPOCH = datetime.datetime(2026, 1, 1).timestamp()


def profile(epochs):
    timeline = TimeProfile("_id", "objectId")
    timeline.add_many(list(epochs))
    return timeline.to_dict()


def test_a_bulk_load_next_to_a_steady_writer():
    loaded = profile(EPOCH + i / 1000 for i in range(1746))
    steady = profile(EPOCH + i * 3 for i in range(1746))
    assert loaded["bulk_load"]["largest"]["documents"] == 1746 and loaded["peak_per_second"] == 1000
    assert steady_rate(loaded) is None
    assert steady["bulk_load"] is None and steady_rate(steady) == pytest.approx(1 / 3, rel=0.01)


def test_a_load_followed_by_steady_writes_keeps_the_steady_rate():
    epochs = [EPOCH + i / 500 for i in range(5000)] + [EPOCH + 3600 + i * 10 for i in range(500)]
    result = profile(epochs)
    assert result["bulk_load"]["documents"] == 5000 and result["bulk_load"]["share"] == pytest.approx(0.909, abs=0.001)
    assert result["bulk_load"]["rest_per_sec"] == pytest.approx(500 / (3600 + 4990), rel=0.01)


def test_many_bursts_through_the_span_are_a_cadence():
    # 200 stations reporting on the hour for two days: bursts, but a rate.
    epochs = [EPOCH + hour * 3600 + station * 0.001 for hour in range(48) for station in range(200)]
    assert profile(epochs)["bulk_load"] is None
