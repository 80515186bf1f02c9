"""Damaged input files: a clear error (exit 2, naming the file) or a correct run, never an internal error.

Each input kind mongopat reads is written from MongoDB's sales sample (the supplies archive in
``tests/fixtures/real``), then damaged by a seeded mutation: a byte changed, the file cut, bytes inserted,
a slice repeated. Compressed kinds are damaged in their compressed bytes, as a download cut short or a disk
error damages them. ``MONGOPAT_FUZZ_RUNS`` sets the runs per kind (default 24; thousands locally:
``MONGOPAT_FUZZ_RUNS=2000 python3 -m pytest tests/test_fuzz_inputs.py``).
"""

from __future__ import annotations

import gzip
import json
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import bson
import pytest
from bson import json_util
from typer.testing import CliRunner

from mongopat.cli import app
from mongopat.migrate.script import render
from mongopat.sources.archive import archive_records
from tests.support.paths import REAL

RUNS = int(os.environ.get("MONGOPAT_FUZZ_RUNS", "24"))
SALES = 60  # documents of the sample written in each file: small files keep a run in milliseconds


def sales() -> list[dict]:
    documents = []
    for _offset, raw in archive_records(REAL / "sample_supplies.archive.gz", "sample_supplies", "sales"):
        documents.append(bson.decode(raw))
        if len(documents) == SALES:
            break
    return documents


def lines(documents: list[dict]) -> bytes:
    return "".join(json_util.dumps(d) + "\n" for d in documents).encode()


def pretty(documents: list[dict]) -> bytes:
    return "".join(json_util.dumps(d, indent=2) + "\n" for d in documents).encode()


def array(documents: list[dict]) -> bytes:
    return ("[" + ",\n".join(json_util.dumps(d) for d in documents) + "]\n").encode()


def dumped(documents: list[dict]) -> bytes:
    return b"".join(bson.encode(d) for d in documents)


METADATA = json.dumps({"indexes": [{"v": 2, "key": {"_id": 1}, "name": "_id_"}], "collectionName": "sales"})

ACCESS = (REAL / "supplies.access.yaml").read_bytes()
CONFIG = b"""version: 1
thresholds: {MP201: {warn_length: 500}}
rules:
  - {id: total-present, collection: sales, field: customer, required: true}
  - {id: small-documents, collection: "*", max_document_bytes: 1048576}
waivers:
  - {id: MP201, collection: sales, field: items, reason: "bounded by the shop, OPS-12", expires: 2099-03-01}
snapshot: {presence_tolerance: 0.2, length_factor: 2.0}
"""
MIGRATION = render(
    "0001_total",
    "total",
    [{"step": "computed", "collection": "sales", "field": "total", "expression": "sum(items.price * items.quantity)"}],
).encode()


def slow_log() -> bytes:
    entries = []
    for second in range(40):
        attr = {
            "type": "command",
            "ns": "sample_supplies.sales",
            "command": {"find": "sales", "filter": {"storeLocation": "Denver"}, "$db": "sample_supplies"},
            "planSummary": "COLLSCAN",
            "docsExamined": 5000,
            "nreturned": 10,
            "durationMillis": 120 + second,
        }
        stamp = {"$date": f"2026-11-30T10:00:{second:02d}.000+00:00"}
        entries.append(
            json.dumps({"t": stamp, "s": "I", "c": "COMMAND", "id": 51803, "msg": "Slow query", "attr": attr})
        )
    return ("\n".join(entries) + "\n").encode()


@dataclass
class Kind:
    name: str
    filename: str
    content: Callable[[], bytes]
    command: Callable[[Path, Path], list[str]]  # (the damaged file, the case's folder) -> arguments
    exits: tuple[int, ...] = (0, 2)
    names_file: tuple[int, ...] = (2,)  # exit codes whose message must name the damaged file


def _dump(path: Path, _folder: Path) -> list[str]:
    return ["analyze", "--dump", str(path.parent), "-q", "-f", "json"]


def _archive(path: Path, _folder: Path) -> list[str]:
    return ["analyze", "--dump", str(path), "--db", "sample_supplies", "-q", "-f", "json"]


def _report(folder: Path) -> Path:
    report = folder / "report.json"
    if not report.exists():
        data = folder / "clean"
        data.mkdir()
        (data / "sales.json").write_bytes(lines(sales()))
        result = CliRunner().invoke(app, ["analyze", "--dump", str(data), "-q", "-o", str(report), "-f", "json"])
        assert result.exit_code == 0, result.output
    return report


def _access(path: Path, folder: Path) -> list[str]:
    return ["recommend", "--report", str(_report(folder)), "--access", str(path), "-q", "-f", "json"]


def _config(path: Path, folder: Path) -> list[str]:
    return ["check", "--report", str(_report(folder)), "--config", str(path), "-q", "-f", "json"]


def _migration(path: Path, folder: Path) -> list[str]:
    data = folder / "data"
    if not data.exists():
        data.mkdir()
        (data / "sales.json").write_bytes(lines(sales()))
    return ["migrate", "status", "--dump", str(data), "--dir", str(path.parent), "-f", "json"]


def _log(path: Path, _folder: Path) -> list[str]:
    return ["access", "draft", "--log", str(path), "--db", "sample_supplies", "-q"]


def _gz(content: Callable[[], bytes]) -> Callable[[], bytes]:
    return lambda: gzip.compress(content(), mtime=0)


KINDS = [
    Kind("lines", "sales.json", lambda: lines(sales()), _dump),
    Kind("pretty", "sales.json", lambda: pretty(sales()), _dump),
    Kind("jsonArray", "sales.json", lambda: array(sales()), _dump),
    Kind("bson", "sales.bson", lambda: dumped(sales()), _dump),
    Kind("lines.gz", "sales.json.gz", _gz(lambda: lines(sales())), _dump),
    Kind("pretty.gz", "sales.json.gz", _gz(lambda: pretty(sales())), _dump),
    Kind("jsonArray.gz", "sales.json.gz", _gz(lambda: array(sales())), _dump),
    Kind("bson.gz", "sales.bson.gz", _gz(lambda: dumped(sales())), _dump),
    Kind("metadata", "sales.metadata.json", lambda: METADATA.encode(), _dump),
    Kind("archive", "supplies.archive", lambda: gzip.decompress((REAL / "sample_supplies.archive.gz").read_bytes()), _archive),
    Kind("archive.gz", "supplies.archive.gz", lambda: (REAL / "sample_supplies.archive.gz").read_bytes(), _archive),
    Kind("access", "access.yaml", lambda: ACCESS, _access, (0, 1, 2)),
    Kind("check config", "mongopat.yaml", lambda: CONFIG, _config, (0, 1, 2)),
    Kind("migration", "0001_total.yaml", lambda: MIGRATION, _migration, (0, 1, 2)),
    # A log that gives no slow query at all: exit 1, "no source gave evidence", naming what each source gave.
    Kind("slow-query log", "mongod.log", slow_log, _log, (0, 1, 2), (1, 2)),
    Kind("slow-query log.gz", "mongod.log.gz", _gz(slow_log), _log, (0, 1, 2), (1, 2)),
]  # fmt: skip


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One damage of the kinds files meet: a changed byte, a cut, inserted bytes, a repeated slice."""
    where = rng.randrange(len(data))
    kind = rng.choice(("byte", "byte", "cut", "insert", "repeat"))
    if kind == "byte":
        return (
            data[:where] + bytes([rng.choice((0x00, 0xFE, 0xFF, 0x7B, 0x22, rng.randrange(256)))]) + data[where + 1 :]
        )
    if kind == "cut":
        return data[:where]
    if kind == "insert":
        return data[:where] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 8))) + data[where:]
    size = rng.randint(1, 64)
    return data[:where] + data[where : where + size] * 2 + data[where + size :]


_CONTENT: dict[str, bytes] = {}


@pytest.mark.parametrize("seed", range(RUNS))
@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_a_damaged_file_gets_a_clear_error_or_a_correct_run(tmp_path, kind, seed):
    if kind.name not in _CONTENT:
        _CONTENT[kind.name] = kind.content()
    rng = random.Random(f"{kind.name}/{seed}")
    folder = tmp_path / "input"
    folder.mkdir()
    path = folder / kind.filename
    path.write_bytes(mutate(_CONTENT[kind.name], rng))
    if kind.name == "metadata":
        (folder / "sales.json").write_bytes(lines(sales()))
    result = CliRunner().invoke(app, kind.command(path, tmp_path))
    output = result.output
    # An exception the CLI did not turn into a message reaches CliRunner (the installed command prints it
    # as "internal error").
    unexpected = result.exception if not isinstance(result.exception, SystemExit) else None
    assert unexpected is None, f"{type(unexpected).__name__}: {unexpected}"
    assert "internal error" not in output and "Traceback" not in output, output
    assert result.exit_code in kind.exits, output
    if result.exit_code in kind.names_file:
        assert path.name in output or str(path.parent) in output, f"the error does not name the file: {output}"


def test_the_mutations_damage_every_kind():
    """Each kind's content is not empty and the mutations change it (a lane that damaged nothing would pass)."""
    for kind in KINDS:
        data = kind.content()
        assert data
        changed = sum(mutate(data, random.Random(seed)) != data for seed in range(20))
        assert changed >= 18, kind.name
