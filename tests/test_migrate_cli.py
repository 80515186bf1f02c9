"""The whole flow through the CLI: analyze -> recommend -> plan -> up -> verify -> down --to base."""

import json

import pytest
from typer.testing import CliRunner

from mongopat.cli import app
from mongopat.sources import DumpSource
from tests.support.migrations import snapshot
from tests.support.paths import SAMPLE_CONFIGS

runner = CliRunner()


def restore(mongo, scenario: str) -> None:
    """Load a sample scenario into the test database (what mongorestore/mongoimport would do)."""
    source = DumpSource(SAMPLE_CONFIGS / scenario)
    for name in source.collections():
        mongo.db[name].insert_many([doc for doc, _ in source.documents(name, None)])


def test_end_to_end_on_the_ecommerce_sample(mongo, tmp_path):
    restore(mongo, "ecommerce")
    before = snapshot(mongo.db)
    target = mongo.cli_args()
    recs = tmp_path / "recs.json"
    folder = tmp_path / "migrations"
    result = runner.invoke(
        app,
        [
            "recommend",
            *target,
            "--access",
            str(SAMPLE_CONFIGS / "ecommerce/access.yaml"),
            "-f",
            "json",
            "-o",
            str(recs),
        ],
    )
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["migrate", "plan", "--from", str(recs), "--dir", str(folder), "--yes"])
    assert result.exit_code == 0, result.output
    planned = sorted(p.name for p in folder.iterdir())
    assert planned[0].startswith("0001_") and any("computed_orders" in p for p in planned)
    status = json.loads(runner.invoke(app, ["migrate", "status", *target, "--dir", str(folder), "-f", "json"]).stdout)
    assert {m["state"] for m in status["migrations"]} == {"pending"}
    dry = runner.invoke(app, ["migrate", "up", *target, "--dir", str(folder), "--dry-run", "-f", "json"])
    assert dry.exit_code == 0 and snapshot(mongo.db) == before
    # On SecantusDB the path inside the server $merges into collections keyed by documents, which it scans
    # for each (README, conformance): 75 s of this test's 110 there. That path runs from the command line
    # in test_real_server.py; here the client side's.
    client_side = ["--client-side"] if mongo.engine == "secantusdb" else []
    up = runner.invoke(
        app, ["migrate", "up", *target, "--dir", str(folder), "--yes", "--batch-size", "100", *client_side]
    )
    assert up.exit_code == 0, up.output
    assert "applied 0001_" in up.output
    verify = runner.invoke(app, ["migrate", "verify", *target, "--dir", str(folder)])
    assert verify.exit_code == 0, verify.output
    order = mongo.db.orders.find_one({"has_overflow": True})
    assert order is not None and "total" in order and "customer" in order
    down = runner.invoke(app, ["migrate", "down", *target, "--dir", str(folder), "--to", "base", "--yes"])
    assert down.exit_code == 0, down.output
    assert snapshot(mongo.db) == before


def test_migrate_errors_exit_2(tmp_path, mongo):
    (tmp_path / "0001_bad.yaml").write_text(
        "id: 0001_bad\ndescription: x\nsteps:\n- step: outlier\n  collection: c\n  field: f\n"
    )
    result = runner.invoke(app, ["migrate", "status", *mongo.cli_args(), "--dir", str(tmp_path)])
    assert result.exit_code == 2 and "0001_bad.yaml:4" in result.output and "threshold" in result.output


def test_verify_exit_1_on_problems(mongo, tmp_path):
    restore(mongo, "blog")
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "0001_subset.yaml").write_text(
        "id: 0001_subset\ndescription: s\nsteps:\n- step: subset\n  collection: posts\n  field: comments\n  keep: 10\n"
        "  full_collection: posts_comments\n"
    )
    # On the client side: inside the server, the full list's $merge on its document _ids is a collection scan
    # per comment on SecantusDB (the README's conformance table), 40 minutes for the blog sample here.
    up = ["migrate", "up", *mongo.cli_args(), "--dir", str(folder), "--yes", "--client-side"]
    assert runner.invoke(app, up).exit_code == 0
    mongo.db.mongopat_backup.delete_one({})  # an original lost: down could not restore that document
    result = runner.invoke(app, ["migrate", "verify", *mongo.cli_args(), "--dir", str(folder)])
    assert result.exit_code == 1 and "not kept for rollback" in result.output


def test_new_writes_a_file_to_fill_in(tmp_path):
    result = runner.invoke(
        app,
        [
            "migrate",
            "new",
            "bucket readings",
            "--pattern",
            "bucket",
            "-c",
            "readings",
            "-p",
            "series_key=sensorId",
            "--dir",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 0
    text = (tmp_path / "0001_bucket_readings.yaml").read_text()
    assert "series_key: sensorId" in text and "Fill in: time_field, window_seconds" in text
    assert (
        runner.invoke(app, ["migrate", "new", "x", "--pattern", "nope", "-c", "c", "--dir", str(tmp_path)]).exit_code
        == 2
    )


@pytest.mark.parametrize(
    "collection,message",
    [
        ("../etc", "path separator"),
        ("a$b", "contains '$'"),
        ("system.views", "system collection"),
        (".hidden", "starts with '.'"),
    ],
)
def test_collection_names_are_checked_with_file_and_line(tmp_path, mongo, collection, message):
    (tmp_path / "0001_bad.yaml").write_text(
        f"id: 0001_bad\ndescription: x\nsteps:\n- step: computed\n  collection: {json.dumps(collection)}\n"
        "  field: t\n  expression: a + 1\n"
    )
    for command in (["migrate", "status", *mongo.cli_args()], ["migrate", "up", "--yes", *mongo.cli_args()]):
        result = runner.invoke(app, [*command, "--dir", str(tmp_path)])
        assert result.exit_code == 2 and "0001_bad.yaml:4" in result.output and message in result.output
    recs = tmp_path / "recs.json"
    recs.write_text(
        json.dumps(
            {
                "recommendations": [
                    {"code": "MP104", "migration": {"step": "copy_collection", "collection": "c", "to": "../x"}}
                ]
            }
        )
    )
    result = runner.invoke(app, ["migrate", "plan", "--from", str(recs), "--dir", str(tmp_path / "new")])
    assert "path separator" in result.output and not (tmp_path / "new").exists()


def test_a_dump_folder_run_loads_neither_the_driver_nor_rich(tmp_path):
    """`migrate up --dump` in a deploy script starts fast: no pymongo, no rich tables, no analysis."""
    import subprocess
    import sys

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "c.json").write_text('{"_id": 1}\n')
    (tmp_path / "migrations").mkdir()
    script = (
        "import runpy, sys\n"
        f"sys.argv = ['mongopat', 'migrate', 'up', '--dump', {str(tmp_path / 'data')!r}, "
        f"'--dir', {str(tmp_path / 'migrations')!r}, '--yes']\n"
        "try:\n    runpy.run_module('mongopat', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('pymongo', 'rich', 'mongopat.analysis.collection') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.strip().splitlines()[-1] == "[]", result.stdout + result.stderr
