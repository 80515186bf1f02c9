from tests.support.evidence import findings, report_of

ACCESS = """\
version: 1
collections:
  accounts:
    queries:
      - name: dashboard
        aggregate: {from: deals, local: _id, foreign: accountId, compute: {total: {sum: amount}}}
        per_sec: 200
  deals:
    writes: {inserts_per_sec: 1, updates_per_sec: 1}
"""


def data():
    return {
        "accounts": [{"_id": i} for i in range(20)],
        "deals": [{"_id": i, "accountId": i % 20, "amount": 5} for i in range(400)],
    }


def test_fires_when_the_aggregate_is_read_far_more_than_its_source_changes(tmp_path):
    [rec] = findings(report_of(tmp_path, data()), ACCESS, rule="MP105")
    assert rec.collection == "accounts" and rec.evidence["read_write_ratio"] == 100
    assert rec.evidence["source_documents_per_parent"] == 20
    assert rec.migration["step"] == "pre_aggregation" and rec.migration["compute"] == {"total": {"sum": "amount"}}


def test_silent_when_the_source_changes_as_often_as_it_is_read(tmp_path):
    busy = ACCESS.replace("inserts_per_sec: 1, updates_per_sec: 1", "inserts_per_sec: 100, updates_per_sec: 100")
    assert findings(report_of(tmp_path, data()), busy, rule="MP105") == []
    assert findings(report_of(tmp_path, data()), rule="MP105") == []


def test_threshold_is_configurable(tmp_path):
    report = report_of(tmp_path, data())
    assert findings(report, ACCESS, thresholds={"MP105": {"min_read_write_ratio": 500}}, rule="MP105") == []
