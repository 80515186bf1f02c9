from bson import ObjectId

from tests.support.evidence import findings, report_of

ACCESS = """\
version: 1
collections:
  contacts:
    queries:
      - {name: with_company, lookup: {from: companies, local: companyId, fields: [name, logo]}, per_sec: 400}
  companies:
    writes: {updates_per_sec: "2/h"}
"""


def data():
    companies = [{"_id": ObjectId(), "name": f"c{i}", "logo": "l"} for i in range(10)]
    return {"companies": companies, "contacts": [{"_id": i, "companyId": companies[i % 10]["_id"]} for i in range(100)]}


def test_fires_on_a_frequent_join_to_a_stable_collection(tmp_path):
    [rec] = findings(report_of(tmp_path, data()), ACCESS, rule="MP106")
    assert rec.collection == "contacts" and rec.fields == ["companyId", "company.name", "company.logo"]
    assert rec.evidence["measured_reference_match_rate"] == 1.0
    assert rec.migration["as"] == "company" and rec.migration["fields"] == ["name", "logo"]


def test_silent_when_the_target_changes_often_or_the_join_is_rare(tmp_path):
    volatile = ACCESS.replace('"2/h"', "50")
    assert findings(report_of(tmp_path, data()), volatile, rule="MP106") == []
    rare = ACCESS.replace("per_sec: 400", "per_sec: 1")
    assert findings(report_of(tmp_path, data()), rare, rule="MP106") == []


def test_threshold_is_configurable(tmp_path):
    report = report_of(tmp_path, data())
    assert findings(report, ACCESS, thresholds={"MP106": {"min_lookups_per_sec": 1000}}, rule="MP106") == []
