"""``mongopat analyze`` through the CLI (typer's runner): output, exit codes, errors."""

import json

import pytest
from bson import ObjectId
from typer.testing import CliRunner

from mongopat.cli import app
from mongopat.errors import InputError
from mongopat.report import REPORT_VERSION, load_report
from tests.support.dumps import write_bson_dump, write_export

runner = CliRunner()


@pytest.fixture
def export(tmp_path):
    folder = tmp_path / "shop"
    write_export(
        folder,
        "orders",
        [{"_id": ObjectId(), "items": [{"price": 1.5, "qty": 2}] * (i % 5), "status": "paid"} for i in range(40)],
    )
    write_bson_dump(
        folder,
        "customers",
        [{"_id": i, "email": f"u{i}@x.io"} for i in range(10)],
        indexes=[{"key": {"_id": 1}, "name": "_id_"}],
    )
    return folder


def test_table_output_on_a_dump(export):
    result = runner.invoke(app, ["analyze", "--dump", str(export)])
    assert result.exit_code == 0, result.output
    assert "orders" in result.output and "customers" in result.output
    assert "items[].price" in result.output


def test_json_output_is_the_versioned_report(export):
    result = runner.invoke(app, ["analyze", "--dump", str(export), "--format", "json"])
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert report["report_version"] == REPORT_VERSION
    assert report["source"] == {"kind": "dump", "location": str(export), "database": "shop"}
    orders = next(c for c in report["collections"] if c["name"] == "orders")
    assert orders["count"] == 40 and orders["count_exact"] is True
    customers = next(c for c in report["collections"] if c["name"] == "customers")
    assert customers["indexes"][0]["name"] == "_id_"


def test_output_file_round_trips_through_load_report(export, tmp_path):
    target = tmp_path / "report.json"
    result = runner.invoke(app, ["analyze", "--dump", str(export), "-c", "orders", "--output", str(target), "-q"])
    assert result.exit_code == 0
    report = load_report(target)
    assert [c["name"] for c in report["collections"]] == ["orders"]


def test_on_mongomock_or_server(mongo):
    mongo.db.posts.insert_many([{"title": "t", "comments": [{"by": "x"}] * i} for i in range(12)])
    result = runner.invoke(app, ["analyze", *mongo.cli_args(), "--format", "json"])
    assert result.exit_code == 0, result.output
    posts = json.loads(result.stdout)["collections"][0]
    assert posts["name"] == "posts" and posts["count"] == 12
    comments = next(f for f in posts["fields"] if f["path"] == "comments")
    assert comments["array"]["max"] == 11


def test_uri_from_environment(mongo):
    mongo.db.things.insert_one({"a": 1})
    result = runner.invoke(app, ["analyze", "--db", mongo.db_name, "-f", "json"], env={"MONGOPAT_URI": mongo.uri})
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "no data source"),
        (["--dump", "/no/such/folder"], "dump folder not found"),
        (["--uri", "redis://localhost"], "unsupported URI"),
        (["--uri", "mongomock://x/db", "--dump", "."], "either --uri or --dump"),
        (["--dump", ".", "--format", "yaml"], "is not one of"),
    ],
)
def test_input_errors_exit_2_with_one_line(args, message):
    result = runner.invoke(app, ["analyze", *args])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_unreachable_server_exit_2_no_password():
    result = runner.invoke(app, ["analyze", "--uri", "mongodb://bob:s3cr3tpass@127.0.0.1:9/db", "--timeout-ms", "300"])
    assert result.exit_code == 2
    assert "cannot reach MongoDB" in result.output
    assert "s3cr3tpass" not in result.output and "bob:***@" in result.output


def test_malformed_export_line_exit_2(tmp_path):
    (tmp_path / "c.json").write_text('{"a": 1}\n{oops}\n')
    result = runner.invoke(app, ["analyze", "--dump", str(tmp_path)])
    assert result.exit_code == 2
    assert "c.json:2" in result.output


def test_help_has_examples():
    result = runner.invoke(app, ["analyze", "--help"])
    assert result.exit_code == 0 and "Examples" in result.output


def test_load_report_errors(tmp_path):
    bad = tmp_path / "r.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match=r"r.json:1:2"):
        load_report(bad)
    bad.write_text('{"collections": []}')
    with pytest.raises(InputError, match="not a mongopat report"):
        load_report(bad)
    bad.write_text('{"report_version": 99, "collections": []}')
    with pytest.raises(InputError, match="not supported"):
        load_report(bad)
    with pytest.raises(InputError, match="not found"):
        load_report(tmp_path / "missing.json")


def test_json_with_output_goes_to_the_file_and_the_terminal_says_where(tmp_path):
    from tests.support.dumps import write_export

    write_export(tmp_path / "export", "orders", [{"_id": i, "n": i} for i in range(5)])
    for command in ("analyze", "recommend"):
        target = tmp_path / f"{command}.json"
        result = CliRunner().invoke(app, [command, "--dump", str(tmp_path / "export"), "-f", "json", "-o", str(target)])
        assert result.exit_code == 0, result.output
        assert result.stdout == "" and f"written to {target}" in result.stderr
        assert json.loads(target.read_text())


def test_at_80_columns_every_field_is_one_line_and_keeps_its_leaf(tmp_path):
    import io

    from rich.console import Console

    from mongopat.render.console import middle_cut, print_report

    deep = {"observation": {"skyCondition": {"totalCoverage": {"value": "08", "quality": "1"}}}}
    write_export(tmp_path / "export", "weather", [{"_id": i, **deep, "n": i} for i in range(5)])
    result = CliRunner().invoke(app, ["analyze", "--dump", str(tmp_path / "export"), "-f", "json"])
    report = json.loads(result.stdout)
    out = io.StringIO()
    print_report(report, Console(file=out, width=80, color_system=None), verbose=False)
    lines = out.getvalue().splitlines()
    assert all(len(line) <= 80 for line in lines)
    rows = [line for line in lines if "100%" in line]
    assert len(rows) == len(report["collections"][0]["fields"])  # no path folded onto a second line
    assert any(".totalCoverage.quality" in row for row in rows)
    assert middle_cut("a.b", 10) == "a.b" and len(middle_cut("x" * 50, 20)) == 20
    assert middle_cut("skyConditionObservation.totalCoverage.value", 26).endswith("….totalCoverage.value")
