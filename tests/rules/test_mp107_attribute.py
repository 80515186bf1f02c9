from tests.rules.helpers import findings, healthy_collection, report_of


def products():
    groups = [["a1", "a2", "a3"], ["b1", "b2", "b3"], ["c1", "c2", "c3"]]
    return [{"_id": i, "name": "p", **{key: i for key in groups[i % 3]}} for i in range(90)]


def test_fires_on_many_sparse_fields_and_rises_when_queried(tmp_path):
    report = report_of(tmp_path, {"products": products()})
    [rec] = findings(report, rule="MP107")
    assert rec.severity == "info" and len(rec.fields) == 9
    access = "version: 1\ncollections:\n  products:\n    queries:\n      - {name: s, filter: {a1: eq, b2: range}, per_sec: 9}\n"
    [queried] = findings(report, access, rule="MP107")
    assert queried.severity == "warning" and queried.evidence["fields_filtered_by_queries"] == ["a1", "b2"]
    assert queried.migration["index"] == {"attributes.k": 1, "attributes.v": 1}


def test_silent_on_uniform_shapes(tmp_path):
    assert findings(report_of(tmp_path, {"things": healthy_collection()}), rule="MP107") == []


def test_threshold_is_configurable(tmp_path):
    report = report_of(tmp_path, {"products": products()})
    assert findings(report, thresholds={"MP107": {"min_sparse_fields": 10}}, rule="MP107") == []
