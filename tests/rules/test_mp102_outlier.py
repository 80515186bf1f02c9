from tests.support.evidence import findings, healthy_collection, report_of


def users(celebrities=2, huge=3000):
    docs = [{"_id": i, "followers": list(range(i % 30))} for i in range(400)]
    for i in range(celebrities):
        docs[i * 100 + 5]["followers"] = list(range(huge))
    return docs


def test_fires_on_a_long_tail(tmp_path):
    report = report_of(tmp_path, {"users": users()})
    [rec] = findings(report, rule="MP102")
    assert rec.fields == ["followers"] and rec.evidence["length_max"] == 3000
    assert rec.evidence["cutoff"] >= 2 * rec.evidence["length_p95"]
    assert rec.migration["overflow_collection"] == "users_followers_overflow"


def test_silent_when_arrays_are_uniformly_small_or_uniformly_large(tmp_path):
    uniform_large = [{"_id": i, "a": list(range(500))} for i in range(50)]
    report = report_of(tmp_path, {"things": healthy_collection(), "big": uniform_large})
    assert findings(report, rule="MP102") == []


def test_threshold_is_configurable(tmp_path):
    report = report_of(tmp_path, {"users": users()})
    assert findings(report, thresholds={"MP102": {"min_max_length": 5000}}, rule="MP102") == []
