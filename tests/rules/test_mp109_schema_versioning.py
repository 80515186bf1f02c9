import datetime

from tests.rules.helpers import START, findings, healthy_collection, oid_at, report_of


def profiles(version_field=False):
    docs = []
    for i in range(200):
        when = START + datetime.timedelta(hours=i)
        doc = (
            {"_id": oid_at(when, i), "fullName": "a b"}
            if i < 120
            else {"_id": oid_at(when, i), "first": "a", "last": "b"}
        )
        if version_field:
            doc["schemaVersion"] = 1 if i < 120 else 2
        docs.append(doc)
    return docs


def test_fires_when_fields_change_over_time_without_a_version(tmp_path):
    [rec] = findings(report_of(tmp_path, {"profiles": profiles()}), rule="MP109")
    assert rec.severity == "warning" and rec.fields[0] == "schemaVersion"
    assert [a["field"] for a in rec.evidence["appeared"]] == ["first", "last"]
    assert [v["field"] for v in rec.evidence["vanished"]] == ["fullName"]
    assert rec.migration["rules"] == [{"when_has": "first", "version": 2}]


def test_silent_with_a_version_field_or_a_stable_shape(tmp_path):
    assert findings(report_of(tmp_path / "a", {"profiles": profiles(version_field=True)}), rule="MP109") == []
    assert findings(report_of(tmp_path / "b", {"things": healthy_collection()}), rule="MP109") == []


def test_threshold_is_configurable(tmp_path):
    report = report_of(tmp_path, {"profiles": profiles()})
    assert findings(report, thresholds={"MP109": {"min_share": 0.9}}, rule="MP109") == []
