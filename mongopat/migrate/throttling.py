"""Throttling and retries on a live deployment: transient faults, a rate limit, replication lag.

- :func:`is_transient`: errors a replica set produces in normal operation (elections, step-downs,
  network blips, a cursor killed on a long scan, write conflicts) that a retry from the last checkpoint
  fixes; everything else (auth, validation, duplicate keys) is permanent and stops the run.
- :class:`Throttle`: holds a step to ``--max-docs-per-sec`` by sleeping between batches.
- :class:`LagGuard`: pauses while a secondary lags the primary by more than ``--max-lag`` seconds
  (from ``replSetGetStatus``; skipped, with a note, when not permitted or not a replica set).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

# Server error codes that mean "try again": write conflict, cursor not found, step-downs and shutdowns.
TRANSIENT_CODES = {112, 43, 189, 91, 10107, 13435, 13436, 11600, 11602, 6, 7, 89, 9001, 262}
TRANSIENT_LABELS = ("TransientTransactionError", "RetryableWriteError")


def is_transient(error: BaseException) -> bool:
    # pymongo is imported here, not at the top: runs on a dump folder use this module without a driver.
    from pymongo.errors import AutoReconnect, BulkWriteError, CursorNotFound, NetworkTimeout, OperationFailure

    if isinstance(error, (AutoReconnect, NetworkTimeout, CursorNotFound)):
        return True
    if isinstance(error, BulkWriteError):
        codes = {e.get("code") for e in (error.details or {}).get("writeErrors", [])}
        return bool(codes) and codes <= TRANSIENT_CODES
    if isinstance(error, OperationFailure):
        if error.code in TRANSIENT_CODES:
            return True
        return any(error.has_error_label(label) for label in TRANSIENT_LABELS)
    return False


def backoff(attempt: int, base: float = 0.2, ceiling: float = 10.0) -> float:
    """Seconds to wait before retry ``attempt`` (1, 2, ...): doubling, capped."""
    return min(ceiling, base * 2 ** (attempt - 1))


class Throttle:
    """Keeps documents per second at or under ``rate`` over a step, sleeping after batches as needed."""

    def __init__(
        self,
        rate: float | None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rate = rate
        self.clock = clock
        self.sleep = sleep
        self.started: float | None = None
        self.base = 0

    def start(self, done: int = 0) -> None:
        """A step (re)starts with ``done`` documents already behind it (resumed work is not counted)."""
        self.started = self.clock()
        self.base = done

    def after(self, done: int) -> float:
        """Called after a batch; sleeps so that the documents of this run so far took at least their share."""
        if not self.rate or self.started is None:
            return 0.0
        due = (done - self.base) / self.rate
        wait = due - (self.clock() - self.started)
        if wait > 0:
            self.sleep(wait)
            return wait
        return 0.0


def replication_lag(admin: Any) -> float | None:
    """The largest lag of a secondary behind the primary, in seconds (None: not a replica set here)."""
    status = admin.command("replSetGetStatus")
    members = status.get("members", [])
    primary = next((m for m in members if m.get("stateStr") == "PRIMARY"), None)
    if primary is None or primary.get("optimeDate") is None:
        return None
    lags = [
        (primary["optimeDate"] - m["optimeDate"]).total_seconds()
        for m in members
        if m.get("stateStr") == "SECONDARY" and m.get("optimeDate") is not None
    ]
    return max(lags, default=0.0)


class LagGuard:
    """Waits while replication lag exceeds ``max_lag`` seconds, checking every ``interval`` seconds."""

    def __init__(self, admin: Any, max_lag: float | None, interval: float = 1.0, limit: float = 600.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:  # fmt: skip
        self.admin = admin
        self.max_lag = max_lag
        self.interval = interval
        self.limit = limit
        self.sleep = sleep
        self.note: str | None = None
        self.paused = 0.0
        self.enabled = max_lag is not None

    def wait(self) -> float:
        """Seconds spent waiting for the secondaries (0 when the lag is fine or cannot be read)."""
        if not self.enabled:
            return 0.0
        from pymongo.errors import OperationFailure, PyMongoError  # only runs on a server get here

        waited = 0.0
        while True:
            try:
                lag = replication_lag(self.admin)
            except (PyMongoError, NotImplementedError, TypeError, AttributeError) as exc:
                self.enabled = False
                reason = (
                    "not permitted (needs clusterMonitor)"
                    if isinstance(exc, OperationFailure) and exc.code == 13
                    else str(exc)[:120]
                )
                self.note = f"replication lag not watched: replSetGetStatus {reason}"
                return waited
            if lag is None or lag <= self.max_lag or waited >= self.limit:  # type: ignore[operator]
                self.paused += waited
                return waited
            self.sleep(self.interval)
            waited += self.interval
