from bson import ObjectId

from tests.support.evidence import findings, healthy_collection, report_of


def categories():
    docs = [{"_id": "root", "parent": None}]
    docs += [{"_id": f"c{i}", "parent": "root" if i < 4 else f"c{i % 4}"} for i in range(30)]
    return docs


def test_fires_on_parent_references_without_ancestors(tmp_path):
    [rec] = findings(report_of(tmp_path, {"categories": categories()}), rule="MP111")
    assert rec.evidence["parent_field"] == "parent" and rec.evidence["match_rate"] == 1.0
    assert rec.migration["parent_field"] == "parent"


def test_silent_with_ancestors_or_for_follower_graphs(tmp_path):
    with_ancestors = [dict(d, ancestors=["root"]) for d in categories()]
    assert findings(report_of(tmp_path / "a", {"categories": with_ancestors}), rule="MP111") == []
    ids = [ObjectId() for _ in range(50)]
    users = [{"_id": ids[i], "followers": ids[: i % 5]} for i in range(50)]
    assert findings(report_of(tmp_path / "b", {"users": users, "things": healthy_collection()}), rule="MP111") == []


def test_threshold_is_configurable(tmp_path):
    report = report_of(tmp_path, {"categories": categories()})
    assert findings(report, thresholds={"MP111": {"min_match_rate": 1.01}}, rule="MP111") == []
