from tests.support.evidence import findings, report_of

ACCESS = (
    "version: 1\ncollections:\n  orders:\n    writes: {inserts_per_sec: 1, updates_per_sec: 1}\n    queries:\n"
    "      - {name: list, derive: {total: 'sum(items.price * items.qty)'}, per_sec: 300}\n"
)


def orders(with_total=False):
    docs = []
    for i in range(50):
        items = [{"price": 2.5, "qty": j} for j in range(1, 4)]
        doc = {"_id": i, "items": items}
        if with_total:
            doc["total"] = 15.0
        docs.append(doc)
    return docs


def test_fires_when_a_derived_value_is_read_far_more_than_written(tmp_path):
    [rec] = findings(report_of(tmp_path, {"orders": orders()}), ACCESS, rule="MP104")
    assert rec.evidence["read_write_ratio"] == 150 and rec.evidence["elements_per_computation"] == 3
    assert rec.migration == {
        "step": "computed",
        "collection": "orders",
        "field": "total",
        "expression": "sum(items.price * items.qty)",
    }


def test_silent_when_already_stored_or_written_as_often_as_read(tmp_path):
    assert findings(report_of(tmp_path / "a", {"orders": orders(with_total=True)}), ACCESS, rule="MP104") == []
    busy = ACCESS.replace("updates_per_sec: 1", "updates_per_sec: 100")
    assert findings(report_of(tmp_path / "b", {"orders": orders()}), busy, rule="MP104") == []


def test_threshold_is_configurable(tmp_path):
    report = report_of(tmp_path, {"orders": orders()})
    assert findings(report, ACCESS, thresholds={"MP104": {"min_read_write_ratio": 1000}}, rule="MP104") == []
