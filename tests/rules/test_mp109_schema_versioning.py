import datetime

from tests.support.evidence import START, findings, healthy_collection, oid_at, report_of


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


def optional_fields(every=3):
    """A field some documents of every period hold: optional, not a version."""
    return [
        {
            "_id": oid_at(START + datetime.timedelta(hours=i), i),
            "name": "x",
            **({"nickname": "y"} if i % every == 0 else {}),
        }
        for i in range(300)
    ]


def one_old_document():
    """The inventory case: one early document lacks a field that the 3,000 later ones all hold."""
    docs = [{"_id": oid_at(START, 0), "item": "a"}]
    docs += [
        {"_id": oid_at(START + datetime.timedelta(days=30, seconds=i), i + 1), "item": "b", "lastModified": START}
        for i in range(3000)
    ]
    return docs


def late_optional_field():
    """A field first seen early and held by a third of the documents after: optional, not a new shape."""
    docs = []
    for i in range(300):
        doc = {"_id": oid_at(START + datetime.timedelta(hours=i), i), "title": "t"}
        if i >= 30 and i % 3 == 0:
            doc["rated"] = "PG"
        docs.append(doc)
    return docs


def test_optional_fields_are_not_versions(tmp_path):
    for name, docs in (
        ("optional", optional_fields()),
        ("one_old", one_old_document()),
        ("late", late_optional_field()),
    ):
        report = report_of(tmp_path / name, {name: docs})
        assert report["collections"][0]["drift"]["appeared"] or name == "optional"
        assert findings(report, rule="MP109") == [], name


def test_each_side_of_the_change_must_be_material(tmp_path):
    report = report_of(tmp_path, {"profiles": profiles()})
    # 120 documents of the old shape, 80 of the new: silent once either side must hold more.
    assert findings(report, thresholds={"MP109": {"min_documents": 121}}, rule="MP109") == []
    assert findings(report, thresholds={"MP109": {"min_documents": 80}}, rule="MP109") != []
    assert findings(report, thresholds={"MP109": {"min_documents": 81}}, rule="MP109") == []
