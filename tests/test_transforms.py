"""Each document step as a pure function: known input, known output, input untouched."""

import copy
import datetime

import pytest

from mongopat.migrate.operations import transform
from mongopat.migrate.operations.bucket import BucketFill, bucket_documents, unbucket
from mongopat.migrate.operations.tree import TreeCycleError, ancestors_of
from mongopat.migrate.steps import StepError, build_step
from mongopat.migrate.transform_api import Context


def step(name, **params):
    return build_step({"step": name, "collection": "c", **params})


def run(doc, name, ctx=None, **params):
    original = copy.deepcopy(doc)
    result = transform(doc, step(name, **params), ctx)
    assert doc == original  # pure: the input is never modified
    return result


def test_set_unset_rename():
    assert run({"_id": 1}, "set_field", field="a.b", value=[1]).document == {"_id": 1, "a": {"b": [1]}}
    assert run({"_id": 1, "a": 2}, "set_field", field="a", value=5, only_missing=True).document["a"] == 2
    assert run({"_id": 1, "a": {"b": 1, "c": 2}}, "unset_field", field="a.b").document == {"_id": 1, "a": {"c": 2}}
    assert run({"_id": 1, "old": 3}, "rename_field", **{"from": "old", "to": "new"}).document == {"_id": 1, "new": 3}


def test_computed():
    doc = {"_id": 1, "items": [{"price": 2.5, "qty": 2}, {"price": 1.0, "qty": 3}]}
    assert run(doc, "computed", field="total", expression="sum(items.price * items.qty)").document["total"] == 8.0
    assert run(doc, "computed", field="n", expression="count(items)").document["n"] == 2
    assert run({"_id": 2, "a": 3, "b": 4}, "computed", field="c", expression="a * b + 1").document["c"] == 13


def test_computed_on_decimal_prices_is_decimal_as_in_mongodb():
    """Real sales keep prices as Decimal128: the total is a Decimal128 computed in decimal (it was 0)."""
    from bson import Decimal128

    items = [{"price": Decimal128("57.55"), "quantity": 2}, {"price": Decimal128("0.10"), "quantity": 3}]
    total = run({"_id": 1, "items": items}, "computed", field="t", expression="sum(items.price * items.quantity)")
    assert total.document["t"] == Decimal128("115.40")
    # A double meets a decimal as $toDecimal converts it, at 15 significant digits (MongoDB's documentation:
    # {$toDecimal: 2.5} is Decimal128("2.50000000000000")); the quantum of the sum shows it.
    mixed = [{"price": Decimal128("1.25"), "quantity": 2}, {"price": 0.1, "quantity": 1}]
    assert run(
        {"_id": 2, "items": mixed}, "computed", field="t", expression="sum(items.price * items.quantity)"
    ).document["t"] == Decimal128("2.600000000000000")
    assert run({"_id": 3, "a": Decimal128("1.25")}, "computed", field="t", expression="a * 2").document[
        "t"
    ] == Decimal128("2.50")
    assert run({"_id": 4, "a": Decimal128("NaN")}, "computed", field="t", expression="a * 2").document["t"] is None


def test_attribute():
    result = run({"_id": 1, "name": "p", "ram": 16, "cpu": "M3"}, "attribute", fields=["ram", "cpu", "gpu"])
    assert result.document == {"_id": 1, "name": "p", "attributes": [{"k": "ram", "v": 16}, {"k": "cpu", "v": "M3"}]}


def test_polymorphic_and_schema_versioning():
    rules = [{"when_has": "salary", "type": "full_time"}, {"when_has": "stipend", "type": "internship"}]
    assert run({"salary": 1}, "polymorphic", rules=rules).document["type"] == "full_time"
    assert "type" not in run({"x": 1}, "polymorphic", rules=rules).document
    assert run({"x": 1}, "polymorphic", rules=rules, default="other").document["type"] == "other"
    assert run({"type": "keep", "salary": 1}, "polymorphic", rules=rules).document["type"] == "keep"
    versions = [{"when_has": "firstName", "version": 2}]
    assert run({"firstName": "a"}, "schema_versioning", rules=versions).document["schemaVersion"] == 2
    assert run({"fullName": "a"}, "schema_versioning", rules=versions).document["schemaVersion"] == 1


def test_approximation():
    assert run({"likes": 42}, "approximation", field="likes", factor=100).document == {"likes": 42, "likesFactor": 100}
    assert run({}, "approximation", field="likes", factor=10).document == {"likes": 0, "likesFactor": 10}


def test_tree_ancestors_and_path():
    parents = {"a": None, "b": "a", "c": "b"}
    result = run({"_id": "c", "parent": "b"}, "tree", Context(parents=parents), parent_field="parent")
    assert result.document["ancestors"] == ["a", "b"] and result.document["path"] == "/a/b/c/"
    assert run({"_id": "a"}, "tree", Context(parents=parents), parent_field="parent").document["ancestors"] == []
    with pytest.raises(TreeCycleError):
        ancestors_of("x", {"x": "y", "y": "x"})


def test_extended_reference_and_pre_aggregation():
    ctx = Context(references={7: {"name": "Acme", "logo": "l", "secret": 1}}, aggregates={1: {"total": 50, "open": 2}})
    doc = run(
        {"_id": 1, "companyId": 7},
        "extended_reference",
        ctx,
        **{"from": "companies", "local": "companyId", "fields": ["name", "logo"], "as": "company"},
    ).document
    assert doc["company"] == {"name": "Acme", "logo": "l"}
    agg = dict(
        **{"from": "deals"},
        foreign="accountId",
        compute={"total": {"sum": "amount"}, "open": {"count": True}},
        into="stats",
    )
    assert run({"_id": 1}, "pre_aggregation", ctx, **agg).document["stats"] == {"total": 50, "open": 2}
    assert run({"_id": 2}, "pre_aggregation", ctx, **agg).document["stats"] == {"total": 0, "open": 0}


@pytest.mark.parametrize(
    ("name", "params", "ctx", "written"),
    [
        (
            "extended_reference",
            {"from": "companies", "local": "ref.company", "fields": ["name"], "as": "copy.company"},
            Context(references={7: {"name": "Acme"}}),
            {"copy": {"company": {"name": "Acme"}}},
        ),
        (
            "pre_aggregation",
            {
                "from": "deals",
                "local": "ref.company",
                "foreign": "accountId",
                "compute": {"n": {"count": True}},
                "into": "copy.stats",
            },
            Context(aggregates={7: {"n": 3}}),
            {"copy": {"stats": {"n": 3}}},
        ),
        (
            "tree",
            {"parent_field": "ref.up", "ancestors_field": "copy.ancestors", "path_field": "copy.path"},
            Context(parents={1: 0, 0: None}),
            {"copy": {"ancestors": [0], "path": "/0/1/"}},
        ),
        (
            "schema_versioning",
            {"field": "copy.v", "default_version": 2, "rules": [{"when_has": "ref.up", "version": 1}]},
            None,
            {"copy": {"v": 1}},
        ),
        (
            "polymorphic",
            {"type_field": "copy.kind", "rules": [{"when_has": "ref.company", "type": "firm"}], "default": None},
            None,
            {"copy": {"kind": "firm"}},
        ),
        ("document_versioning", {"history_collection": "h", "version_field": "copy.rev"}, None, {"copy": {"rev": 1}}),
        (
            "subset",
            {"field": "copy.list", "keep": 1, "full_collection": "h"},
            None,
            {"copy": {"list": [{"x": 1}], "listCount": 2}},
        ),
    ],
)
def test_a_nested_field_is_written_nested_and_the_document_is_migrated(name, params, ctx, written):
    """A dotted ``as``, ``into``, tree, version or type field is a nested field, as the step's pending query
    reads it (it was written as a top-level field named with a dot, and the document stayed pending)."""
    from mongopat.migrate.operations import OPERATIONS

    doc = {
        "_id": 1,
        "ref": {"company": 7, "up": 0},
        "copy": {"list": [{"x": 1}, 2]} if name == "subset" else "replaced",
    }
    outcome = run(doc, name, ctx, **params)
    assert outcome.document == {"_id": 1, "ref": doc["ref"], **written}
    assert not OPERATIONS[name].is_pending(outcome.document, step(name, **params))
    if name == "document_versioning":  # the first revision is numbered by the nested field
        assert [side["_id"] for sides in outcome.side.values() for side in sides] == [{"doc": 1, "revision": 1}]


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("outlier", {"field": "a.items", "threshold": 3, "overflow_collection": "o"}),
        ("outlier", {"field": "items", "threshold": 3, "overflow_collection": "o", "flag_field": "a.big"}),
        ("attribute", {"fields": ["a.b", "c"]}),
        ("attribute", {"fields": ["c"], "into": "a.pairs"}),
    ],
)
def test_steps_of_top_level_fields_refuse_a_nested_one(name, params):
    with pytest.raises(StepError, match="names top-level fields only"):
        step(name, **params)


def test_document_versioning_writes_the_first_revision():
    result = run({"_id": 9, "title": "t"}, "document_versioning", history_collection="pages_history")
    assert result.document == {"_id": 9, "title": "t", "revision": 1}
    assert result.side == {"pages_history": [{"_id": {"doc": 9, "revision": 1}, "title": "t", "revision": 1}]}


def test_subset_keeps_the_newest_and_moves_the_full_list():
    comments = [{"t": i, "at": datetime.datetime(2026, 1, i + 1)} for i in range(5)]
    result = run(
        {"_id": 1, "comments": comments},
        "subset",
        field="comments",
        keep=2,
        sort={"at": -1},
        full_collection="comments_all",
    )
    assert [c["t"] for c in result.document["comments"]] == [4, 3] and result.document["commentsCount"] == 5
    full = result.side["comments_all"]
    assert len(full) == 5 and full[0]["_id"] == {"parent": 1, "index": 0} and full[0]["t"] == 0


def test_outlier_moves_the_tail_into_pages():
    result = run({"_id": 1, "f": list(range(25))}, "outlier", field="f", threshold=10, overflow_collection="o")
    assert result.document["f"] == list(range(10)) and result.document["has_overflow"] is True
    pages = result.side["o"]
    assert (
        [p["_id"]["page"] for p in pages] == [1, 2]
        and pages[0]["f"] == list(range(10, 20))
        and pages[1]["f"] == list(range(20, 25))
    )
    small = run({"_id": 2, "f": [1, 2]}, "outlier", field="f", threshold=10, overflow_collection="o")
    assert small.document == {"_id": 2, "f": [1, 2]} and small.side == {}


def test_bucket_groups_by_series_and_window_and_loses_nothing():
    start = datetime.datetime(2026, 1, 1)
    readings = [
        {"_id": i, "sensor": f"s{i % 2}", "ts": start + datetime.timedelta(seconds=i * 30), "v": i} for i in range(40)
    ]
    spec = step(
        "bucket", series_key="sensor", time_field="ts", window_seconds=300, measurements=["v"], max_bucket_size=3
    )
    buckets = bucket_documents(readings, spec)
    assert sum(b["count"] for b in buckets) == 40
    assert all(b["count"] <= 3 for b in buckets)
    first = buckets[0]
    assert first["_id"] == {"s": "s0", "w": start, "n": 0} and first["min"]["v"] == 0 and first["max"]["v"] == 4
    restored = sorted((r for b in buckets for r in unbucket(b, spec)), key=lambda r: r["_id"])
    assert restored == readings


def test_bucket_fill_places_readings_in_the_newest_bucket_with_room():
    fill = BucketFill(3)
    a, b = ("a", 0), ("b", 0)  # windows: (series, start)
    assert fill.place(a, 2) == [(0, 2)]
    assert fill.place(a, 5) == [(0, 1), (1, 3), (2, 1)]  # a run of readings split as buckets fill
    assert fill.place(b) == [(0, 1)]  # windows are independent
    fill.full(a, 2)  # another writer filled bucket 2: the next readings start bucket 3
    assert fill.place(a) == [(3, 1)]
    fill.full(a, 1)  # an older bucket reported full changes nothing
    assert fill.place(a) == [(3, 1)]


def test_bucket_fill_seeds_from_storage_and_continues_closed_windows():
    fill = BucketFill(10)
    fill.seed(("s", 60), 0, 0)
    fill.seed(("s", 60), 2, 9)
    fill.seed(("s", 60), 1, 10)  # an older bucket read after a newer one: ignored
    assert fill.place(("s", 60), 2) == [(2, 1), (3, 1)]
    fill.place(("s", 120))
    assert fill.close(100) == [("s", 60)]  # windows starting before 100
    assert fill.place(("s", 60)) == [(4, 1)]  # a late reading: never into a bucket already written
    assert fill.close_behind(20) == [("s", 60)]  # starts more than two windows of 20 before the newest, 120
    assert fill.close(None) == [("s", 120)]
    fill.forget()
    assert fill.place(("s", 60)) == [(0, 1)]


def test_bucket_ignores_replayed_readings():
    start = datetime.datetime(2026, 1, 1)
    readings = [{"_id": i, "s": "a", "ts": start, "v": i} for i in range(5)]
    spec = step("bucket", series_key="s", time_field="ts", window_seconds=60)
    assert bucket_documents(readings + readings[:3], spec)[0]["count"] == 5


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"step": "buckett", "collection": "c"}, "did you mean 'bucket'"),
        ({"step": "bucket"}, "'collection' is required"),
        (
            {"step": "outlier", "collection": "c", "field": "f", "threshold": 0, "overflow_collection": "o"},
            "at least 1",
        ),
        ({"step": "computed", "collection": "c", "field": "t", "expression": "total(x)"}, "invalid expression"),
        ({"step": "set_field", "collection": "c", "field": "a", "value": 1, "extra": 2}, "unknown parameter 'extra'"),
        ({"step": "subset", "collection": "c", "field": "f", "keep": "ten", "full_collection": "x"}, "must be a int"),
        ({"step": "unset_field", "collection": "mongopat_changelog", "field": "a"}, "bookkeeping"),
    ],
)
def test_invalid_steps(data, message):
    with pytest.raises(StepError, match=message):
        build_step(data)


# Reference values and the referenced documents' keys: which match, as BSON equality decides.
REFERENCES = [
    (1, 1, True),
    (1, 1.0, True),  # numbers of any type: equal values
    (True, 1, False),  # Python's True == 1; BSON's boolean is no number
    (False, 0, False),
    (True, True, True),
    ("[1, 2]", [1, 2], False),  # a string spelled like an array's repr
    ("{'a': 1}", {"a": 1}, False),
    ([1, 2], [1, 2], True),
    ({"a": 1}, {"a": 1}, True),
]


@pytest.mark.parametrize(("reference", "key", "matches"), REFERENCES)
def test_extended_reference_matches_a_referenced_document_as_bson_compares_them(reference, key, matches):
    """The client side's context keys each referenced document by its foreign value: whichever others a
    batch holds, a document gets the copy of the one its reference equals in BSON, or none."""
    from mongopat.migrate.operations import OPERATIONS

    params = {"from": "companies", "local": "companyId", "fields": ["name"], "as": "company"}
    referenced = [{"_id": key, "name": "keyed"}, {"_id": "other", "name": "other"}]

    class Found:
        def documents(self, collection, field, values, fields):
            return referenced

    made = step("extended_reference", **params)
    ctx = OPERATIONS["extended_reference"].context(made, [{"_id": 1, "companyId": reference}], Found())
    doc = run({"_id": 1, "companyId": reference}, "extended_reference", ctx, **params).document
    assert doc.get("company") == ({"name": "keyed"} if matches else None)
