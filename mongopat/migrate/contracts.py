"""The contracts between the migration engine's parts, written as types.

- :class:`StepRun`: one step of one migration as a run meets it (which migration, which step, the step,
  its changelog record): the one value every backend's kind runner receives.
- :class:`StepState` and :class:`ChangelogEntry`: the changelog's records, which every backend writes
  with the same keys and the commands print.
- :class:`ChangelogStore`, :class:`MigrationLock` and :class:`StepKind`: what a backend provides (its
  changelog, its lock, a runner per kind of step); a backend may offer more (a server's changelog takes a
  batch's checkpoint in one update). The document store a document step's batches write
  through is :class:`mongopat.migrate.document_batches.DocumentStore`.
- :class:`AppliedResult` and :class:`StatusRow`: what ``up`` and ``status`` return, for the printers.

This module imports nothing of a backend: a new backend implements these and nothing else.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from mongopat.migrate.operations.base import Step
from mongopat.migrate.transform_api import Context, Document

if TYPE_CHECKING:
    from mongopat.migrate.runner import StepOutcome


class BucketRange(TypedDict):
    """The range a bucket step inside the server has open (``server/bucket_in_server.py``: readings by time;
    ``unbucket_in_server.py``: buckets by start): ``[low, high)`` (None: unbounded) and the phase it began
    last."""

    low: Any
    high: Any
    phase: str  # stash, staged, published


class Stretch(TypedDict):
    """A stretch of ``_id`` one shard's chunks hold, ``[low, high)`` (None: unbounded), which the in-server
    pass takes in a thread of that shard's (``server/stretches.py``), with its own checkpoint and
    open range."""

    low: Any
    high: Any
    shard: str
    last_id: Any  # the checkpoint: the end of the stretch's last range done
    has_last: bool
    stashed_to: Any  # the end of its range whose documents may still hold their originals
    done: bool


class StepState(TypedDict, total=False):
    """The changelog's record of one step of a migration (``initial_steps`` writes the first keys)."""

    index: int
    step: str
    collection: str
    state: str  # pending, running, applied, failed
    phase: str | None  # a collection or bucket step's phase, where it has several
    last_id: Any  # the checkpoint: the last _id of the last batch done
    has_last: bool
    read: int
    written: int
    stats: dict[str, Any]
    count_before: int
    ranges: list[dict[str, Any]]  # parallel workers: each _id range's own checkpoint
    in_server: bool | None  # computed by the server (server/in_server_steps.py), decided once
    client_side: str | None  # why not
    stashed_to: Any  # in the server: the end of the range whose documents may still hold their originals
    stretches: list[Stretch]  # in the server: a sharded collection's stretches, one shard's thread each
    prepared: dict[str, list[str]]  # collections the step creates that existed empty: their indexes then
    merge_on: dict[str, list[str]]  # in the server: a sharded side collection's $merge "on" (server/sharding.py)
    bucket_range: BucketRange | None  # in the server: the bucket step's open range
    unbucket_range: BucketRange | None  # in the server: the open range of the bucket step's down
    first_pass_done: bool  # in the server: the bucket step's pass is over (the client side catches up)


class ChangelogEntry(TypedDict, total=False):
    """The changelog's record of one migration."""

    _id: str
    checksum: str
    description: str
    state: str  # running, applied, failed, rolled_back
    steps: list[StepState]
    read: int
    written: int
    started_at: datetime.datetime
    finished_at: datetime.datetime | None
    duration_s: float
    error: str | None
    host: str
    mongopat_version: str
    text: str  # the file as applied ('migrate repair' compares it)
    spec: Any
    stamped: bool
    forced: bool
    measured: dict[str, Any]
    measured_before: dict[str, Any]
    repaired_from: str
    repaired_at: datetime.datetime


@dataclass(frozen=True)
class StepRun:
    """Step ``index`` of migration ``migration_id``, as the run meets it: ``state`` is its changelog record
    when the run of the step began (empty where a question needs none: a count, a dry run)."""

    migration_id: str
    index: int
    step: Step
    state: StepState = field(default_factory=lambda: StepState())

    @property
    def collection(self) -> str:
        return self.step.collection

    def with_state(self, state: StepState) -> StepRun:
        return replace(self, state=state)


class ChangelogStore(Protocol):
    """Where a backend records what ran: a collection of the database, or a file of the dump folder."""

    def all(self) -> dict[str, ChangelogEntry]: ...

    def get(self, migration_id: str) -> ChangelogEntry | None: ...

    def start(self, migration_id: str, checksum: str, description: str, steps: list[StepState]) -> None: ...

    def step(self, migration_id: str, index: int, **fields: Any) -> None: ...

    def add_counts(self, migration_id: str, read: int, written: int) -> None: ...

    def finish(
        self, migration_id: str, state: str, started: float, error: str | None = None, **fields: Any
    ) -> None: ...

    def set(self, migration_id: str, **fields: Any) -> None: ...

    def remove(self, migration_id: str) -> None: ...


class MigrationLock(Protocol):
    """One run at a time: a lease that a run renews after each batch."""

    held: bool
    lease: datetime.timedelta

    def acquire(self, timeout: float = 30.0, poll: float = 0.5) -> None: ...

    def renew(self) -> None: ...

    def release(self) -> None: ...

    def inspect(self) -> dict[str, Any]: ...

    def release_held_by(self, seen: dict[str, Any]) -> bool: ...


class StepKind(Protocol):
    """How a backend runs one kind of step (document, regroup, collection)."""

    def run(self, run: StepRun) -> StepOutcome | None: ...

    def revert(self, run: StepRun) -> None: ...

    def verify(self, run: StepRun) -> list[str]: ...

    def old_shape(self, run: StepRun) -> int | None: ...

    def sample_context(self, step: Step, samples: list[Document]) -> Context | None: ...

    def would(self, run: StepRun) -> list[str] | None: ...


class AppliedResult(TypedDict, total=False):
    """One migration ``up`` applied (or caught up, or would run with ``--dry-run``)."""

    id: str
    state: str  # applied, caught-up, dry-run
    read: int | None
    written: int | None
    duration_s: float | None
    notes: list[str]
    steps: list[dict[str, Any]]  # dry run: each step's examples
    caught_up: int


class StatusRow(TypedDict):
    """One migration as ``status`` lists it."""

    id: str
    description: str
    state: str  # pending, running, applied, failed, missing-file
    edited: bool
    applied_at: datetime.datetime | None
    read: int | None
    written: int | None
    duration_s: float | None
    error: str | None
    pending_documents: int
