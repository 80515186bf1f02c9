from tests.support.evidence import findings, healthy_collection, report_of

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


def test_copies_in_place_of_a_collection_that_changes_often(tmp_path):
    from bson import ObjectId

    customers = [{"_id": ObjectId(), "name": f"c{i}", "status": "a"} for i in range(40)]
    orders = [
        {"_id": ObjectId(), "customerId": c["_id"], "customer": {"name": c["name"], "status": "a"}}
        for c in customers * 5
    ]
    report = report_of(tmp_path, {"customers": customers, "orders": orders})
    volatile = (
        "version: 1\ncollections:\n  customers:\n    writes: {updates_per_sec: 50}\n"
        "  orders:\n    queries:\n      - {name: o, filter: {_id: eq}, per_sec: 200}\n"
    )
    [rec] = findings(report, volatile, rule="MP208")
    assert rec.evidence["copies_per_target_document"] == 5 and rec.evidence["copy_updates_per_sec"] == 250
    calm = volatile.replace("updates_per_sec: 50", "updates_per_sec: 0.1")
    assert findings(report, calm, rule="MP208") == []
