from bson import ObjectId

from tests.support.evidence import bucket_documents, findings, healthy_collection, report_of


def test_bucketed_collection_is_named_and_not_bucketed_again(tmp_path):
    report = report_of(tmp_path, {"buckets": bucket_documents()})
    [entry] = report["collections"][0]["patterns_in_place"]
    assert entry["pattern"] == "bucket" and entry["evidence"]["readings_p50"] == 50
    [rec] = findings(report, rule="MP100")
    assert rec.kind == "in-place" and rec.severity == "info" and rec.migration is None
    access = "version: 1\ncollections:\n  buckets:\n    writes: {inserts_per_sec: 500}\n"
    assert findings(report, access, rule="MP101") == []


def test_attribute_pairs_and_extended_reference_in_place(tmp_path):
    customers = [{"_id": ObjectId(), "name": f"c{i}", "email": f"c{i}@x"} for i in range(40)]
    orders = [
        {
            "_id": ObjectId(),
            "customerId": c["_id"],
            "customer": {"name": c["name"], "email": c["email"]},
            "attrs": [{"k": "color", "v": "red"}, {"k": "size", "v": i % 4}],
        }
        for i, c in enumerate(customers * 3)
    ]
    report = report_of(tmp_path, {"customers": customers, "orders": orders})
    found = {
        (r.collection, r.evidence.get("array") or r.evidence.get("object")) for r in findings(report, rule="MP100")
    }
    assert found == {("orders", "attrs"), ("orders", "customer")}
    ext = next(r for r in findings(report, rule="MP100") if r.evidence.get("object") == "customer")
    assert ext.evidence["target"] == "customers" and ext.evidence["copied_fields"] == ["email", "name"]


def test_healthy_collections_have_nothing_in_place(tmp_path):
    assert findings(report_of(tmp_path, {"things": healthy_collection()}), rule="MP100") == []
