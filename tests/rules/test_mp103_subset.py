from tests.support.evidence import findings, healthy_collection, report_of

ACCESS = (
    "version: 1\ncollections:\n  posts:\n    queries:\n"
    "      - {name: page, filter: {_id: eq}, embed: {field: comments, limit: 10}, per_sec: 800}\n"
)


def posts(length):
    return [{"_id": i, "comments": [{"t": "x"}] * (length + i % 5)} for i in range(60)]


def test_fires_when_the_array_is_much_longer_than_shown(tmp_path):
    report = report_of(tmp_path, {"posts": posts(200)})
    [rec] = findings(report, ACCESS, rule="MP103")
    assert rec.evidence["shown"] == 10 and rec.evidence["length_p95"] >= 200
    assert rec.migration == {
        "step": "subset",
        "collection": "posts",
        "field": "comments",
        "keep": 10,
        "sort": {},
        "full_collection": "posts_comments",
    }


def test_silent_when_the_array_is_short_or_nothing_is_declared(tmp_path):
    report = report_of(tmp_path, {"posts": posts(5), "things": healthy_collection()})
    assert findings(report, ACCESS, rule="MP103") == []
    assert findings(report, rule="MP103") == []


def test_threshold_is_configurable(tmp_path):
    report = report_of(tmp_path, {"posts": posts(30)})
    assert findings(report, ACCESS, rule="MP103")
    assert findings(report, ACCESS, thresholds={"MP103": {"length_factor": 10}}, rule="MP103") == []


def test_list_view_of_heavy_documents(tmp_path):
    docs = [{"_id": i, "title": "t", "events": [{"at": i, "what": "x" * 100}] * (150 + i % 10)} for i in range(30)]
    access = "version: 1\ncollections:\n  posts:\n    queries:\n      - {name: list, fields: [title], per_sec: 50}\n"
    [rec] = findings(report_of(tmp_path, {"posts": docs}), access, rule="MP103")
    assert rec.fields == ["events"] and rec.evidence["fields_read"] == ["title"]
    assert (
        findings(
            report_of(tmp_path, {"posts": docs}), access, thresholds={"MP103": {"list_view_bytes": 10**7}}, rule="MP103"
        )
        == []
    )
