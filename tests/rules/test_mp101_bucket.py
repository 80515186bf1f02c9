import datetime

from tests.rules.helpers import START, findings, healthy_collection, oid_at, report_of


def readings(n=3000, per_second=10, sensors=10):
    docs = []
    for i in range(n):
        when = START + datetime.timedelta(seconds=i / per_second)
        docs.append({"_id": oid_at(when, i), "sensorId": f"s{i % sensors}", "ts": when, "value": i % 7 * 1.5})
    return docs


def test_fires_on_small_fast_series_documents(tmp_path):
    report = report_of(tmp_path, {"readings": readings()})
    [rec] = findings(report, rule="MP101")
    assert rec.collection == "readings" and rec.evidence["series_key"] == "sensorId"
    assert rec.evidence["time_field"] == "ts" and rec.evidence["series"] == 10
    assert rec.evidence["inserts_per_sec"] > 9
    # 1 reading/s per sensor and 200 per bucket: a 5-minute window (nearest nice window to 200 s).
    assert rec.evidence["window_seconds"] == 300
    assert rec.migration["step"] == "bucket" and rec.migration["alternative"]["timeseries"]["metaField"] == "sensorId"


def test_declared_range_query_and_rate_are_used(tmp_path):
    report = report_of(tmp_path, {"readings": readings(n=1500, per_second=0.5)})
    access = (
        "version: 1\ncollections:\n  readings:\n    writes: {inserts_per_sec: 50}\n    queries:\n"
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
