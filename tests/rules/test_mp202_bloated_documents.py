from tests.support.evidence import findings, healthy_collection, report_of

MIB = 1024 * 1024


def test_large_documents_warn_and_near_limit_documents_error(tmp_path):
    docs = [{"_id": i, "blob": "x" * (MIB + 10)} for i in range(3)]
    [rec] = findings(report_of(tmp_path, {"files": docs}), rule="MP202")
    assert rec.severity == "warning" and rec.evidence["p95_bytes"] > MIB
    report = report_of(tmp_path, {"files": docs})
    report["collections"][0]["document_size"]["max"] = 9 * MIB  # evidence of a near-limit document
    [rec] = findings(report, rule="MP202")
    assert rec.severity == "error"


def test_silent_on_small_documents(tmp_path):
    assert findings(report_of(tmp_path, {"things": healthy_collection()}), rule="MP202") == []


def test_threshold_is_configurable(tmp_path):
    report = report_of(tmp_path, {"things": healthy_collection()})
    assert findings(report, thresholds={"MP202": {"warn_p95_bytes": 10}}, rule="MP202")
