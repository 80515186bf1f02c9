"""From a mongodump archive to applied migrations, as a newcomer goes: every command mongopat prints next
runs as printed; ``mongopat unpack`` writes an archive out as the dump folder mongodump would have written."""

from __future__ import annotations

import json
import shlex

import bson
import pytest
from typer.testing import CliRunner

from mongopat.cli import app
from tests.support.dumps import write_archive
from tests.support.paths import REAL

runner = CliRunner()


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def printed(command: str) -> list[list[str]]:
    """The mongopat commands of a printed line (``a && b``), as argument lists without ``mongopat``."""
    commands = [shlex.split(part) for part in command.split("&&")]
    assert all(words[0] == "mongopat" for words in commands), command
    return [words[1:] for words in commands]


def test_unpack_writes_the_folder_mongodump_would_have(tmp_path):
    orders = [{"_id": i, "total": i * 1.5, "items": [{"sku": "a"}] * (i % 3)} for i in range(10)]
    users = [{"_id": f"u{i}", "name": f"user {i}"} for i in range(7)]
    archive = write_archive(
        tmp_path / "shop.archive.gz",
        {("shop", "orders"): orders, ("shop", "users"): users, ("shop", "empty"): [], ("other", "things"): users[:2]},
        compress=True,
        block=2,
        indexes={("shop", "orders"): [{"v": 2, "key": {"total": 1}, "name": "total_1"}]},
        views=[("shop", "big_orders")],
    )
    code, output = invoke("unpack", str(archive), "--to", str(tmp_path / "dump"), "--db", "shop")
    assert code == 0, output
    folder = tmp_path / "dump" / "shop"
    assert (folder / "orders.bson").read_bytes() == b"".join(bson.encode(d) for d in orders)
    assert (folder / "users.bson").read_bytes() == b"".join(bson.encode(d) for d in users)
    assert (folder / "empty.bson").read_bytes() == b""
    assert [i["name"] for i in json.loads((folder / "orders.metadata.json").read_text())["indexes"]] == [
        "_id_",
        "total_1",
    ]
    assert (folder / "big_orders.metadata.json").exists() and not (folder / "big_orders.bson").exists()
    assert not (tmp_path / "dump" / "other").exists()
    assert sorted(p.name for p in (tmp_path / "dump").iterdir()) == ["shop"]  # no staging folder left
    # Never over an existing folder; not an archive: input errors.
    assert invoke("unpack", str(archive), "--to", str(tmp_path / "dump"), "--db", "shop")[0] == 2
    assert invoke("unpack", str(folder / "orders.bson"), "--to", str(tmp_path / "x"))[0] == 2
    assert invoke("unpack", str(archive), "--to", str(tmp_path / "x"), "--db", "nope")[0] == 2


def test_from_an_archive_to_applied_migrations_every_printed_command_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    archive = str(REAL / "sample_supplies.archive.gz")
    access = str(REAL / "supplies.access.yaml")
    code, output = invoke("recommend", "--dump", archive, "--access", access, "-f", "json", "-o", "recs.json")
    assert code == 0, output
    code, output = invoke("migrate", "plan", "--from", "recs.json", "--dir", "migrations", "--yes")
    assert code == 0, output
    up_line = next(line for line in output.splitlines() if "then: " in line).split("then: ", 1)[1]
    guide_line = next(line for line in output.splitlines() if "migrate guide" in line).split(": ", 1)[1]
    assert printed(up_line)[0][0] == "unpack"  # migrations write: the archive is unpacked first
    code, guided = invoke(*printed(guide_line)[0])
    assert code == 0 and "archive holds no changelog" in guided, guided
    code, checked = invoke("check", "--dump", archive, "--access", access, "-f", "json")
    assert code in (0, 1) and "archive holds no changelog" in checked, checked
    for command in printed(up_line):
        code, output = invoke(*command, "--yes") if command[0] == "migrate" else invoke(*command)
        assert code == 0, (command, output)
    code, output = invoke("migrate", "status", "--dump", "dump/sample_supplies", "--dir", "migrations", "-f", "json")
    rows = json.loads(output)
    rows = rows["migrations"] if isinstance(rows, dict) else rows
    assert code == 0 and rows and all(row["state"] == "applied" for row in rows), output


@pytest.mark.parametrize("command", [["migrate", "up"], ["migrate", "status"], ["migrate", "rehearse"]])
def test_a_command_that_writes_says_how_to_unpack_an_archive(command, tmp_path):
    (tmp_path / "migrations").mkdir()
    (tmp_path / "migrations" / "0001_flag.yaml").write_text(
        "id: 0001_flag\ndescription: flag\nsteps:\n- {step: set_field, collection: sales, field: f, value: 1}\n"
    )
    archive = str(REAL / "sample_supplies.archive.gz")
    code, output = invoke(*command, "--dump", archive, "--dir", str(tmp_path / "migrations"))
    assert code == 2 and f"mongopat unpack {archive} --to dump" in " ".join(output.split()), output


def test_a_proof_the_embedded_engine_cannot_run_says_so_instead_of_failing(tmp_path, monkeypatch, mongo):
    """The sales list sums Decimal128 prices: the embedded engine cannot multiply them, today's read as much
    as the rewritten one. ``guide --check`` says the read needs a server instead of reporting differences;
    with a server (``--scratch-uri``) the read is proven."""
    monkeypatch.chdir(tmp_path)
    archive, access = str(REAL / "sample_supplies.archive.gz"), str(REAL / "supplies.access.yaml")
    assert invoke("unpack", archive, "--to", "dump")[0] == 0
    assert (
        invoke("recommend", "--dump", "dump/sample_supplies", "--access", access, "-f", "json", "-o", "r.json")[0] == 0
    )
    assert invoke("migrate", "plan", "--from", "r.json", "--dir", "migrations", "--only", "MP104", "--yes")[0] == 0
    assert invoke("migrate", "up", "--dump", "dump/sample_supplies", "--dir", "migrations", "--yes")[0] == 0
    scratch = ["--scratch-uri", mongo.uri] if mongo.real else []
    code, output = invoke(
        "migrate", "guide", "--check", "--dir", "migrations", "--access", access, "--dump", "dump/sample_supplies",
        "--samples", "2", *scratch, "-f", "json",
    )  # fmt: skip
    assert code == 0, output
    [checked] = json.loads(output)["migrations"]
    assert checked["differences"] == []
    unproven = [note for note in checked["skipped"] if "not proven here" in note]
    if mongo.real:
        assert not unproven and checked["reads_compared"] > 0
    else:
        assert unproven and "--scratch-uri" in unproven[0] and "sales_list" in unproven[0]
