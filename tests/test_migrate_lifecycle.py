"""Migration lifecycle errors a user recovers from: an edited applied migration is refused by the command
line as by the engine, a typo in a new migration is an input error (exit 2) that the fixed file runs past,
and a missing migrations folder is an error, on a dump folder and on a server."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from mongopat import api
from mongopat.cli import app
from mongopat.errors import OperationFailed
from tests.support.paths import SAMPLE_CONFIGS

runner = CliRunner()
ORDERS = 800


def migration(folder: Path, name: str, *steps: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    body = "".join(f"- {step}\n" for step in steps)
    path.write_text(f"id: {name}\ndescription: {name}\nsteps:\n{body}", encoding="utf-8")
    return path


def target_of(kind: str, mongo: Any, tmp_path: Path) -> list[str]:
    """The ecommerce sample as a dump folder, or loaded into the test lane's database."""
    if kind == "dump":
        data = tmp_path / "data"
        shutil.copytree(SAMPLE_CONFIGS / "ecommerce" / "shop", data)
        return ["--dump", str(data)]
    from mongopat.sources.dump import read_json_documents

    for path in sorted((SAMPLE_CONFIGS / "ecommerce" / "shop").glob("*.json")):
        mongo.db[path.stem].insert_many(list(read_json_documents(path)))
    return mongo.cli_args()


def up(target: list[str], folder: Path) -> Any:
    return runner.invoke(app, ["migrate", "up", *target, "--dir", str(folder), "--yes"])


def status(target: list[str], folder: Path) -> dict[str, dict[str, Any]]:
    import json

    result = runner.invoke(app, ["migrate", "status", *target, "--dir", str(folder), "-f", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    rows = rows["migrations"] if isinstance(rows, dict) else rows
    return {row["id"]: row for row in rows}


@pytest.mark.parametrize("kind", ["dump", "server"])
def test_an_edited_applied_migration_is_refused_by_the_command_line(kind, mongo, tmp_path):
    target = target_of(kind, mongo, tmp_path)
    folder = tmp_path / "migrations"
    path = migration(folder, "0001_flag", "{step: set_field, collection: orders, field: flag, value: 1}")
    assert up(target, folder).exit_code == 0
    path.write_text(path.read_text().replace("value: 1", "value: 2"), encoding="utf-8")
    refused = up(target, folder)
    assert refused.exit_code == 1 and "changed since they ran: 0001_flag" in refused.output
    assert status(target, folder)["0001_flag"]["edited"]


@pytest.mark.parametrize("kind", ["dump", "server"])
def test_a_typo_in_a_new_migration_is_an_input_error_the_fixed_file_runs_past(kind, mongo, tmp_path):
    target = target_of(kind, mongo, tmp_path)
    folder = tmp_path / "migrations"
    path = migration(folder, "0001_flag", "{step: set_field, collection: ordrs, field: flag, value: 1}")
    failed = up(target, folder)
    assert failed.exit_code == 2, failed.output
    assert "'ordrs' not found" in failed.output and "nothing was written: fix the migration file" in failed.output
    assert status(target, folder)["0001_flag"]["state"] == "failed"
    assert not status(target, folder)["0001_flag"]["edited"]
    path.write_text(path.read_text().replace("ordrs", "orders"), encoding="utf-8")
    fixed = up(target, folder)
    assert fixed.exit_code == 0, fixed.output
    row = status(target, folder)["0001_flag"]
    assert row["state"] == "applied" and not row["edited"] and row["written"] == ORDERS


def test_a_failure_after_writes_keeps_its_migration_refused_once_edited(tmp_path):
    """Steps that ran changed documents: the edited file may not run on top of them; down first."""
    data = tmp_path / "data"
    shutil.copytree(SAMPLE_CONFIGS / "ecommerce" / "shop", data)
    folder = tmp_path / "migrations"
    path = migration(
        folder,
        "0001_two",
        "{step: set_field, collection: orders, field: flag, value: 1}",
        "{step: set_field, collection: ordrs, field: flag, value: 1}",
    )
    failed = up(["--dump", str(data)], folder)
    assert failed.exit_code == 2 and "'mongopat migrate down' reverts them" in failed.output
    path.write_text(path.read_text().replace("ordrs", "orders"), encoding="utf-8")
    assert up(["--dump", str(data)], folder).exit_code == 1
    with pytest.raises(OperationFailed, match="changed since they ran"):
        api.up(api.dump_folder(str(data)), str(folder))


@pytest.mark.parametrize("command", [["status"], ["up", "--yes"], ["down", "--yes"], ["verify"]])
def test_a_missing_migrations_folder_is_an_error(command, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(SAMPLE_CONFIGS / "ecommerce" / "shop", data)
    result = runner.invoke(
        app, ["migrate", command[0], "--dump", str(data), "--dir", str(tmp_path / "nodir"), *command[1:]]
    )
    assert result.exit_code == 2 and "no migrations folder" in result.output, result.output


def test_down_says_what_it_would_revert_and_speaks_json(tmp_path):
    import json

    data = tmp_path / "data"
    shutil.copytree(SAMPLE_CONFIGS / "ecommerce" / "shop", data)
    folder = tmp_path / "migrations"
    migration(folder, "0001_flag", "{step: set_field, collection: orders, field: flag, value: 1}")
    migration(folder, "0002_more", "{step: set_field, collection: customers, field: vip, value: false}")
    target = ["--dump", str(data)]
    assert up(target, folder).exit_code == 0
    before = (data / "orders.json").read_bytes()
    dry = runner.invoke(
        app, ["migrate", "down", *target, "--dir", str(folder), "--to", "base", "--dry-run", "-f", "json"]
    )
    assert dry.exit_code == 0, dry.output
    planned = json.loads(dry.stdout)
    assert planned["dry_run"] and [m["id"] for m in planned["would_revert"]] == ["0002_more", "0001_flag"]
    assert (data / "orders.json").read_bytes() == before and status(target, folder)["0001_flag"]["state"] == "applied"
    done = runner.invoke(app, ["migrate", "down", *target, "--dir", str(folder), "--yes", "-f", "json"])
    assert json.loads(done.stdout) == {"down_version": 1, "dry_run": False, "reverted": ["0002_more"]}
