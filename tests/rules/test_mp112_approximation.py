from tests.support.evidence import findings, healthy_collection, report_of

ACCESS = "version: 1\ncollections:\n  posts:\n    counters:\n      - {field: likes, increments_per_sec: 3000, exact: false}\n"


def test_fires_on_a_hot_inexact_counter(tmp_path):
    [rec] = findings(report_of(tmp_path, {"posts": healthy_collection()}), ACCESS, rule="MP112")
    assert rec.evidence["factor"] == 1000 and rec.evidence["writes_per_sec_after"] == 3
    assert rec.migration == {"step": "approximation", "collection": "posts", "field": "likes", "factor": 1000}


def test_silent_for_exact_or_cold_counters(tmp_path):
    report = report_of(tmp_path, {"posts": healthy_collection()})
    assert findings(report, ACCESS.replace("exact: false", "exact: true"), rule="MP112") == []
    assert findings(report, ACCESS.replace("3000", "5"), rule="MP112") == []


def test_threshold_is_configurable(tmp_path):
    report = report_of(tmp_path, {"posts": healthy_collection()})
    assert findings(report, ACCESS, thresholds={"MP112": {"min_increments_per_sec": 5000}}, rule="MP112") == []
