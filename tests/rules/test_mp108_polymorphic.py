import datetime

from tests.support.evidence import START, findings, healthy_collection, oid_at, report_of


def activities(with_type=True):
    kinds = [("status", {"text": "t"}), ("photo", {"url": "u", "caption": "c"}), ("like", {"targetId": 1})]
    docs = []
    for i in range(300):
        kind, extra = kinds[i % 3]
        doc = {"_id": oid_at(START + datetime.timedelta(minutes=i), i), "userId": i % 7, "at": START, **extra}
        if with_type:
            doc["type"] = kind
        docs.append(doc)
    return docs


def test_fires_on_coexisting_kinds_and_names_the_discriminator(tmp_path):
    [rec] = findings(report_of(tmp_path, {"activities": activities()}), rule="MP108")
    assert rec.evidence["discriminator"] == "type" and rec.evidence["shapes"] == 3
    assert rec.migration == {"step": "create_index", "collection": "activities", "keys": {"type": 1}}


def test_without_a_discriminator_the_migration_sets_one(tmp_path):
    [rec] = findings(report_of(tmp_path, {"activities": activities(with_type=False)}), rule="MP108")
    assert rec.migration["step"] == "polymorphic" and len(rec.migration["rules"]) == 3


def test_collections_sharing_a_core(tmp_path):
    cars = [{"_id": i, "make": "m", "model": "x", "year": 2020, "price": 1, "doors": 4} for i in range(20)]
    bikes = [{"_id": i, "make": "m", "model": "x", "year": 2020, "price": 1, "gears": 21} for i in range(20)]
    rec = [
        r for r in findings(report_of(tmp_path, {"cars": cars, "bikes": bikes}), rule="MP108") if r.collection is None
    ]
    assert rec and rec[0].evidence["shared_fields"] == ["make", "model", "price", "year"]


def test_silent_on_uniform_shapes(tmp_path):
    assert findings(report_of(tmp_path, {"things": healthy_collection()}), rule="MP108") == []


def test_threshold_is_configurable(tmp_path):
    report = report_of(tmp_path, {"activities": activities()})
    assert findings(report, thresholds={"MP108": {"min_shape_share": 0.5}}, rule="MP108") == []


def test_an_optional_field_is_not_a_kind(tmp_path):
    docs = [
        {"_id": oid_at(START + datetime.timedelta(minutes=i), i), "a": 1, "b": 2, **({"c": 3} if i % 2 else {})}
        for i in range(100)
    ]
    assert findings(report_of(tmp_path, {"things": docs}), rule="MP108") == []


def test_a_copy_with_fields_added_is_not_another_kind(tmp_path):
    movies = [{"_id": i, "title": "t", "year": 2000, "cast": ["a"], "genres": ["g"]} for i in range(40)]
    embedded = [dict(movie, plot_embedding=[0.1] * 8) for movie in movies[:20]]
    report = report_of(tmp_path, {"movies": movies, "embedded_movies": embedded})
    assert findings(report, rule="MP108") == []
