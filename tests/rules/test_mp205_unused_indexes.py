from tests.support.evidence import findings, healthy_collection, report_of


def index(name, ops, **extra):
    return {
        "name": name,
        "key": [[name, 1]],
        "unique": False,
        "ttl_seconds": None,
        "usage": None if ops is None else {"ops": ops, "since": "2026-01-01T00:00:00Z"},
        **extra,
    }


def test_fires_on_unused_indexes_only_where_usage_is_known(tmp_path):
    report = report_of(tmp_path, {"things": healthy_collection(20)})
    report["collections"][0]["indexes"] = [
        index("_id_", 0),
        index("status", 0),
        index("name", 120),
        index("unknown", None),
        index("email", 0, unique=True),
        index("expires", 0, ttl_seconds=60),
    ]
    [rec] = findings(report, rule="MP205")
    assert rec.evidence["index"] == "status" and rec.migration["step"] == "drop_index"
    assert len(findings(report, thresholds={"MP205": {"max_ops": 200}}, rule="MP205")) == 2


def test_silent_on_dumps_without_usage(tmp_path):
    assert findings(report_of(tmp_path, {"things": healthy_collection()}), rule="MP205") == []
