import datetime

from tests.support.evidence import START, findings, healthy_collection, oid_at, report_of


def readings(n=3000, per_second=10, sensors=10):
    docs = []
    for i in range(n):
        when = START + datetime.timedelta(seconds=i / per_second)
        docs.append({"_id": oid_at(when, i), "sensorId": f"s{i % sensors}", "ts": when, "value": i % 7 * 1.5})
    return docs


# Readings updated in place: a time-series collection takes no such update before 7.0, so buckets made by
# hand are the advice (MP113 recommends the time-series collection where nothing stands in its way).
UPDATED = "version: 1\ncollections:\n  readings:\n    writes: {updates_per_sec: 2}\n"


def test_a_time_series_collection_is_advised_instead_where_it_fits(tmp_path):
    report = report_of(tmp_path, {"readings": readings()})
    assert findings(report, rule="MP101") == []
    [rec] = findings(report, rule="MP113")
    assert rec.migration["step"] == "timeseries" and rec.migration["meta_field"] == "sensorId"


def test_fires_on_small_fast_series_documents(tmp_path):
    report = report_of(tmp_path, {"readings": readings()})
    [rec] = findings(report, UPDATED, rule="MP101")
    assert rec.collection == "readings" and rec.evidence["series_key"] == "sensorId"
    assert rec.evidence["time_field"] == "ts" and rec.evidence["series"] == 10
    assert rec.evidence["inserts_per_sec"] > 9
    # 1 reading/s per sensor and 200 per bucket: a 5-minute window (nearest nice window to 200 s).
    assert rec.evidence["window_seconds"] == 300
    assert rec.migration["step"] == "bucket"
    assert "7.0" in rec.evidence["time_series_collection_refused"][0]
    assert "does not fit" in rec.rationale and "judged for MongoDB 5.0" in rec.rationale


def test_declared_range_query_and_rate_are_used(tmp_path):
    report = report_of(tmp_path, {"readings": readings(n=1500, per_second=0.5)})
    access = (
        "version: 1\ncollections:\n  readings:\n    writes: {inserts_per_sec: 50, updates_per_sec: 10}\n"
        "    queries:\n"
        "      - {name: q, filter: {sensorId: eq, ts: range}, per_sec: 5}\n"
    )
    [rec] = findings(report, access, rule="MP101")
    assert rec.evidence["inserts_per_sec_source"] == "declared" and rec.evidence["range_query_declared"]


def test_silent_on_healthy_and_slow_collections(tmp_path):
    report = report_of(tmp_path, {"things": healthy_collection(), "slow": readings(n=1200, per_second=0.1)})
    assert findings(report, rule="MP101") == []


def test_threshold_is_configurable(tmp_path):
    report = report_of(tmp_path, {"readings": readings()})
    assert findings(report, thresholds={"MP101": {"min_inserts_per_sec": 100}}, rule="MP101") == []


def weather(n=3000, per_second=10, stations=10, padding=1500):
    """Observations of about 1.7 KiB: bucketing pays for them too."""
    docs = readings(n, per_second, stations)
    for doc in docs:
        doc["report"] = "x" * padding
    return docs


def test_fires_on_documents_of_a_few_kib_bounded_by_bucket_bytes(tmp_path):
    report = report_of(tmp_path, {"readings": weather()})
    [rec] = findings(report, UPDATED, rule="MP101")
    assert rec.evidence["median_document_bytes"] > 1024
    assert rec.evidence["bucket_bytes_estimate"] <= 1024 * 1024
    assert rec.migration["max_bucket_size"] * rec.evidence["median_document_bytes"] <= 1024 * 1024
    small = findings(report, UPDATED, thresholds={"MP101": {"max_bucket_bytes": 64 * 1024}}, rule="MP101")[0]
    assert small.migration["max_bucket_size"] < rec.migration["max_bucket_size"]
    assert "time-series collection" in rec.rationale


def test_refuses_large_documents(tmp_path):
    report = report_of(tmp_path, {"readings": weather(n=1500, padding=120_000)})
    assert findings(report, rule="MP101") == []


def test_a_bulk_load_is_not_an_insert_rate(tmp_path):
    loaded = readings(n=2000, per_second=2000)  # every _id within one second: an import
    report = report_of(tmp_path, {"readings": loaded})
    profile = next(p for p in report["collections"][0]["time"] if p["field"] == "_id")
    assert profile["bulk_load"]["share"] == 1.0
    assert findings(report, rule="MP101") == []
