from tests.support.evidence import findings, healthy_collection, report_of

ACCESS = """\
version: 1
collections:
  orders:
    queries:
      - {name: joined, lookup: {from: customers, local: customerId}, per_sec: 300}
      - {name: plain, filter: {_id: eq}, per_sec: 100}
  customers: {}
"""


def test_fires_when_most_reads_join_and_is_configurable(tmp_path):
    report = report_of(tmp_path, {"orders": healthy_collection(), "customers": healthy_collection(10)})
    [rec] = findings(report, ACCESS, rule="MP206")
    assert rec.evidence["share"] == 0.75
    assert findings(report, ACCESS, thresholds={"MP206": {"min_share": 0.9}}, rule="MP206") == []


def test_silent_when_joins_are_a_minority(tmp_path):
    report = report_of(tmp_path, {"orders": healthy_collection(), "customers": healthy_collection(10)})
    assert findings(report, ACCESS.replace("per_sec: 100", "per_sec: 5000"), rule="MP206") == []
