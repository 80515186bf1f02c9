from tests.support.evidence import findings, healthy_collection, report_of


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


def feed(kinds=4, per_kind=3):
    """A feed of ``kinds`` kinds of activity told apart by ``type``, each with fields of its own."""
    return [
        {
            "_id": i,
            "userId": f"u{i % 7}",
            "type": f"kind{i % kinds}",
            **{f"k{i % kinds}_f{j}": j for j in range(per_kind)},
        }
        for i in range(400)
    ]


def test_sparse_fields_a_discriminator_explains_are_left_to_polymorphic(tmp_path):
    report = report_of(tmp_path, {"activities": feed()})
    assert findings(report, rule="MP107") == []
    [poly] = findings(report, rule="MP108")
    assert poly.evidence["discriminator"] == "type"
    access = "version: 1\ncollections:\n  activities:\n    queries:\n      - {name: feed, filter: {userId: eq}, per_sec: 50}\n"
    assert [r.code for r in findings(report, access) if r.collection == "activities"] == ["MP108"]


def test_a_query_across_kinds_brings_attribute_back_and_says_which_to_choose(tmp_path):
    report = report_of(tmp_path, {"activities": feed()})
    access = (
        "version: 1\ncollections:\n  activities:\n    queries:\n"
        "      - {name: search, filter: {type: eq, k0_f0: eq, k1_f1: range}, per_sec: 50}\n"
    )
    [rec] = findings(report, access, rule="MP107")
    assert rec.evidence["queries_across_kinds"] == ["search"] and len(rec.fields) == 12
    assert "Choose the attribute pattern" in rec.rationale and "MP108" in rec.rationale
