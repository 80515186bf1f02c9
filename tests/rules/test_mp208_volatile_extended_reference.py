from tests.rules.helpers import findings, healthy_collection, report_of

ACCESS = """\
version: 1
collections:
  orders:
    queries:
      - {name: j, lookup: {from: products, local: productId, fields: [price, stock]}, per_sec: 100}
  products:
    writes: {updates_per_sec: 50}
"""


def test_fires_when_the_joined_fields_change_often(tmp_path):
    report = report_of(tmp_path, {"orders": healthy_collection(), "products": healthy_collection(10)})
    [rec] = findings(report, ACCESS, rule="MP208")
    assert rec.evidence["lookups_per_update"] == 2
    assert findings(report, ACCESS, thresholds={"MP208": {"max_lookups_per_update": 1}}, rule="MP208") == []


def test_silent_when_the_target_is_stable(tmp_path):
    report = report_of(tmp_path, {"orders": healthy_collection(), "products": healthy_collection(10)})
    assert findings(report, ACCESS.replace("updates_per_sec: 50", "updates_per_sec: 0.01"), rule="MP208") == []
