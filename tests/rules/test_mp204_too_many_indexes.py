from tests.support.evidence import findings, healthy_collection, report_of


def test_fires_past_the_threshold_and_is_configurable(tmp_path):
    report = report_of(tmp_path, {"things": healthy_collection(20)})
    assert findings(report, rule="MP204") == []
    report["collections"][0]["indexes"] = [
        {"name": f"i{i}", "key": [[f"f{i}", 1]], "unique": False, "ttl_seconds": None, "usage": None} for i in range(31)
    ]
    [rec] = findings(report, rule="MP204")
    assert rec.evidence["indexes"] == 31
    assert findings(report, thresholds={"MP204": {"max_indexes": 40}}, rule="MP204") == []
