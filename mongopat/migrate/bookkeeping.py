"""mongopat's own collections on the target database: the changelog, the lock, and the backups kept for
rollback. All of them are named ``mongopat_*`` and nothing else is written outside the migrated data."""

from __future__ import annotations

import datetime
import os
import socket
import time
import uuid
from typing import Any, cast

from mongopat import __version__
from mongopat.errors import OperationFailed
from mongopat.migrate.contracts import ChangelogEntry, StepState

CHANGELOG = "mongopat_changelog"
LOCK = "mongopat_lock"
BACKUP = "mongopat_backup"
LOCK_ID = "migrate"


def utcnow() -> datetime.datetime:
    # Naive UTC, as pymongo returns dates by default; millisecond precision, as BSON stores them.
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def host_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def stage_name(migration_id: str, step: int) -> str:
    return f"mongopat_stage__{migration_id}__{step}"


def original_name(migration_id: str, step: int) -> str:
    return f"mongopat_orig__{migration_id}__{step}"


class LockLost(OperationFailed):
    """This run's lease expired and another run holds the lock now: it stops without writing anything more,
    not even its own failure (the changelog is the other run's)."""


class LeaseLock:
    """A lock held by lease: renewed while running, taken over only once expired. Subclasses store the
    lease (a document, a file) and implement ``_try`` (take it if free or expired) and ``current``."""

    def __init__(self, lease_seconds: float = 60.0) -> None:
        self.lease = datetime.timedelta(seconds=lease_seconds)
        self.holder = f"{host_name()}:{uuid.uuid4().hex[:8]}"
        self.held = False

    def _try(self) -> bool:
        raise NotImplementedError

    def current(self) -> dict[str, Any] | None:
        raise NotImplementedError

    def _remove(self, holder: str, expires_at: Any) -> bool:
        """Remove the lock if it is still ``holder``'s lease ending at ``expires_at``; whether it was."""
        raise NotImplementedError

    def inspect(self) -> dict[str, Any]:
        """Who holds the lock: ``state`` free, live or expired, with holder, host, pid, since and until."""
        current = self.current()
        if not current:
            return {"state": "free"}
        expires = current.get("expires_at")
        state = "live" if isinstance(expires, datetime.datetime) and expires >= utcnow() else "expired"
        fields = ("holder", "host", "pid", "acquired_at", "expires_at")
        return {"state": state, **{name: current.get(name) for name in fields}}

    def release_held_by(self, seen: dict[str, Any]) -> bool:
        """Release the lease ``seen`` (from :meth:`inspect`), only if nobody renewed or took it since."""
        return seen.get("state") != "free" and self._remove(seen["holder"], seen["expires_at"])

    def acquire(self, timeout: float = 30.0, poll: float = 0.5) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self._try():
                self.held = True
                return
            if time.monotonic() >= deadline:
                current = self.current() or {}
                raise OperationFailed(
                    f"another migration run holds the lock: {current.get('host', '?')} since "
                    f"{current.get('acquired_at')} (lease until {current.get('expires_at')})",
                    hint="wait for it to finish; a killed run's lock is taken over once its lease expires",
                )
            time.sleep(poll)


class Lock(LeaseLock):
    """The lease as the ``mongopat_lock`` document of the target database."""

    def __init__(self, db: Any, lease_seconds: float = 60.0) -> None:
        super().__init__(lease_seconds)
        self.collection = db[LOCK]

    def current(self) -> dict[str, Any] | None:
        return self.collection.find_one({"_id": LOCK_ID})

    def _try(self) -> bool:
        from pymongo.errors import DuplicateKeyError  # not at the top: dump-folder runs never load pymongo

        now = utcnow()
        try:
            self.collection.update_one(
                {"_id": LOCK_ID, "$or": [{"expires_at": {"$lt": now}}, {"holder": self.holder}]},
                {
                    "$set": {
                        "holder": self.holder,
                        "host": host_name(),
                        "pid": os.getpid(),
                        "acquired_at": now,
                        "expires_at": now + self.lease,
                    }
                },
                upsert=True,
            )
        except DuplicateKeyError:
            return False  # the document exists and is held, unexpired, by someone else
        current = self.current()
        return bool(current and current.get("holder") == self.holder)

    def renew(self) -> None:
        result = self.collection.update_one(
            {"_id": LOCK_ID, "holder": self.holder}, {"$set": {"expires_at": utcnow() + self.lease}}
        )
        if result.matched_count == 0:
            raise LockLost("the migration lock was lost (lease expired and taken over); stopping")

    def release(self) -> None:
        if self.held:
            self.collection.delete_one({"_id": LOCK_ID, "holder": self.holder})
            self.held = False

    def _remove(self, holder: str, expires_at: Any) -> bool:
        found = {"_id": LOCK_ID, "holder": holder, "expires_at": expires_at}
        return self.collection.delete_one(found).deleted_count == 1


def new_entry(migration_id: str, checksum: str, description: str, steps: list[StepState]) -> ChangelogEntry:
    """A migration's changelog record as it starts (every backend stores the same fields)."""
    return {
        "_id": migration_id,
        "checksum": checksum,
        "description": description,
        "state": "running",
        "started_at": utcnow(),
        "finished_at": None,
        "read": 0,
        "written": 0,
        "duration_s": 0.0,
        "mongopat_version": __version__,
        "host": host_name(),
        "error": None,
        "steps": steps,
    }


class Changelog:
    """One document per migration in ``mongopat_changelog``: state, checksum, progress, counts."""

    def __init__(self, db: Any) -> None:
        self.collection = db[CHANGELOG]

    def all(self) -> dict[str, ChangelogEntry]:
        return {entry["_id"]: cast(ChangelogEntry, entry) for entry in self.collection.find()}

    def get(self, migration_id: str) -> ChangelogEntry | None:
        return cast("ChangelogEntry | None", self.collection.find_one({"_id": migration_id}))

    def start(self, migration_id: str, checksum: str, description: str, steps: list[StepState]) -> None:
        entry = self.get(migration_id)
        if entry is None or entry.get("state") == "rolled_back":
            entry = new_entry(migration_id, checksum, description, steps)
            self.collection.replace_one({"_id": migration_id}, entry, upsert=True)
        else:
            self.collection.update_one(
                {"_id": migration_id},
                {"$set": {"state": "running", "error": None, "host": host_name(), "mongopat_version": __version__}},
            )

    def step(self, migration_id: str, index: int, **fields: Any) -> None:
        self.collection.update_one(
            {"_id": migration_id}, {"$set": {f"steps.{index}.{k}": v for k, v in fields.items()}}
        )

    def add_counts(self, migration_id: str, read: int, written: int) -> None:
        self.collection.update_one({"_id": migration_id}, {"$inc": {"read": read, "written": written}})

    def checkpoint(self, migration_id: str, index: int, read_more: int, written_more: int, **fields: Any) -> None:
        """A batch is done: its step's progress and the migration's totals, in one update."""
        self.collection.update_one(
            {"_id": migration_id},
            {
                "$set": {f"steps.{index}.{k}": v for k, v in fields.items()},
                "$inc": {"read": read_more, "written": written_more},
            },
        )

    def finish(self, migration_id: str, state: str, started: float, error: str | None = None, **fields: Any) -> None:
        self.collection.update_one(
            {"_id": migration_id},
            {
                "$set": {"state": state, "finished_at": utcnow(), "error": error, **fields},
                "$inc": {"duration_s": round(time.monotonic() - started, 3)},
            },
        )

    def set(self, migration_id: str, **fields: Any) -> None:
        self.collection.update_one({"_id": migration_id}, {"$set": fields})

    def remove(self, migration_id: str) -> None:
        self.collection.delete_one({"_id": migration_id})
