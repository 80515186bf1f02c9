"""The index model (mongopat.indexes): the key the equality, sort, range rule gives a read, which existing
index serves it, and the documents it examines, table by table."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from mongopat.indexes.catalog import Index, listed
from mongopat.indexes.planner import advise, best, cost
from mongopat.indexes.selectivity import Selectivity
from mongopat.indexes.shape import ReadShape, from_match


@dataclass
class Evidence:
    """A collection as the model reads it: 100,000 readings of 1,000 stations over 1,000 hours."""

    name: str = "readings"
    count: int = 100_000
    distinct: dict[str, int] = field(
        default_factory=lambda: {"st": 1000, "kind": 4, "v": 50_000, "tags": 30, "email": 1000}
    )
    arrays: tuple[str, ...] = ("tags", "sizes")
    dates: tuple[str, ...] = ("ts",)
    unique: tuple[str, ...] = ("email",)

    @property
    def documents_read(self) -> int:
        return self.count

    def field(self, path: str) -> dict[str, Any] | None:
        if path in self.dates:
            return {"path": path, "types": [{"type": "date", "share": 1.0}]}
        if path not in self.distinct and path not in self.arrays:
            return None
        types = [{"type": "array", "share": 1.0}] if path in self.arrays else [{"type": "int", "share": 1.0}]
        card = {"distinct": self.distinct.get(path, 10), "all_distinct": path in self.unique, "values": self.count}
        if path in self.arrays:
            card["values"] = self.count * 3  # three elements a document
        return {"path": path, "types": types, "cardinality": card}

    def profile(self, name: str) -> dict[str, Any] | None:
        return {"field": name, "span_seconds": 1000 * 3600} if name in self.dates else None


SELECTIVITY = Selectivity(Evidence())


def read(
    operators: dict[str, str], sort: dict[str, int] | None = None, limit: int | None = None, **kw: Any
) -> ReadShape:
    return ReadShape("r", "readings", operators, list((sort or {}).items()), limit, **kw)


def index(*key: tuple[str, Any], name: str | None = None, **options: Any) -> Index:
    return Index(name=name or "_".join(f"{n}_{d}" for n, d in key), key=list(key), **options)


ADVICE = [
    ("equality then sort then range", read({"ts": "range", "st": "eq"}, {"ts": -1}), [("st", 1), ("ts", -1)]),
    ("the most selective equality first", read({"kind": "eq", "st": "eq"}), [("st", 1), ("kind", 1)]),
    (
        "equality before sort before range",
        read({"v": "gt", "kind": "eq"}, {"st": 1}),
        [("kind", 1), ("st", 1), ("v", 1)],
    ),
    ("$in with the equalities", read({"st": "in", "kind": "eq"}, {"ts": 1}), [("kind", 1), ("st", 1), ("ts", 1)]),
    ("loose filters last", read({"v": "ne", "ts": "range", "kind": "eq"}), [("kind", 1), ("ts", 1), ("v", 1)]),
    ("a sort alone", read({}, {"ts": -1}, 10), [("ts", -1)]),
    ("one array field per key", read({"tags": "eq", "sizes": "eq", "st": "eq"}), [("st", 1), ("tags", 1)]),
    ("text search", read({"kind": "eq", "body": "text"}), [("kind", 1), ("body", "text")]),
    ("geo filter", read({"loc": "geo", "kind": "eq"}), [("kind", 1), ("loc", "2dsphere")]),
]


@pytest.mark.parametrize(("case", "shape", "expected"), ADVICE, ids=[c[0] for c in ADVICE])
def test_advice_follows_equality_sort_range(case, shape, expected):
    key, _notes = advise(shape, SELECTIVITY)
    assert key == expected, case


def test_a_left_out_array_field_is_said():
    _key, notes = advise(read({"tags": "eq", "sizes": "eq"}), SELECTIVITY)
    assert any("sizes left out" in note for note in notes)


def test_in_before_a_sort_carries_the_explode_limit():
    _key, notes = advise(read({"st": "in"}, {"ts": 1}), SELECTIVITY)
    assert any("200 values" in note for note in notes)


# (case, read, index, docs examined, sort in memory); None: the index cannot serve the read
COSTS = [
    ("scan: every document", read({"st": "eq"}), None, 100_000, False),
    ("scan without sort stops at the limit", read({"kind": "eq"}, limit=10), None, 40, False),
    ("scan with sort reads everything", read({"kind": "eq"}, {"ts": 1}, 10), None, 100_000, True),
    ("equality prefix", read({"st": "eq"}), index(("st", 1)), 100, False),
    ("equality and hour range", read({"st": "eq", "ts": "range"}), index(("st", 1), ("ts", 1)), 0.1, False),
    (
        "range first still filters in the key",
        read({"st": "eq", "ts": "range"}),
        index(("ts", 1), ("st", 1)),
        0.1,
        False,
    ),
    ("sort served stops at the limit", read({"st": "eq"}, {"ts": -1}, 5), index(("st", 1), ("ts", 1)), 5, False),
    ("sort not served", read({"st": "eq"}, {"v": 1}, 5), index(("st", 1), ("ts", 1)), 100, True),
    (
        "sort broken by an unbound field",
        read({"st": "eq"}, {"ts": 1}),
        index(("st", 1), ("kind", 1), ("ts", 1)),
        100,
        True,
    ),
    ("mixed directions reversed", read({}, {"st": -1, "ts": 1}, 5), index(("st", 1), ("ts", -1)), 5, False),
    ("mixed directions not reversed", read({}, {"st": 1, "ts": 1}, 5), index(("st", 1), ("ts", -1)), None, None),
    ("sort on an equality field is free", read({"st": "eq"}, {"st": 1}), index(("st", 1)), 100, False),
    ("no leading field: not used", read({"kind": "eq"}), index(("st", 1), ("kind", 1)), None, None),
    ("a unique field", read({"email": "eq"}), index(("email", 1)), 1, False),
    ("hidden index", read({"st": "eq"}), index(("st", 1), hidden=True), None, None),
    ("partial without its field", read({"st": "eq"}), index(("st", 1), partial={"kind": {"$eq": 1}}), None, None),
    (
        "partial with its field",
        read({"st": "eq", "kind": "eq"}),
        index(("st", 1), partial={"kind": {"$eq": 1}}),
        25,
        False,
    ),
    ("sparse, equality on its field", read({"st": "eq"}), index(("st", 1), sparse=True), 100, False),
    ("sparse, only exists", read({"st": "exists"}), index(("st", 1), sparse=True), None, None),
    ("text index for a text search", read({"body": "text"}), index(("_fts", "text"), ("_ftsx", 1)), 100_000, False),
    ("text search on a plain index", read({"body": "text"}), index(("st", 1)), None, None),
]


@pytest.mark.parametrize(("case", "shape", "used", "docs", "in_memory"), COSTS, ids=[c[0] for c in COSTS])
def test_documents_examined(case, shape, used, docs, in_memory):
    found = cost(shape, used, SELECTIVITY)
    if docs is None:
        assert found is None, case
        return
    assert found is not None, case
    assert found.docs_examined == pytest.approx(docs, rel=0.01), case
    assert found.sort_in_memory is in_memory, case


def test_a_text_search_without_a_text_index_cannot_run():
    assert best(read({"body": "text"}), listed([]), SELECTIVITY) is None


def test_the_cheapest_index_wins_and_every_collection_has_its_id_index():
    indexes = listed([{"name": "st_1", "key": [["st", 1]]}, {"name": "st_1_ts_1", "key": [["st", 1], ["ts", 1]]}])
    assert [i.name for i in indexes] == ["_id_", "st_1", "st_1_ts_1"]
    assert best(read({"st": "eq", "ts": "range"}), indexes, SELECTIVITY).index.name == "st_1_ts_1"
    assert best(read({"_id": "eq"}), listed([]), Selectivity(Evidence(distinct={"_id": 100_000}))).docs_examined == 1


def test_coverage_needs_every_field_in_a_key_without_arrays():
    covered = cost(read({"st": "eq"}, projection=["ts"]), index(("st", 1), ("ts", 1)), SELECTIVITY)
    assert covered.covers_projection
    assert not cost(read({"st": "eq"}, projection=["v"]), index(("st", 1), ("ts", 1)), SELECTIVITY).covers_projection
    assert not cost(read({"tags": "eq"}, projection=["tags"]), index(("tags", 1)), SELECTIVITY).covers_projection


def test_an_array_matches_by_any_of_its_values():
    """30 tags, three a document: one tag is in a tenth of the documents, not a thirtieth."""
    share = SELECTIVITY.share("tags", "eq")
    assert share.value == pytest.approx(0.1) and "3 values per document" in share.basis


def test_unknown_shares_count_as_every_document():
    unknown = cost(read({"other": "range"}), index(("other", 1)), SELECTIVITY)
    assert unknown.docs_examined == 100_000 and any(
        "unknown width" in b or "not in the data" in b for b in unknown.basis
    )


MATCHES = [
    ("params are equalities", {"st": {"$param": "st"}}, {"st": "eq"}),
    ("ranges", {"ts": {"$gte": 1, "$lt": 2}}, {"ts": "range"}),
    ("$in", {"st": {"$in": [1, 2]}}, {"st": "in"}),
    (
        "elemMatch on fields",
        {"attrs": {"$elemMatch": {"k": "a", "v": {"$gt": 1}}}},
        {"attrs.k": "eq", "attrs.v": "range"},
    ),
    ("elemMatch on values", {"tags": {"$elemMatch": {"$gt": 1}}}, {"tags": "elemMatch"}),
    ("$and", {"$and": [{"a": 1}, {"b": {"$ne": 2}}]}, {"a": "eq", "b": "ne"}),
    ("text", {"$text": {"$search": "x"}}, {"$text": "text"}),
    ("geo", {"loc": {"$geoWithin": {"$param": "area"}}}, {"loc": "geo"}),
]


@pytest.mark.parametrize(("case", "match", "operators"), MATCHES, ids=[c[0] for c in MATCHES])
def test_shape_of_a_match(case, match, operators):
    assert from_match("r", "c", match).operators == operators, case
