"""Writes to a dump folder that cannot finish: a folder that refuses writes, a collection file that
disappears, a rename interrupted by the disk. Each leaves the folder as it was or resumable, with a clear
message (exit 2 for the disk, 1 for a migration that cannot run; never an internal error), and ``migrate up`` then gives the result of an
undisturbed run.

The tests run as root in CI, where permissions do not stop writes: the refusals are the ``OSError``s a
read-only or full file system raises, injected at the calls that write.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mongopat.cli import app
from tests.support.dumps import files, make_dump
from tests.support.migrations import STEPS, write

runner = CliRunner()


def every_file(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def up(data: Path, migrations: Path) -> object:
    return runner.invoke(app, ["migrate", "up", "--dump", str(data), "--dir", str(migrations), "--yes", "-q"])


def undisturbed(tmp_path: Path, *steps: dict) -> dict[str, bytes]:
    data = make_dump(tmp_path / "reference")
    migrations = write(tmp_path / "reference_migrations", "0001_m", *steps)
    assert up(data, migrations).exit_code == 0
    return files(data)


def refuse_writes_under(monkeypatch: pytest.MonkeyPatch, folder: Path, code: int, after: int = 0) -> dict:
    """``open`` for writing and ``rename``/``replace``/``link`` of paths in ``folder`` raise ``OSError(code)``
    once ``after`` of them went through."""
    calls = {"n": 0}
    real_open, real_replace, real_rename, real_link = Path.open, os.replace, os.rename, os.link

    def refused(path: object) -> bool:
        if not str(path).startswith(str(folder)):
            return False
        calls["n"] += 1
        return calls["n"] > after

    def fail(path: object) -> OSError:
        return OSError(code, os.strerror(code), str(path))

    def open_(self: Path, mode: str = "r", *args: object, **kwargs: object) -> object:
        if any(flag in mode for flag in "wax+") and refused(self):
            raise fail(self)
        return real_open(self, mode, *args, **kwargs)

    def moving(real: object) -> object:
        def move(source: object, target: object, *args: object, **kwargs: object) -> object:
            if refused(target):
                raise fail(target)
            return real(source, target, *args, **kwargs)  # type: ignore[operator]

        return move

    monkeypatch.setattr(Path, "open", open_)
    monkeypatch.setattr(os, "replace", moving(real_replace))
    monkeypatch.setattr(os, "rename", moving(real_rename))
    monkeypatch.setattr(os, "link", moving(real_link))
    return calls


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES, errno.ENOSPC], ids=["read-only", "no-permission", "full"])
def test_a_folder_that_refuses_every_write_is_left_as_it_was(tmp_path, monkeypatch, code):
    data = make_dump(tmp_path)
    migrations = write(tmp_path / "migrations", "0001_m", STEPS["computed"])
    before = every_file(data)
    with monkeypatch.context() as patch:
        refuse_writes_under(patch, data, code)
        result = up(data, migrations)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: ") and str(data) in result.output, result.output
    assert os.strerror(code) in result.output
    assert every_file(data) == before


@pytest.mark.parametrize("after", [1, 3, 6, 9, 12, 20])
def test_writes_refused_part_way_leave_a_folder_that_up_resumes(tmp_path, monkeypatch, after):
    """The disk fills up after some writes (the lock, the changelog, a staged file, a rename): a clear
    error, then, once there is room again, ``up`` gives the undisturbed result."""
    steps = (STEPS["computed"], STEPS["subset"])
    expected = undisturbed(tmp_path, *steps)
    data = make_dump(tmp_path / "run")
    migrations = write(tmp_path / "migrations", "0001_m", *steps)
    with monkeypatch.context() as patch:
        calls = refuse_writes_under(patch, data, errno.ENOSPC, after=after)
        result = up(data, migrations)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    if calls["n"] <= after:
        pytest.skip(f"the run made only {calls['n']} writes")
    assert result.exit_code in (1, 2), result.output
    assert "error" in result.output and "internal error" not in result.output, result.output
    _take_over_stale_lock(data)
    resumed = up(data, migrations)
    assert resumed.exit_code == 0, resumed.output
    assert files(data) == expected


def _take_over_stale_lock(data: Path) -> None:
    """A run stopped by the disk may not have been able to remove its lock: it expires after its lease (60 s);
    the tests remove it instead of waiting."""
    lock = data / "mongopat_lock.json"
    if lock.exists():
        lock.unlink()


def test_a_collection_file_that_disappears_gets_a_clear_error_and_nothing_else_changes(tmp_path):
    data = make_dump(tmp_path)
    migrations = write(tmp_path / "migrations", "0001_m", STEPS["computed"], STEPS["attribute"])
    (migrations / "0002_more.yaml").write_text((migrations / "0001_m.yaml").read_text().replace("0001_m", "0002_more"))
    shutil.move(data / "orders.json", tmp_path / "orders.json")  # gone between plan and up
    before = every_file(data)
    result = up(data, migrations)
    assert result.exit_code == 2, result.output  # the migration names a collection the data lacks: input
    assert "collection 'orders' not found" in result.output and str(data) in result.output, result.output
    assert {k: v for k, v in every_file(data).items() if not k.startswith("mongopat_")} == {
        k: v for k, v in before.items() if not k.startswith("mongopat_")
    }
