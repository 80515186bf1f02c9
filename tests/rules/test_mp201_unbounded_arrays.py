from tests.support.evidence import findings, healthy_collection, report_of


def test_warning_then_error_as_arrays_grow(tmp_path):
    docs = [{"_id": i, "a": list(range(5))} for i in range(30)] + [{"_id": 99, "a": list(range(1500))}]
    [rec] = findings(report_of(tmp_path / "w", {"c": docs}), rule="MP201")
    assert rec.severity == "warning" and rec.evidence["length_max"] == 1500
    docs[-1]["a"] = list(range(12000))
    [rec] = findings(report_of(tmp_path / "e", {"c": docs}), rule="MP201")
    assert rec.severity == "error"


def test_silent_on_small_arrays(tmp_path):
    assert findings(report_of(tmp_path, {"things": healthy_collection()}), rule="MP201") == []


def test_threshold_is_configurable(tmp_path):
    report = report_of(tmp_path, {"things": healthy_collection()})
    assert findings(report, thresholds={"MP201": {"warn_length": 2, "warn_p95": 2}}, rule="MP201")
