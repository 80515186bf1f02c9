from tests.support.evidence import findings, healthy_collection, report_of


def test_fires_on_deep_nesting_and_is_configurable(tmp_path):
    docs = [{"_id": i, "a": {"b": {"c": {"d": {"e": {"f": 1}}}}}} for i in range(10)]
    report = report_of(tmp_path, {"deep": docs})
    [rec] = findings(report, rule="MP209")
    assert rec.evidence["max_depth"] == 6
    assert findings(report, thresholds={"MP209": {"max_depth": 10}}, rule="MP209") == []


def test_fires_on_arrays_of_wide_sub_documents(tmp_path):
    wide = {f"f{k}": k for k in range(16)}
    docs = [{"_id": i, "lines": [wide] * 60} for i in range(10)]
    [rec] = findings(report_of(tmp_path, {"c": docs}), rule="MP209")
    assert rec.evidence["element_fields"] == 16


def test_silent_on_healthy_collections(tmp_path):
    assert findings(report_of(tmp_path, {"things": healthy_collection()}), rule="MP209") == []
