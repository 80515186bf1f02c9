"""The run every backend shares: the run options, up (resume, verify), down, status, stamp, repair, the
pending list, the order of a rollback.

A backend is a package (``server/``, ``dump_folder/``) whose runner has one :class:`KindRunner` per kind
of step, ``document``, ``regroup`` and ``collection``: the run asks ``kinds[step.type.kind]`` to run,
revert, verify, count or preview a step, and nothing else here or in a backend asks which step it holds
(a step's own module says what it does). Neither this module nor the dump folder's runner loads pymongo,
so runs on a dump folder start quickly.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from mongopat.errors import InputError, OperationFailed
from mongopat.migrate.bookkeeping import LockLost, utcnow
from mongopat.migrate.contracts import (
    AppliedResult,
    ChangelogEntry,
    ChangelogStore,
    MigrationLock,
    StatusRow,
    StepKind,
    StepRun,
    StepState,
)
from mongopat.migrate.script import Migration
from mongopat.migrate.steps import Step
from mongopat.migrate.transform_api import Context, Document
from mongopat.predictions import Difference, Figures, differences

# Passes over the documents still in the old shape after a step's scan.
CATCH_UP_PASSES = 5


@dataclass
class StepOutcome:
    """What a step did: documents read and written, and its figures (conflicts, caught up, ...)."""

    read: int = 0
    written: int = 0
    stats: dict[str, Any] = field(default_factory=dict)


def count(stats: dict[str, Any], key: str, amount: int = 1) -> None:
    stats[key] = stats.get(key, 0) + amount


def one_line(error: BaseException) -> str:
    """An error in one line: a driver error without the server's full reply or the topology pymongo
    describes after it."""
    return str(error).split(", full error:")[0].split(", Timeout:")[0]


@dataclass
class RunOptions:
    batch_size: int = 1000
    lock_timeout: float = 30.0
    lease_seconds: float = 60.0
    dry_run: bool = False
    # Called after each batch with (migration id, step index, documents done); tests inject faults here.
    on_batch: Callable[[str, int, int], None] | None = None
    # Called after each batch with (migration id, step index, documents done, documents in all or None).
    progress: Callable[[str, int, int, int | None], None] | None = None
    # Production: documents per second at most, replication lag to wait out, retries of transient faults.
    max_docs_per_sec: float | None = None
    max_lag: float | None = None
    # Server: threads over disjoint _id ranges for document steps (None: one). Dump folder: processes
    # bucketing one large JSON file (None: one per CPU, at most 4).
    workers: int | None = None
    # Server: take every document step on the client side, even one the server could compute itself
    # (server/in_server_steps.py).
    client_side: bool = False
    write_concern: str = "majority"
    retries: int = 8
    retry_base: float = 0.2


def refuse_edited(rows: list[StatusRow]) -> None:
    """``up`` runs no migration while one that changed something has its file edited since (the status
    rows' ``edited``): the one check, for the engine and for the command line that asks first."""
    edited = [row["id"] for row in rows if row["edited"]]
    if edited:
        raise OperationFailed(
            f"applied migration(s) changed since they ran: {', '.join(edited)}",
            hint="restore the file as it was, or run 'mongopat migrate down' past it before editing",
        )


def _never_wrote(entry: ChangelogEntry) -> bool:
    """A migration that failed cleanly before any step changed anything: no step applied, written to,
    checkpointed, begun a phase or recorded what it did. Its file may be fixed and run again."""
    return entry.get("state") == "failed" and all(
        step.get("state") in ("pending", "running", "failed")
        and not step.get("written")
        and not step.get("has_last")
        and not step.get("phase")
        and not step.get("stats")
        for step in entry.get("steps") or []
    )


def _untouched(entry: ChangelogEntry) -> bool:
    """No step of the changelog entry has begun: the collections are as they were before the migration."""
    return all(step.get("state") == "pending" for step in entry.get("steps") or [])


def initial_steps(migration: Migration) -> list[StepState]:
    """The changelog's progress record of every step before it runs (every backend uses the same keys)."""
    return [
        {"index": i, "step": s.name, "collection": s.collection, "state": "pending", "phase": None, "last_id": None,
         "has_last": False, "read": 0, "written": 0, "stats": {}}
        for i, s in enumerate(migration.steps)
    ]  # fmt: skip


class KindRunner:
    """How one backend runs one kind of step: its ``up``, ``down``, ``verify``, the count of documents still
    in the old shape, and its part of a dry run. ``state`` is the step's changelog record."""

    def run(self, run: StepRun) -> StepOutcome | None:
        raise NotImplementedError

    def revert(self, run: StepRun) -> None:
        raise NotImplementedError

    def verify(self, run: StepRun) -> list[str]:
        """Problems with what the applied step left."""
        return []

    def old_shape(self, run: StepRun) -> int | None:
        """Documents the step would still migrate, or None for a kind without any (collection steps)."""
        return None

    def sample_context(self, step: Step, samples: list[Document]) -> Context | None:
        """The context a dry run's examples are transformed with, or None for a kind without examples."""
        return None

    def would(self, run: StepRun) -> list[str] | None:
        """What a dry run says the step would do, for a kind without examples; None otherwise."""
        return None


class RunnerBase:
    """What every backend's runner shares: the migrations, the changelog, status and the pending list."""

    migrations: list[Migration]
    changelog: ChangelogStore
    lock: MigrationLock
    options: RunOptions
    kinds: Mapping[str, StepKind]  # document, regroup, collection: set by each backend

    def kind(self, step: Step) -> StepKind:
        return self.kinds[step.type.kind]

    # -- status ----------------------------------------------------------------------------------

    def pending_documents(self) -> dict[str, int]:
        """Per applied migration, documents still in the old shape; backends with concurrent writers
        override it (nothing writes a dump folder behind mongopat's back)."""
        return {}

    def status(self) -> list[StatusRow]:
        entries = self.changelog.all()
        pending_documents = self.pending_documents()
        rows: list[StatusRow] = []
        for migration in self.migrations:
            entry = entries.pop(migration.id, None)
            state = entry["state"] if entry else "pending"
            if entry and state == "rolled_back":
                state = "pending"
            edited = bool(
                entry
                and state in ("applied", "running", "failed")
                and entry.get("checksum") != migration.checksum
                and not _never_wrote(entry)
            )
            rows.append(
                {
                    "id": migration.id,
                    "description": migration.description,
                    "state": state,
                    "edited": edited,
                    "applied_at": entry.get("finished_at") if entry and state == "applied" else None,
                    "read": entry.get("read") if entry else None,
                    "written": entry.get("written") if entry else None,
                    "duration_s": entry.get("duration_s") if entry else None,
                    "error": entry.get("error") if entry else None,
                    "pending_documents": pending_documents.get(migration.id, 0),
                }
            )
        for migration_id, entry in sorted(entries.items()):
            if entry.get("state") != "rolled_back":
                rows.append(
                    {
                        "id": migration_id,
                        "description": entry.get("description", ""),
                        "state": "missing-file",
                        "edited": False,
                        "applied_at": entry.get("finished_at"),
                        "read": entry.get("read"),
                        "written": entry.get("written"),
                        "duration_s": entry.get("duration_s"),
                        "error": None,
                        "pending_documents": 0,
                    }
                )
        return rows

    # -- stamp -----------------------------------------------------------------------------------

    def count_old_shape(self, run: StepRun) -> int | None:
        """Documents step ``index`` would still migrate (its pending filter), or None for a step that has
        none (indexes, collection operations)."""
        return self.kind(run.step).old_shape(run)

    def forget(self, migration_id: str) -> int:
        """Drop a migration's changelog record and what mongopat kept for its ``down`` (backups, kept
        originals); the collections themselves are not touched. Returns the backups removed."""
        raise NotImplementedError

    def stamp(self, to: str, force: bool = False) -> dict[str, Any]:
        """Record the migrations up to and including ``to`` as applied without running them, for data that
        is in that shape already. Refused (nothing recorded) while a step still finds documents in the
        old shape, unless ``force``. ``to="base"``: forget every migration recorded."""
        self.lock.acquire(self.options.lock_timeout)
        try:
            if to == "base":
                forgotten = list(self.changelog.all())
                removed = sum(self.forget(mid) for mid in forgotten)
                return {"stamp_version": 1, "to": "base", "forgotten": forgotten, "backups_removed": removed}
            chosen = self.pending(to)
            checks = []
            for migration in chosen:
                for index, step in enumerate(migration.steps):
                    left = self.count_old_shape(StepRun(migration.id, index, step))
                    checks.append({"id": migration.id, "step": index + 1, "type": step.name,
                                   "collection": step.collection, "old_shape": left})  # fmt: skip
            blocking = [c for c in checks if c["old_shape"]]
            result: dict[str, Any] = {"stamp_version": 1, "to": to, "checks": checks, "stamped": []}
            if blocking and not force:
                result["refused"] = (
                    "documents are still in the old shape: 'migrate up' migrates them (--force records anyway)"
                )
                return result
            for migration in chosen:
                started = time.monotonic()
                self.changelog.start(migration.id, migration.checksum, migration.description, initial_steps(migration))
                for index in range(len(migration.steps)):
                    self.changelog.step(migration.id, index, state="applied", stats={"stamped": True})
                self.changelog.set(migration.id, stamped=True, forced=bool(blocking))
                self.record_applied(migration, started)
                result["stamped"].append(migration.id)
            return result
        finally:
            self.lock.release()

    def record_applied(self, migration: Migration, started: float, **fields: Any) -> None:
        """The migration is applied: its state, and the file as it was (what 'migrate repair' compares)."""
        self.changelog.finish(migration.id, "applied", started, text=migration.text, spec=migration.spec, **fields)

    # -- predictions: what a migration was predicted to do, against what it did --------------------

    def measure_predicted(self, migration: Migration) -> dict[str, Figures]:
        """The figures of every collection the migration's prediction names, as they are now."""
        entries = (migration.prediction or {}).get("collections") or []
        names = [entry["collection"] for entry in entries]
        names += [entry["scaled_by"]["collection"] for entry in entries if entry.get("scaled_by")]
        # A collection the backend does not keep (the buckets of a time-series collection on an engine that
        # keeps none) is not measured rather than measured empty.
        return {name: self.measure(name) for name in dict.fromkeys(names) if self.exists(name)}

    def exists(self, collection: str) -> bool:
        return True

    def measure(self, collection: str) -> Figures:
        """A collection's documents, data bytes and document sizes (see :mod:`mongopat.predictions`)."""
        raise NotImplementedError

    def prediction_differences(self, migration: Migration) -> list[Difference]:
        """How far what ``up`` measured is from the migration's prediction (empty before it is applied)."""
        entry = self.changelog.get(migration.id) or {}
        if not migration.prediction or entry.get("state") != "applied" or not entry.get("measured"):
            return []
        return differences(migration.prediction, entry["measured"], entry.get("measured_before"))

    # -- repair ----------------------------------------------------------------------------------

    def repair(
        self, migration_id: str, force: bool = False, confirm: Callable[[dict[str, Any]], bool] | None = None
    ) -> dict[str, Any]:
        """For an applied migration whose file was edited since: what changed, and the new checksum recorded
        (after ``confirm``). Refused when the steps changed, unless ``force``: the data was migrated by the
        old steps, and recording the new ones says otherwise."""
        import difflib

        migration = next((m for m in self.migrations if m.id == migration_id), None)
        if migration is None:
            raise InputError(f"no migration {migration_id!r} in the folder")
        entry = self.changelog.get(migration_id)
        if not entry or entry.get("state") != "applied":
            state = entry.get("state") if entry else "pending"
            raise InputError(f"{migration_id} is {state}, not applied: only an applied migration is repaired")
        result: dict[str, Any] = {"repair_version": 1, "id": migration_id, "repaired": False}
        if entry.get("checksum") == migration.checksum:
            result.update(changed=False, diff="", steps_changed=False)
            return result
        kept = entry.get("text")
        result["changed"] = True
        result["diff"] = (
            "".join(
                difflib.unified_diff(
                    kept.splitlines(keepends=True),
                    migration.text.splitlines(keepends=True),
                    f"{migration_id} (applied)",
                    f"{migration.path}",
                )
            )
            if kept is not None
            else None
        )
        # Unknown (applied before the changelog kept files) counts as changed: only --force records it.
        result["steps_changed"] = "spec" not in entry or entry.get("spec") != migration.spec
        if result["steps_changed"] and not force:
            result["refused"] = (
                "the steps changed: the data was migrated by the old ones (--force records the new file anyway)"
                if kept is not None
                else "the applied file was not kept (applied by an earlier mongopat): --force records the new one"
            )
            return result
        if confirm is not None and not confirm(result):
            result["refused"] = "not confirmed"
            return result
        self.changelog.set(
            migration_id, checksum=migration.checksum, text=migration.text, spec=migration.spec,
            repaired_from=entry.get("checksum"), repaired_at=utcnow(),
            forced=bool(entry.get("forced") or result["steps_changed"]),
        )  # fmt: skip
        result["repaired"] = True
        return result

    def _refuse_edited(self) -> None:
        refuse_edited(self.status())

    def verify(self, migration_id: str | None = None) -> dict[str, list[str]]:
        """Re-check applied migrations (all, or one): ``{id: [problems]}``."""
        applied = {k for k, v in self.changelog.all().items() if v.get("state") == "applied"}
        chosen = [m for m in self.migrations if m.id in applied and (migration_id is None or m.id == migration_id)]
        if migration_id is not None and not chosen:
            raise InputError(f"{migration_id} is not an applied migration")
        return {m.id: self.verify_migration(m) for m in chosen}

    def verify_migration(self, migration: Migration) -> list[str]:
        return [problem for _index, problems in self.verify_steps(migration) for problem in problems]

    def verify_steps(self, migration: Migration) -> list[tuple[int, list[str]]]:
        """Each step's problems, for the steps that have some."""
        entry = self.changelog.get(migration.id) or {}
        steps = entry.get("steps") or []
        found = []
        for index, step in enumerate(migration.steps):
            state = steps[index] if index < len(steps) else {}
            problems = self.kind(step).verify(StepRun(migration.id, index, step, state))
            if problems:
                found.append((index, problems))
        return found

    def _down_targets(self, to: str | None) -> list[Migration]:
        """What ``down`` reverts: the last applied migration, every one after ``to``, or all (``base``)."""
        entries = self.changelog.all()
        applied = [m for m in self.migrations if entries.get(m.id, {}).get("state") in ("applied", "failed", "running")]
        if to is None:
            return applied[-1:]
        if to == "base":
            return applied
        ids = [m.id for m in self.migrations]
        if to not in ids:
            raise InputError(
                f"no migration {to!r} in the folder", hint="use an id from 'mongopat migrate status', or base"
            )
        return [m for m in applied if ids.index(m.id) > ids.index(to)]

    # -- up (every backend) --------------------------------------------------------------------

    # Errors of a step that fail its migration with a message (``up`` resumes it); any other keeps its
    # traceback. Backends add their own (the driver's, the file system's).
    step_failures: ClassVar[tuple[type[BaseException], ...]] = (OperationFailed, InputError, ValueError)

    def pending(self, to: str | None = None) -> list[Migration]:
        entries = self.changelog.all()
        if to is not None and to not in {m.id for m in self.migrations}:
            raise InputError(f"no migration {to!r} in the folder")
        chosen = []
        for migration in self.migrations:
            entry = entries.get(migration.id)
            if entry and _never_wrote(entry) and entry.get("checksum") != migration.checksum:
                # Fixed since it failed without writing: it starts again from the file as it is now.
                self.changelog.set(
                    migration.id, checksum=migration.checksum, description=migration.description,
                    steps=initial_steps(migration),
                )  # fmt: skip
            if not entry or entry.get("state") != "applied":
                chosen.append(migration)
            if migration.id == to:
                break
        return chosen

    def up(self, to: str | None = None) -> list[AppliedResult]:
        """Apply the pending migrations up to ``to`` in order, resuming an interrupted one, then migrate the
        documents written in the old shape since earlier ones were applied."""
        self._refuse_edited()
        if self.options.dry_run:
            return [self._dry_run(m) for m in self.pending(to)]
        self.lock.acquire(self.options.lock_timeout)
        try:
            self._locked()
            # Read again under the lock: another run may have applied some.
            results = [self._apply(m) for m in self.pending(to)]
            results.extend(self._catch_up_applied(to, {r["id"] for r in results}))
            return results
        finally:
            self.lock.release()

    def _apply(self, migration: Migration) -> AppliedResult:
        """Run a migration's steps not yet applied, each recorded in the changelog, then verify it."""
        self._refuse_unsupported(migration)
        started = time.monotonic()
        self.changelog.start(migration.id, migration.checksum, migration.description, initial_steps(migration))
        if migration.prediction:  # read back only then: a migration without one costs no command more
            entry = self.changelog.get(migration.id) or {}
            if "measured_before" not in entry and _untouched(entry):
                # Before the first step writes: what the prediction's "before" is checked against.
                self.changelog.set(migration.id, measured_before=self.measure_predicted(migration))
        try:
            if migration.python is not None:  # the user's code: it must be safe to run again after a failure
                migration.python.up(self.db)
            for index, step in enumerate(migration.steps):
                if self.step_state(migration.id, index)["state"] == "applied":
                    continue
                self.changelog.step(migration.id, index, state="running")
                outcome = self._run_step_retrying(StepRun(migration.id, index, step))
                figures = {} if outcome is None else {"stats": outcome.stats}
                self.changelog.step(migration.id, index, state="applied", **figures)
            found = self.verify_steps(migration)
            if found:
                for index, _problems in found:
                    if migration.steps[index].type.reruns_when_behind:
                        self.changelog.step(migration.id, index, state="running")
                problems = [problem for _index, step_problems in found for problem in step_problems]
                raise OperationFailed(f"{migration.id}: verification failed: {'; '.join(problems)}")
        except LockLost:
            raise  # the changelog belongs to the run that took the lock over
        except self.step_failures as exc:
            message = one_line(exc)
            self.changelog.finish(migration.id, "failed", started, message)
            if isinstance(exc, InputError):  # the migration file asks for what the data does not have
                nothing = _never_wrote(self.changelog.get(migration.id) or {})
                raise InputError(
                    f"{migration.id} failed: {message}",
                    hint="nothing was written: fix the migration file, then run 'mongopat migrate up' again"
                    if nothing
                    else "earlier steps ran: 'mongopat migrate down' reverts them, then fix the file and run up",
                ) from None
            raise OperationFailed(
                f"{migration.id} failed: {message}", hint="fix the cause, then run 'mongopat migrate up' to resume"
            ) from None
        except BaseException as exc:  # injected faults, interruptions and user code: recorded, traceback kept
            self.changelog.finish(migration.id, "failed", started, f"{type(exc).__name__}: {exc}")
            raise
        measured = {"measured": self.measure_predicted(migration)} if migration.prediction else {}
        self.record_applied(migration, started, **measured)
        final = self.changelog.get(migration.id) or {}
        return {
            "id": migration.id,
            "state": "applied",
            "read": final.get("read"),
            "written": final.get("written"),
            "duration_s": final.get("duration_s"),
            "notes": self._run_notes(final),
        }

    def step_state(self, migration_id: str, index: int) -> StepState:
        entry = self.changelog.get(migration_id) or {}
        if len(entry.get("steps") or []) <= index:
            # Written before the run's first batch: a backend that lost it lost acknowledged writes.
            raise OperationFailed(
                f"{migration_id}: its changelog entry is gone since the run began (a server restarted without "
                "the writes it acknowledged, or a changelog file replaced?)",
                hint="check the deployment's write concern and journal, then run 'mongopat migrate up' again",
            )
        return entry["steps"][index]

    def _run_step_retrying(self, run: StepRun) -> StepOutcome | None:
        """Run one step from its recorded state; backends that meet transient faults retry here."""
        return self._run_step(run.with_state(self.step_state(run.migration_id, run.index)))

    # Backend hooks of ``up``.
    db: Any = None  # what a Python migration's up(db) and down(db) are given

    def _locked(self) -> None:
        """Just after the lock is taken, before anything is read for the run."""

    def _refuse_unsupported(self, migration: Migration) -> None:
        """Raise InputError for a migration this backend cannot run (before anything is recorded)."""

    def _run_step(self, run: StepRun) -> StepOutcome | None:
        return self.kind(run.step).run(run)

    def _dry_run(self, migration: Migration) -> AppliedResult:
        from mongopat.migrate.preview import dry_run_examples

        rows = []
        for index, step in enumerate(migration.steps):
            samples = self._first_documents(step.collection, 3)
            kind = self.kind(step)
            context = kind.sample_context(step, samples) if samples else None
            row = {"step": step.name, "collection": step.collection, "documents": self._count(step.collection),
                   "examples": dry_run_examples(step, samples, context)}  # fmt: skip
            would = kind.would(StepRun(migration.id, index, step))
            if would is not None:
                row.update(examples=[], would=would)
            rows.append(row)
        return {"id": migration.id, "state": "dry-run", "steps": rows}

    def _first_documents(self, collection: str, size: int) -> list[Document]:
        """A collection's first documents (in ``_id`` order on a server, in file order in a dump folder)."""
        raise NotImplementedError

    def _count(self, collection: str) -> int:
        raise NotImplementedError

    def _catch_up_applied(self, to: str | None, just_applied: set[str]) -> list[AppliedResult]:
        """Documents written in the old shape since their migration was applied; nothing writes a dump
        folder behind mongopat's back, so by default there are none."""
        return []

    def _run_notes(self, entry: ChangelogEntry) -> list[str]:
        """What a migration's result says besides its figures (``entry``: its changelog record)."""
        return []

    # -- down (every backend) ------------------------------------------------------------------

    def down_plan(self, to: str | None = None) -> list[dict[str, Any]]:
        """What :meth:`down` would revert, changing nothing: each migration newest first, with the steps
        that ran, in the order they would be reverted."""
        entries = self.changelog.all()
        planned = []
        for migration in reversed(self._down_targets(to)):
            states = (entries.get(migration.id) or {}).get("steps") or []
            steps = [
                {"index": index, "step": step.name, "collection": step.collection}
                for index, step in reversed(list(enumerate(migration.steps)))
                if not (
                    index < len(states) and states[index].get("state") == "pending" and not states[index].get("phase")
                )
            ]
            planned.append({"id": migration.id, "steps": steps})
        return planned

    def down(self, to: str | None = None) -> list[str]:
        """Revert the targets (see :meth:`_down_targets`) newest first, each step in reverse order."""
        targets = self._down_targets(to)
        if not targets:
            return []
        self.lock.acquire(self.options.lock_timeout)
        try:
            reverted = []
            for migration in reversed(targets):
                started = time.monotonic()
                self.changelog.set(migration.id, state="running")
                self._before_revert(migration)
                entry = self.changelog.get(migration.id) or {}
                for index in reversed(range(len(migration.steps))):
                    state = (entry.get("steps") or [])[index] if entry.get("steps") else {}
                    if state.get("state") == "pending" and not state.get("phase"):
                        continue
                    try:
                        self._revert_step(StepRun(migration.id, index, migration.steps[index], state))
                    except LockLost:
                        raise  # the changelog belongs to the run that took the lock over
                    except OperationFailed as exc:
                        self.changelog.finish(migration.id, "failed", started, str(exc))
                        raise
                    self.changelog.step(
                        migration.id,
                        index,
                        state="pending",
                        last_id=None,
                        has_last=False,
                        read=0,
                        written=0,
                        stats={},
                        phase=None,
                    )
                self.changelog.finish(migration.id, "rolled_back", started)
                reverted.append(migration.id)
            return reverted
        finally:
            self.lock.release()

    def _before_revert(self, migration: Migration) -> None:
        """Backend hook, before a migration's steps are reverted."""

    def _revert_step(self, run: StepRun) -> None:
        self.kind(run.step).revert(run)
