"""A document step on a large dump-folder file runs on several processes (``DocumentFiles._rewrite_in_parts``):
each takes a part of the file, and the workers' files are appended to the step's in file order. Whatever the
step and the file's format, the files and figures must be those of one process, byte for byte."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import bson
import pytest
from bson import json_util

from mongopat.errors import InputError
from mongopat.migrate.dump_folder import document_steps, file_parts
from mongopat.migrate.dump_folder.rewrites import StepFiles
from mongopat.migrate.dump_folder.runner import DumpRunner
from mongopat.migrate.runner import RunOptions
from mongopat.migrate.script import load_folder
from mongopat.sources.extjson import encode_document
from tests.support.migrations import write
from tests.support.step_cases import CASES, CUSTOMERS, DOCUMENTS


@pytest.fixture
def parts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every file is large enough for workers; the parts each run was cut into are recorded."""
    monkeypatch.setattr(document_steps, "MIN_PARALLEL_BYTES", 0)
    seen: list[int] = []
    real = document_steps.run_parallel

    def spy(tasks: list[Any]) -> list[Any]:
        seen.append(len(tasks))
        return real(tasks)

    monkeypatch.setattr(document_steps, "run_parallel", spy)
    return seen


def _body(suffix: str, documents: list[dict[str, Any]] = DOCUMENTS) -> bytes:
    if suffix == ".bson":
        return b"".join(bson.encode(document) for document in documents)
    return b"".join(encode_document(document) + b"\n" for document in documents)


def _run(folder: Path, suffix: str, body: bytes, spec: dict[str, Any], workers: int) -> tuple[dict[str, bytes], Any]:
    data = folder / "data"
    data.mkdir(parents=True)
    (data / f"orders{suffix}").write_bytes(body)
    (data / "customers.json").write_bytes(CUSTOMERS)
    migrations = write(folder / "m", "0001_step", {"collection": "orders", **spec})
    DumpRunner(data, load_folder(migrations), RunOptions(batch_size=50, lock_timeout=0.3, workers=workers)).up()
    entry = json_util.loads((data / "mongopat_changelog.json").read_text().splitlines()[0])
    assert entry["state"] == "applied", entry.get("error")
    written = {path.name: path.read_bytes() for path in sorted(data.glob(f"orders*{suffix}"))}
    return written, (entry["read"], entry["written"], entry["steps"][0]["stats"])


@pytest.mark.parametrize("suffix", [".json", ".bson"])
@pytest.mark.parametrize(("case", "spec"), CASES, ids=[case for case, _ in CASES])
def test_workers_write_the_files_one_process_writes(tmp_path, parts, case, spec, suffix):
    body = _body(suffix)
    one = _run(tmp_path / "one", suffix, body, spec, 1)
    three = _run(tmp_path / "three", suffix, body, spec, 3)
    assert parts == [3]  # the second run was cut into three parts; the first ran on one process
    assert one[0][f"orders{suffix}"] != body  # the step changed documents: not a comparison of two copies
    assert three == one


def test_a_malformed_line_in_a_workers_part_is_named(tmp_path, parts):
    lines = [encode_document(document) for document in DOCUMENTS]
    lines[289] = b'{"_id": 2, "status": }'
    body = b"".join(line + b"\n" for line in lines)
    with pytest.raises(InputError, match=r"orders\.json:290: not a valid Extended JSON document"):
        _run(tmp_path, ".json", body, CASES[0][1], 3)
    assert parts == [3]
    assert not list((tmp_path / "data").glob(".mongopat-spill-*"))  # the workers' files went with the run


def test_a_small_file_stays_on_one_process(tmp_path, monkeypatch):
    seen: list[int] = []
    monkeypatch.setattr(document_steps, "run_parallel", lambda tasks: seen.append(len(tasks)))
    _run(tmp_path, ".json", _body(".json"), CASES[0][1], 3)
    assert seen == []  # 300 documents are far below MIN_PARALLEL_BYTES


@pytest.mark.parametrize("suffix", [".json", ".bson"])
def test_a_measure_added_up_over_parts_is_the_whole_files(tmp_path, monkeypatch, suffix):
    """Verification reads a large file in parts at the same time (``StepFiles.total``): the sum is the one
    read whole, and every document is measured once."""
    monkeypatch.setattr(file_parts, "MIN_PARALLEL_BYTES", 0)
    seen: list[int] = []
    real = file_parts.run_parallel
    monkeypatch.setattr(file_parts, "run_parallel", lambda tasks: seen.append(len(tasks)) or real(tasks))
    (tmp_path / f"orders{suffix}").write_bytes(_body(suffix))

    def items(document: dict[str, Any]) -> int:
        return len(document["items"]) if isinstance(document.get("items"), list) else 0

    expected = sum(map(items, DOCUMENTS))
    assert expected > 0

    def files(workers: int) -> StepFiles:
        return StepFiles(lambda name: tmp_path / f"{name}{suffix}", workers)

    assert files(1).total("orders", items) == expected
    assert files(3).total("orders", items) == expected
    assert seen == [1, 3]
    assert files(3).total("absent", items) == 0  # a collection without a file holds nothing


def test_outlier_verification_in_parts_finds_an_element_lost(tmp_path, parts, monkeypatch):
    """The outlier step's check (every element kept or moved) on files read in parts, before and after an
    element goes missing from the last page of the overflow file."""
    monkeypatch.setattr(file_parts, "MIN_PARALLEL_BYTES", 0)
    spec = dict(CASES)["outlier"]
    _run(tmp_path, ".json", _body(".json"), spec, 3)
    data = tmp_path / "data"
    migrations = load_folder(tmp_path / "m")

    def verify() -> list[str]:
        return DumpRunner(data, migrations, RunOptions(workers=3)).verify()["0001_step"]

    assert verify() == []
    overflow = data / f"{spec['overflow_collection']}.json"
    lines = overflow.read_bytes().splitlines(keepends=True)
    page = json_util.loads(lines[-1])
    page["items"] = page["items"][1:]
    lines[-1] = json_util.dumps(page).encode() + b"\n"
    overflow.write_bytes(b"".join(lines))
    [problem] = verify()
    assert "kept +" in problem and "moved, expected" in problem


def test_files_counted_at_once_have_the_counts_of_files_counted_alone(tmp_path, monkeypatch):
    """Verification counts the original and every file a step wrote at the same time
    (``StepFiles.count_at_once``): the large ones spread over the workers, the small ones in this process."""
    from mongopat.migrate.dump_folder import rewrites
    from mongopat.migrate.dump_folder.files import count_records

    monkeypatch.setattr(rewrites, "MIN_PARALLEL_BYTES", 2000)
    groups: list[int] = []
    real = rewrites.run_parallel
    monkeypatch.setattr(rewrites, "run_parallel", lambda tasks: groups.append(len(tasks)) or real(tasks))
    bodies = {
        "a.json": _body(".json"),
        "b.bson": _body(".bson"),
        "c.json": _body(".json", DOCUMENTS[:200]) + b"\n  \n",  # a blank line is not a document
        "small.json": _body(".json", DOCUMENTS[:3]),
    }
    for name, body in bodies.items():
        (tmp_path / name).write_bytes(body)
    paths = [tmp_path / name for name in bodies] + [tmp_path / "absent.json"]
    for workers in (1, 3):
        files = StepFiles(lambda name: tmp_path / name, workers)
        files.count_at_once(paths)
        assert [files.count_file(path) for path in paths] == [*(count_records(p) for p in paths[:-1]), 0]
    assert [files.count_file(path) for path in paths] == [300, 300, 200, 3, 0]
    assert groups == [1, 3]  # one process, then the three large files each in its own
