"""References between collections on dump folders (decided from the distinct sketches)."""

from bson import ObjectId

from mongopat.analysis.collection import AnalyzeOptions
from mongopat.command import analyze
from mongopat.sources import SourceSpec
from tests.support.dumps import write_export


def refs(report, name):
    return next(c for c in report["collections"] if c["name"] == name)["references"]


def test_foreign_key_and_tree_parent(tmp_path):
    customers = [ObjectId() for _ in range(30)]
    write_export(tmp_path, "customers", [{"_id": c} for c in customers])
    write_export(tmp_path, "orders", [{"customerId": customers[i % 30], "total": i} for i in range(90)])
    write_export(
        tmp_path,
        "categories",
        [{"_id": "root", "parent": None}]
        + [{"_id": f"c{i}", "parent": "root" if i < 5 else f"c{i % 5}"} for i in range(40)],
    )
    report = analyze(SourceSpec(dump=str(tmp_path)))
    order_refs = refs(report, "orders")
    assert [(r["field"], r["target"], r["match_rate"]) for r in order_refs] == [("customerId", "customers", 1.0)]
    tree = refs(report, "categories")
    assert ("parent", "categories") in {(r["field"], r["target"]) for r in tree}


def test_no_reference_for_unrelated_values(tmp_path):
    write_export(tmp_path, "a", [{"_id": i, "qty": i} for i in range(50)])
    write_export(tmp_path, "b", [{"_id": ObjectId(), "otherId": ObjectId()} for _ in range(50)])
    report = analyze(SourceSpec(dump=str(tmp_path)))
    assert refs(report, "a") == [] and refs(report, "b") == []


def test_reference_on_a_high_cardinality_target_uses_the_sketch(tmp_path):
    ids = [ObjectId() for _ in range(3000)]
    write_export(tmp_path, "users", [{"_id": i} for i in ids])
    write_export(tmp_path, "posts", [{"authorId": ids[(i * 7) % 3000]} for i in range(3000)])
    report = analyze(SourceSpec(dump=str(tmp_path)), options=AnalyzeOptions(distinct_limit=500))
    ref = refs(report, "posts")[0]
    assert ref["target"] == "users" and ref["match_rate"] == 1.0 and ref["checked"] > 0


def test_ancestor_arrays(tmp_path):
    write_export(tmp_path, "nodes", [{"_id": f"n{i}", "ancestors": [f"n{j}" for j in range(i)]} for i in range(10)])
    report = analyze(SourceSpec(dump=str(tmp_path)))
    assert ("ancestors[]", "nodes") in {(r["field"], r["target"]) for r in refs(report, "nodes")}


def test_dense_integer_ids_match_only_the_collection_a_field_names(tmp_path):
    """Integers 1..N match every collection whose _ids are 1..M: the field's name decides, numbers compare
    as MongoDB compares them (3.0 == 3), and a self-reference that loses makes no tree."""
    write_export(tmp_path, "customers", [{"_id": i, "name": f"c{i}"} for i in range(1, 101)])
    write_export(tmp_path, "products", [{"_id": i, "sku": f"p{i}"} for i in range(1, 201)])
    write_export(tmp_path, "classes", [{"_id": i} for i in range(1, 31)])
    # Order _ids are doubles, like the customerId values: still customers, not orders.
    orders = [{"_id": float(i), "customerId": float(1 + i % 100), "productId": 1 + i % 200} for i in range(1, 301)]
    write_export(tmp_path, "orders", orders)
    write_export(tmp_path, "grades", [{"_id": i, "class_id": 1 + i % 30, "score_id": 1 + i % 40} for i in range(90)])
    report = analyze(SourceSpec(dump=str(tmp_path)))
    by_field = {r["field"]: r["target"] for r in refs(report, "orders")}
    assert by_field == {"customerId": "customers", "productId": "products"}
    grades = next(c for c in report["collections"] if c["name"] == "grades")
    # score_id names no collection and its values 1..40 fall where every _id range is dense: chance.
    assert {r["field"]: r["target"] for r in grades["references"]} == {"class_id": "classes"}
    assert grades["ambiguous_references"] == []


def test_a_field_that_matches_two_collections_alike_is_ambiguous(tmp_path):
    shared = [ObjectId() for _ in range(40)]
    write_export(tmp_path, "drafts", [{"_id": i} for i in shared])
    write_export(tmp_path, "published", [{"_id": i} for i in shared])
    write_export(tmp_path, "notes", [{"_id": ObjectId(), "docId": shared[i % 40]} for i in range(80)])
    report = analyze(SourceSpec(dump=str(tmp_path)))
    notes = next(c for c in report["collections"] if c["name"] == "notes")
    assert notes["references"] == []
    [ambiguous] = notes["ambiguous_references"]
    assert ambiguous["field"] == "docId" and {t["target"] for t in ambiguous["targets"]} == {"drafts", "published"}
