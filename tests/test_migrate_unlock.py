"""``mongopat migrate unlock``: who holds the migration lock, and releasing it safely, on both backends."""

from __future__ import annotations

import datetime
import json
import os

import pytest
from typer.testing import CliRunner

from mongopat.migrate.bookkeeping import LOCK, Lock, host_name, utcnow
from mongopat.migrate.dump_folder.files import FileLock

runner = CliRunner()


def unlock(args: list[str], *extra: str) -> tuple[int, dict]:
    from mongopat.cli import app

    result = runner.invoke(app, ["migrate", "unlock", *args, *extra, "-f", "json"])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, (json.loads(result.stdout) if result.stdout.strip().startswith("{") else {})


def age(lock: Lock | FileLock, seconds: float) -> None:
    """Move the lease's end into the past, as the passing of ``seconds`` after a run died would."""
    current = lock.current()
    ended = utcnow() - datetime.timedelta(seconds=seconds)
    if isinstance(lock, Lock):
        lock.collection.update_one({"_id": current["_id"]}, {"$set": {"expires_at": ended}})
    else:
        from bson import json_util

        lock.path.write_text(json_util.dumps({**current, "expires_at": ended}))


def test_a_free_lock(target):
    args = target.args
    code, result = unlock(args)
    assert code == 0 and result == {"unlock_version": 1, "state": "free", "released": False}


def test_a_live_lease_is_shown_and_kept_without_force(target):
    args, make = target.args, target.lock
    held = make()
    held.acquire(1)
    code, result = unlock(args)
    assert code == 1 and result["state"] == "live" and not result["released"]
    assert result["holder"] == held.holder and result["host"] == host_name()
    assert result["pid"] == os.getpid() and "--force" in result["refused"]
    held.renew()  # still held by its run


def test_an_expired_lease_is_released_and_a_run_can_start(target):
    args, make = target.args, target.lock
    dead = make()
    dead.acquire(1)
    age(dead, 5)
    code, result = unlock(args)
    assert code == 0 and result["state"] == "expired" and result["released"]
    assert make().inspect() == {"state": "free"}
    fresh = make()
    fresh.acquire(0.1)
    fresh.release()


def test_force_releases_a_live_lease_and_its_run_stops_at_its_next_renewal(target):
    from mongopat.migrate.bookkeeping import LockLost

    args, make = target.args, target.lock
    held = make()
    held.acquire(1)
    code, result = unlock(args, "--force", "--yes")
    assert code == 0 and result["released"]
    with pytest.raises(LockLost):
        held.renew()


def test_force_without_yes_and_no_terminal_refuses(target):
    args, make = target.args, target.lock
    held = make()
    held.acquire(1)
    from mongopat.cli import app

    result = runner.invoke(app, ["migrate", "unlock", *args, "--force"])
    assert result.exit_code == 2 and "--yes" in result.output
    held.renew()


def test_a_lease_renewed_after_it_was_read_is_not_released(target):
    """unlock removes only the lease it showed: one renewed (or taken over) meanwhile stays."""
    make = target.lock
    dead = make()
    dead.acquire(1)
    age(dead, 5)
    seen = make().inspect()
    dead.renew()  # the run was only paused: it renewed its lease
    assert not make().release_held_by(seen)
    assert make().inspect()["state"] == "live"


def test_the_lock_document_on_a_server_names_its_process(mongo):
    lock = Lock(mongo.db)
    lock.acquire(1)
    stored = mongo.db[LOCK].find_one()
    assert stored["pid"] == os.getpid() and stored["holder"] == lock.holder
    lock.release()
