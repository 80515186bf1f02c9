"""References between collections on dump folders (decided from the distinct sketches)."""

from bson import ObjectId

from mongopat.analysis.collection import AnalyzeOptions
from mongopat.command import analyze
from mongopat.sources import SourceSpec
from tests.conftest import write_export


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
