from tests.support.evidence import findings, healthy_collection, report_of

ACCESS = "version: 1\ncollections:\n  pages:\n    writes: {updates_per_sec: 5}\n    history: {keep_versions: true, restore: true}\n"


def test_fires_on_declared_history_needs(tmp_path):
    [rec] = findings(report_of(tmp_path, {"pages": healthy_collection()}), ACCESS, rule="MP110")
    assert rec.evidence["history_versions_per_day"] == 432000
    assert rec.migration == {
        "step": "document_versioning",
        "collection": "pages",
        "history_collection": "pages_history",
        "version_field": "revision",
    }


def test_silent_without_history_needs_or_when_history_exists(tmp_path):
    report = report_of(tmp_path, {"pages": healthy_collection()})
    assert findings(report, rule="MP110") == []
    assert findings(report, ACCESS.replace("keep_versions: true", "keep_versions: false"), rule="MP110") == []
    report = report_of(tmp_path, {"pages": healthy_collection(), "pages_history": healthy_collection(5)})
    assert findings(report, ACCESS, rule="MP110") == []


def test_has_no_thresholds_to_configure():
    from mongopat.rules.patterns.document_versioning import DocumentVersioningRule

    assert DocumentVersioningRule.defaults == {}
