"""Every format mongoexport and mongodump write, read by --dump: archives, --pretty, and mongopat's own
output left in a dump folder."""

import datetime
import json

import pytest
from bson import Decimal128, ObjectId, json_util
from typer.testing import CliRunner

from mongopat.cli import app
from mongopat.command import analyze
from mongopat.errors import InputError, SourceError
from mongopat.sources import DumpSource, SourceSpec
from tests.support.dumps import write_archive, write_export
from tests.support.paths import REAL

runner = CliRunner()

ORDERS = [
    {"_id": ObjectId(), "n": i, "price": Decimal128(f"{i}.5"), "at": datetime.datetime(2024, 1, 1, 0, i % 60)}
    for i in range(20)
]
USERS = [{"_id": i, "name": f"u{i}", "tags": ["a"] * (i % 3)} for i in range(7)]


def read(source, name):
    return [doc for doc, _size in source.documents(name, None)]


@pytest.mark.parametrize("compress", [False, True])
def test_archive_given_as_the_dump_is_read_with_interleaved_blocks(tmp_path, compress):
    path = write_archive(
        tmp_path / "shop.archive",
        {("shop", "orders"): ORDERS, ("shop", "users"): USERS},
        compress=compress,
        indexes={("shop", "orders"): [{"key": {"n": 1}, "name": "n_1", "unique": True}]},
        views=[("shop", "big_orders")],
    )
    source = DumpSource(path)
    assert source.database == "shop" and source.collections() == ["orders", "users"]  # the view is not data
    assert read(source, "orders") == ORDERS and read(source, "users") == USERS
    indexes, _notes = source.indexes("orders")
    assert [(i.name, i.unique) for i in indexes] == [("_id_", False), ("n_1", True)]
    sample = [doc for doc, _ in source.documents("orders", 5)]
    assert len(sample) == 5 and all(doc in ORDERS for doc in sample)
    assert source.partitions("orders", 4) is None
    assert source.count_existing_ids("users", [1, 2, 99]) == 2


def test_archive_inside_a_folder_and_beside_collection_files(tmp_path):
    write_archive(tmp_path / "nightly.agz", {("shop", "orders"): ORDERS}, compress=True)
    report = analyze(SourceSpec(dump=str(tmp_path)))
    assert report["source"]["database"] == "shop" and [c["name"] for c in report["collections"]] == ["orders"]
    assert report["collections"][0]["count"] == 20
    # Any name: mongodump --archive=FILE takes the name the user gives; the magic number tells.
    other = tmp_path / "other"
    write_archive(other / "backup-2026-11-30", {("other", "users"): USERS})
    write_export(other, "orders", ORDERS)
    assert DumpSource(other).collections() == ["orders", "users"]


def test_archive_with_several_databases_needs_db(tmp_path):
    path = write_archive(tmp_path / "all.archive", {("a", "x"): USERS, ("b", "y"): USERS})
    with pytest.raises(SourceError, match="several databases"):
        DumpSource(path)
    assert DumpSource(path, "b").collections() == ["y"]
    with pytest.raises(SourceError, match="database 'c' not found"):
        DumpSource(path, "c")


def test_truncated_or_corrupt_archive_is_an_input_error(tmp_path):
    path = write_archive(tmp_path / "t.archive", {("shop", "orders"): ORDERS})
    data = path.read_bytes()
    (tmp_path / "cut").mkdir()
    cut = tmp_path / "cut" / "t.archive"
    cut.write_bytes(data[: len(data) - 200])
    with pytest.raises(InputError, match="truncated archive"):
        read(DumpSource(cut), "orders")
    result = runner.invoke(app, ["analyze", "--dump", str(cut)])
    assert result.exit_code == 2 and "truncated archive" in result.output and "Traceback" not in result.output


def test_migrations_refuse_an_archive_with_a_clear_message(tmp_path):
    path = write_archive(tmp_path / "t.archive", {("shop", "orders"): ORDERS})
    result = runner.invoke(app, ["migrate", "up", "--dump", str(path), "--dir", str(tmp_path / "m")])
    assert result.exit_code == 2 and "read-only" in result.output and "Traceback" not in result.output


def pretty(documents, indent="\t"):
    return "\n".join(json.dumps(json.loads(json_util.dumps(d)), indent=indent) for d in documents) + "\n"


@pytest.mark.parametrize("indent", ["\t", 2])
def test_pretty_exports_are_streamed(tmp_path, indent, monkeypatch):
    import mongopat.sources.dump as dump

    monkeypatch.setattr(dump, "_ARRAY_CHUNK", 64)  # documents cut across reads
    (tmp_path / "orders.json").write_text(pretty(ORDERS, indent))
    source = DumpSource(tmp_path)
    assert read(source, "orders") == ORDERS
    assert source.partitions("orders", 4) is None
    report = analyze(SourceSpec(dump=str(tmp_path)))
    assert report["collections"][0]["count"] == 20


def test_pretty_export_errors_name_the_line(tmp_path):
    text = pretty(ORDERS[:3]).splitlines()
    text[9] = text[9].replace(":", "", 1)  # a broken line inside the second document
    (tmp_path / "orders.json").write_text("\n".join(text) + "\n")
    result = runner.invoke(app, ["analyze", "--dump", str(tmp_path)])
    assert result.exit_code == 2 and "orders.json:10" in result.output and "Traceback" not in result.output


def test_one_line_documents_are_not_taken_for_pretty_ones(tmp_path):
    write_export(tmp_path, "orders", ORDERS)
    assert DumpSource(tmp_path).partitions("orders", 2) is None  # small: one reader, but lines layout
    from mongopat.sources.dump import _json_layout

    with (tmp_path / "orders.json").open("rb") as handle:
        assert _json_layout(handle) == "lines"


def test_reports_written_into_the_dump_folder_are_not_collections(tmp_path):
    write_export(tmp_path, "orders", ORDERS)
    first = runner.invoke(
        app, ["analyze", "--dump", str(tmp_path), "--format", "json", "--output", str(tmp_path / "report.json")]
    )
    assert first.exit_code == 0, first.output
    recs = runner.invoke(
        app, ["recommend", "--dump", str(tmp_path), "--format", "json", "--output", str(tmp_path / "recs.json")]
    )
    assert recs.exit_code == 0, recs.output
    second = runner.invoke(app, ["analyze", "--dump", str(tmp_path), "--format", "json"])
    assert second.exit_code == 0, second.output
    assert [c["name"] for c in json.loads(second.stdout)["collections"]] == ["orders"]


def test_decimal_prices_count_distinct_values(tmp_path):
    write_export(tmp_path, "orders", ORDERS)
    report = analyze(SourceSpec(dump=str(tmp_path)))
    price = next(f for f in report["collections"][0]["fields"] if f["path"] == "price")
    assert price["cardinality"]["distinct"] == 20


@pytest.mark.parametrize("name", ["weatherdata", "supplies", "geospatial"])
def test_real_sample_archives_are_read(name):
    """Slices of MongoDB's public sample datasets, as mongodump --archive --gzip ships them."""
    report = analyze(SourceSpec(dump=str(REAL / f"sample_{name}.archive.gz")))
    [collection] = report["collections"]
    assert collection["count"] == {"weatherdata": 400, "supplies": 200, "geospatial": 400}[name]
    assert collection["indexes"][0]["name"] == "_id_"
