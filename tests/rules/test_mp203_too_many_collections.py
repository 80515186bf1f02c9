import copy

from tests.support.evidence import findings, healthy_collection, report_of


def test_fires_past_the_threshold_and_is_configurable(tmp_path):
    report = report_of(tmp_path, {"things": healthy_collection(20)})
    assert findings(report, rule="MP203") == []
    template = report["collections"][0]
    report["collections"] = [dict(copy.deepcopy(template), name=f"c{i}") for i in range(12)]
    assert findings(report, rule="MP203") == []
    [rec] = findings(report, thresholds={"MP203": {"max_collections": 10}}, rule="MP203")
    assert rec.evidence["collections"] == 12 and rec.collection is None
