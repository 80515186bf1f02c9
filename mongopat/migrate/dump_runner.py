"""Migrations on a dump folder: each step rewrites whole files, atomically.

A step streams its collection's file into a temporary file (``.<name>.mongopat-tmp``, never taken for a
collection), then commits: the original file is renamed to ``mongopat_backup__<migration>__<step>__<file>``
(kept byte for byte for ``down``) and the new file takes the original name. The changelog
(``mongopat_changelog.json``) records the phase of every step, so a crash while writing restarts the
step from the untouched original, and a crash while committing finishes the renames: no half-written
file ever carries a collection's name. The folder keeps its format: ``.json`` stays mongoexport JSON
(relaxed or canonical, as it was), ``.bson`` stays BSON, ``.gz`` stays compressed.
"""

from __future__ import annotations

import contextlib
import datetime
import gzip
import os
import shutil
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import bson
from bson import json_util

from mongopat import __version__
from mongopat.errors import InputError, OperationFailed
from mongopat.migrate.bookkeeping import LeaseLock, LockLost, host_name, new_entry, utcnow
from mongopat.migrate.catalog.dump_folder import DumpFolderCatalog, write_durably
from mongopat.migrate.dump_buckets import SPILL_PREFIX, BucketSpec, Tally, bucket_file, tally_buckets
from mongopat.migrate.file_parts import run_parallel
from mongopat.migrate.operations import COLLECTION_OPERATIONS, OPERATIONS, transform
from mongopat.migrate.operations.bucket import BucketBuilder
from mongopat.migrate.operations.bucket import pending as bucket_pending
from mongopat.migrate.runner import RunnerBase, RunOptions
from mongopat.migrate.script import Migration
from mongopat.migrate.steps import Step
from mongopat.migrate.throttling import Throttle
from mongopat.migrate.transform_api import Context, Document, get_path, has_path, hashable_key, set_path
from mongopat.sources.dump import (
    BSON_SUFFIXES,
    JSON_SUFFIXES,
    _bson_records,
    _json_records,
    _open,
    _read_bson,
    read_json_documents,
    resolve_dump_folder,
)
from mongopat.sources.extjson import encode_document, loads

CHANGELOG_FILE = "mongopat_changelog.json"
LOCK_FILE = "mongopat_lock.json"
TMP_SUFFIX = ".mongopat-tmp"


def _fsync_write(path: Path, data: bytes) -> None:
    write_durably(path, path.with_name(f".{path.name}{TMP_SUFFIX}"), data)


class FileChangelog:
    """The changelog as a small file of Extended JSON lines, rewritten atomically on every change."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / CHANGELOG_FILE
        self.entries: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    entry = json_util.loads(line)
                    self.entries[entry["_id"]] = entry

    def _save(self) -> None:
        lines = [
            json_util.dumps(entry, json_options=json_util.CANONICAL_JSON_OPTIONS) for entry in self.entries.values()
        ]
        _fsync_write(self.path, ("\n".join(lines) + "\n").encode() if lines else b"")

    def all(self) -> dict[str, dict[str, Any]]:
        return json_util.loads(json_util.dumps(self.entries))

    def get(self, migration_id: str) -> dict[str, Any] | None:
        return self.all().get(migration_id)

    def start(self, migration_id: str, checksum: str, description: str, steps: list[dict[str, Any]]) -> None:
        entry = self.entries.get(migration_id)
        if entry is None or entry.get("state") == "rolled_back":
            self.entries[migration_id] = new_entry(migration_id, checksum, description, steps)
        else:
            entry.update(state="running", error=None, host=host_name(), mongopat_version=__version__)
        self._save()

    def step(self, migration_id: str, index: int, **fields: Any) -> None:
        self.entries[migration_id]["steps"][index].update(fields)
        self._save()

    def add_counts(self, migration_id: str, read: int, written: int) -> None:
        entry = self.entries[migration_id]
        entry["read"] += read
        entry["written"] += written
        self._save()

    def finish(self, migration_id: str, state: str, started: float, error: str | None = None, **fields: Any) -> None:
        entry = self.entries[migration_id]
        entry.update(state=state, finished_at=utcnow(), error=error, **fields)
        entry["duration_s"] = round(entry.get("duration_s", 0) + time.monotonic() - started, 3)
        self._save()

    def set(self, migration_id: str, **fields: Any) -> None:
        self.entries[migration_id].update(fields)
        self._save()

    def remove(self, migration_id: str) -> None:
        self.entries.pop(migration_id, None)
        self._save()


class FileLock(LeaseLock):
    """The lease as ``mongopat_lock.json`` in the dump folder, created exclusively."""

    def __init__(self, folder: Path, lease_seconds: float = 60.0) -> None:
        super().__init__(lease_seconds)
        self.path = folder / LOCK_FILE

    def _document(self) -> dict[str, Any]:
        now = utcnow()
        return {
            "_id": "migrate",
            "holder": self.holder,
            "host": host_name(),
            "pid": os.getpid(),
            "acquired_at": now,
            "expires_at": now + self.lease,
        }

    def current(self) -> dict[str, Any] | None:
        try:
            return json_util.loads(self.path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return None

    def _remove(self, holder: str, expires_at: Any) -> bool:
        # Moved aside first, so that a run taking the lock over meanwhile keeps its new file: only the lease
        # seen is removed; another one is put back.
        aside = self.path.with_name(f".{self.path.name}.unlock{TMP_SUFFIX}")
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return False
        try:
            moved = json_util.loads(aside.read_text(encoding="utf-8"))
        except ValueError:
            moved = {}
        if moved.get("holder") == holder and moved.get("expires_at") == expires_at:
            aside.unlink()
            return True
        with contextlib.suppress(FileExistsError):  # not ours to remove: back, unless a newer lock exists
            os.link(aside, self.path)
        aside.unlink()
        return False

    def _write(self, exclusive: bool) -> bool:
        """Write the lease through a temporary file of this holder's own, so the lock file is never seen
        empty or half written: created with a hard link when ``exclusive`` (fails if it exists), else
        replaced. An empty lock file once let a second run take a fresh lock over as unreadable."""
        own = "".join(c if c.isalnum() or c in "-_." else "_" for c in self.holder)
        temporary = self.path.with_name(f".{self.path.name}.{own}{TMP_SUFFIX}")
        with temporary.open("wb") as handle:
            handle.write(json_util.dumps(self._document()).encode())
            handle.flush()
            os.fsync(handle.fileno())
        try:
            if exclusive:
                os.link(temporary, self.path)
            else:
                temporary.replace(self.path)
        except FileExistsError:
            return False
        finally:
            temporary.unlink(missing_ok=True)
        return True

    def _try(self) -> bool:
        if self._write(exclusive=True):
            return True
        current = self.current()
        if current is not None and current.get("expires_at") and current["expires_at"] >= utcnow():
            return current.get("holder") == self.holder
        self._write(exclusive=False)  # expired (or unreadable): take it over, then check we won
        time.sleep(0.05)
        current = self.current()
        return bool(current and current.get("holder") == self.holder)

    def renew(self) -> None:
        current = self.current()
        if not current or current.get("holder") != self.holder:
            raise LockLost("the migration lock was lost (lease expired and taken over); stopping")
        self._write(exclusive=False)

    def release(self) -> None:
        if self.held:
            current = self.current()
            if current and current.get("holder") == self.holder:
                self.path.unlink(missing_ok=True)
            self.held = False


class DumpFolder:
    """The files of a dump folder as collections: find, read, write (atomically), rename."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def file_of(self, name: str) -> Path | None:
        for suffix in BSON_SUFFIXES + JSON_SUFFIXES:
            candidate = self.folder / f"{name}{suffix}"
            if candidate.exists():
                return candidate
        return None

    def suffix_like(self, name: str) -> str:
        path = self.file_of(name)
        if path is None:
            raise InputError(f"collection {name!r} not found in {self.folder}")
        return next(s for s in BSON_SUFFIXES + JSON_SUFFIXES if path.name.endswith(s))

    def read(self, name: str) -> Iterator[Document]:
        path = self.file_of(name)
        if path is None:
            return iter(())
        return _documents(path)

    def count(self, name: str) -> int:
        path = self.file_of(name)
        return 0 if path is None else _count_file(path)

    def canonical(self, name: str) -> bool:
        path = self.file_of(name)
        if path is None or not path.name.endswith(JSON_SUFFIXES):
            return False
        with _open(path) as handle:
            head = handle.read(4096)
        return b'"$numberInt"' in head or b'"$numberLong"' in head or b'"$numberDouble"' in head

    def temp_path(self, final_name: str) -> Path:
        return self.folder / f".{final_name}{TMP_SUFFIX}"


class DocumentWriter:
    """Writes documents to a temporary file in a collection's format; ``close`` makes it durable."""

    def __init__(self, path: Path, suffix: str, canonical: bool) -> None:
        self.path = path
        self.bson = suffix.startswith(".bson")
        self.canonical = canonical
        raw: IO[bytes] = path.open("wb")
        self.raw = raw
        # Closed in close(), which every caller reaches through try/finally.
        self.handle: IO[bytes] = gzip.open(raw, "wb") if suffix.endswith(".gz") else raw  # type: ignore[assignment]  # noqa: SIM115
        self.count = 0

    def write(self, document: Document) -> None:
        if self.bson:
            self.handle.write(bson.encode(document))
        else:
            self.handle.write(encode_document(document, self.canonical) + b"\n")
        self.count += 1

    def close(self) -> None:
        if self.handle is not self.raw:
            self.handle.close()
        self.raw.flush()
        os.fsync(self.raw.fileno())
        self.raw.close()


def backup_name(migration_id: str, index: int, file_name: str) -> str:
    return f"mongopat_backup__{migration_id}__{index}__{file_name}"


class DumpRunner(RunnerBase):
    """The same commands as :class:`~mongopat.migrate.server_runner.Runner`, on a dump folder."""

    def __init__(
        self,
        path: str | Path,
        migrations: list[Migration],
        options: RunOptions | None = None,
        database: str | None = None,
    ) -> None:
        folder, _ = resolve_dump_folder(Path(path), database)
        self.folder = folder
        self.files = DumpFolder(folder)
        self.migrations = migrations
        self.options = options or RunOptions()
        self.changelog = FileChangelog(folder)
        self.lock = FileLock(folder, self.options.lease_seconds)
        self._total: int | None = None
        self._renewed = time.monotonic()
        self.throttle = Throttle(self.options.max_docs_per_sec)

    # -- stamp -----------------------------------------------------------------------------------

    def count_old_shape(self, migration_id: str, index: int, step: Step) -> int | None:
        if step.type.kind == "document":
            operation = OPERATIONS[step.name]
            return sum(1 for doc in self.files.read(step.collection) if operation.is_pending(doc, step))
        if step.type.kind == "regroup":
            from mongomock.filtering import filter_applies  # the embedded engine evaluates the filter

            where = bucket_pending(step)
            return sum(1 for doc in self.files.read(step.collection) if filter_applies(where, doc))
        return None

    def forget(self, migration_id: str) -> int:
        kept = list(self.folder.glob(f"mongopat_backup__{migration_id}__*"))
        for path in kept:
            path.unlink()
        self.changelog.remove(migration_id)
        return len(kept)

    # -- up --------------------------------------------------------------------------------------

    step_failures = (*RunnerBase.step_failures, OSError)

    def _locked(self) -> None:
        self._renewed = time.monotonic()
        self.changelog = FileChangelog(self.folder)  # read again under the lock
        for leftover in self.folder.glob(f"{SPILL_PREFIX}*"):  # from a run that was killed
            shutil.rmtree(leftover, ignore_errors=True)

    def _refuse_unsupported(self, migration: Migration) -> None:
        if migration.python is not None:
            raise InputError(f"{migration.id}: Python migrations run against a server (--uri), not a dump folder")

    def _outputs(self, step: Step) -> list[str]:
        """Collections a step writes: its own (rewritten) and the ones it creates."""
        if step.type.kind == "collection":
            return []
        return [step.collection, *step.created_collections()]

    def _run_step(self, migration_id: str, index: int, step: Step, state: dict[str, Any]) -> None:
        if state.get("phase") == "done":
            return  # committed by a run that stopped before it could mark the step applied
        if step.type.kind == "collection":
            catalog = self._catalog(migration_id, index, step, state)
            COLLECTION_OPERATIONS[step.name].apply(step, catalog)
            self.changelog.step(migration_id, index, read=catalog.read, written=catalog.written, stats=catalog.stats)
            self.changelog.add_counts(migration_id, catalog.read, catalog.written)
            self.lock.renew()
            return
        suffix = self._suffix(migration_id, index, step)
        if state.get("phase") != "commit":
            self._discard_temps(step, suffix)
            source = self.files.file_of(step.collection)
            kept = self.folder / backup_name(migration_id, index, f"{step.collection}{suffix}")
            if source is None and kept.exists():
                source = kept  # a crash between the two renames of an earlier commit left only the backup
            if source is None:
                raise OperationFailed(f"collection {step.collection!r} not found in {self.folder}")
            if step.type.kind == "document":
                existing = [c for c in step.created_collections() if self.files.file_of(c) is not None]
                if existing:
                    raise OperationFailed(f"{step.name} would write into existing collection(s) {', '.join(existing)}")
            read, written, stats = self._write_step(migration_id, index, step, suffix, source)
            self.changelog.step(migration_id, index, phase="commit", read=read, written=written, stats=stats)
            self.changelog.add_counts(migration_id, read, written)
        self._commit(migration_id, index, step, suffix)
        self.lock.renew()

    def _suffix(self, migration_id: str, index: int, step: Step) -> str:
        """The collection's file format, from its file or, mid-commit, from this step's backup of it."""
        for suffix in BSON_SUFFIXES + JSON_SUFFIXES:
            if (self.folder / f"{step.collection}{suffix}").exists():
                return suffix
            if (self.folder / backup_name(migration_id, index, f"{step.collection}{suffix}")).exists():
                return suffix
        raise OperationFailed(f"collection {step.collection!r} not found in {self.folder}")

    def _discard_temps(self, step: Step, suffix: str) -> None:
        for name in self._outputs(step):
            self.files.temp_path(f"{name}{suffix}").unlink(missing_ok=True)

    def _write_step(
        self, migration_id: str, index: int, step: Step, suffix: str, source: Path
    ) -> tuple[int, int, dict[str, Any]]:
        canonical = self.files.canonical(step.collection)
        documents = _documents(source)
        # A quick count of records for the progress bar's ETA, only when someone watches it.
        self._total = _count_file(source) if self.options.progress is not None else None
        self.throttle.start()
        writers: dict[str, DocumentWriter] = {}

        def writer(name: str) -> DocumentWriter:
            if name not in writers:
                writers[name] = DocumentWriter(self.files.temp_path(f"{name}{suffix}"), suffix, canonical)
            return writers[name]

        read = 0
        stats: dict[str, Any] = {}
        try:
            if step.type.kind == "regroup" and source.name.endswith(JSON_SUFFIXES) and not canonical:
                read, stats = self._write_buckets_fast(step, source, writer(step.collection), migration_id, index)
            elif step.type.kind == "regroup":
                read, stats = self._write_buckets(step, documents, writer(step.collection), migration_id, index)
            else:
                ctx = self._context(step)
                operation = OPERATIONS[step.name]
                main = writer(step.collection)
                for side in step.created_collections():
                    writer(side)  # created even when empty, so down and verify find it
                for doc in documents:
                    result = transform(doc, step, ctx)
                    main.write(result.document)
                    for name, docs in result.side.items():
                        for side_doc in docs:
                            writer(name).write(side_doc)
                    for key, amount in operation.file_stats(doc, step).items():
                        stats[key] = stats.get(key, 0) + amount
                    read += 1
                    if read % self.options.batch_size == 0:
                        self._hook(migration_id, index, read)
        finally:
            for handle in writers.values():
                handle.close()
        stats["counts"] = {name: w.count for name, w in writers.items()}
        return read, sum(w.count for w in writers.values()), stats

    def _hook(self, migration_id: str, index: int, done: int) -> None:
        """Progress, the lease, and the place tests inject faults (between batches and commit renames)."""
        if done >= 0:
            self.throttle.after(done)
            now = time.monotonic()
            if now - self._renewed > self.lock.lease.total_seconds() / 4:  # a long step keeps its lock
                self.lock.renew()
                self._renewed = now
        if self.options.progress is not None and done >= 0:
            self.options.progress(migration_id, index, done, self._total)
        if self.options.on_batch is not None:
            self.options.on_batch(migration_id, index, done)

    def _write_buckets(
        self, step: Step, documents: Iterator[Document], out: DocumentWriter, migration_id: str, index: int
    ) -> tuple[int, dict[str, Any]]:
        """Stream readings into buckets; buckets of windows well behind the newest are written out, so
        memory holds the open windows only (plus one sequence number per written bucket key)."""
        last_sequence: dict[Any, int] = {}

        def load(series: Any, start: Any) -> Document | None:
            sequence = last_sequence.get((hashable_key(series), start))
            if sequence is None:
                return None
            stub = BucketBuilder(step)._new(series, start, sequence)
            stub["count"] = step.params["max_bucket_size"]  # full: the next reading opens sequence + 1
            return stub

        builder = BucketBuilder(step, load)
        newest = None
        read = passthrough = 0
        window = datetime.timedelta(seconds=step.params["window_seconds"])

        def flush(older_than: Any) -> None:
            for key in [k for k in builder.open if older_than is None or k[1] < older_than]:
                bucket = builder.open.pop(key)
                builder.ids.pop(key, None)
                if bucket["count"] and bucket["readings"]:
                    out.write(bucket)
                last_sequence[key] = bucket["_id"]["n"]

        for doc in documents:
            bucket = builder.add(doc)
            read += 1
            if builder.completed:
                for full in builder.completed:
                    out.write(full)
                builder.completed.clear()
            if bucket is None:
                out.write(doc)
                passthrough += 1
            elif newest is None or bucket["start"] > newest:
                newest = bucket["start"]
            if read % 10_000 == 0 and newest is not None:
                flush(newest - 2 * window)
            if read % self.options.batch_size == 0:
                self._hook(migration_id, index, read)
        flush(None)
        return read, {"passthrough": passthrough}

    def _write_buckets_fast(
        self, step: Step, source: Path, out: DocumentWriter, migration_id: str, index: int
    ) -> tuple[int, dict[str, Any]]:
        """Bucketing straight from relaxed Extended JSON lines, on several processes for large files
        (:mod:`mongopat.migrate.dump_buckets`): the same buckets as the decoded path."""

        def write(data: bytes) -> None:
            out.handle.write(data)

        merger = bucket_file(
            source,
            BucketSpec.of(step.params),
            write,
            workers=self._processes(),
            after_chunk=lambda read: self._hook(migration_id, index, read),
            spill_in=self.folder,
        )
        out.count += merger.written
        return merger.read, {"passthrough": merger.passthrough}

    def _processes(self) -> int:
        """Processes for a large file: --workers when given, otherwise one per CPU (at most 4); one when
        throttled, since a throttle paces the reading anyway."""
        if self.options.max_docs_per_sec:
            return 1
        return self.options.workers or min(os.cpu_count() or 1, 4)

    def _context(self, step: Step) -> Context:
        """The context of every document of the step's collection, read from the folder's files."""
        return OPERATIONS[step.name].context(step, None, self)

    def documents(
        self, collection: str, field: str | None, values: list[Any] | None, fields: list[str]
    ) -> Iterable[Document]:
        """The folder's documents of ``collection`` (:class:`~mongopat.migrate.transform_api.ContextSource`;
        the context of every document asks for all of them)."""
        wanted = None if values is None else {hashable_key(v) for v in values}
        for document in self.files.read(collection):
            if wanted is not None and field is not None and hashable_key(get_path(document, field)) not in wanted:
                continue
            # As a server's projection: only what the context keeps, not whole documents in memory.
            kept = {name: document[name] for name in ("_id", *fields) if name in document}
            if field is not None and has_path(document, field):
                set_path(kept, field, get_path(document, field))
            yield kept

    def _commit(self, migration_id: str, index: int, step: Step, suffix: str) -> None:
        own = f"{step.collection}{suffix}"
        kept = self.folder / backup_name(migration_id, index, own)
        if not kept.exists() and (self.folder / own).exists():
            (self.folder / own).rename(kept)
            self._hook(migration_id, index, -1)  # between the two renames: the riskiest moment
        for name in self._outputs(step):
            temporary = self.files.temp_path(f"{name}{suffix}")
            if temporary.exists():
                temporary.replace(self.folder / f"{name}{suffix}")
        self.changelog.step(migration_id, index, phase="done")

    def _catalog(self, migration_id: str, index: int, step: Step, state: dict[str, Any]) -> DumpFolderCatalog:
        return DumpFolderCatalog(self.files, self.changelog, migration_id, index, step.collection, state)

    # -- verify ----------------------------------------------------------------------------------

    def _after(self, migration: Migration, index: int, name: str, suffix: str) -> Path:
        """The file holding collection ``name`` as step ``index`` left it: the backup taken by the next
        step (of this or a later migration) that rewrote it, or the current file when none did."""
        later = []
        position = self.migrations.index(migration) if migration in self.migrations else 0
        for other in self.migrations[position:]:
            start = index + 1 if other is migration else 0
            later.extend((other.id, j) for j in range(start, len(other.steps)))
        for migration_id, j in later:
            kept = self.folder / backup_name(migration_id, j, f"{name}{suffix}")
            if kept.exists():
                return kept
        return self.folder / f"{name}{suffix}"

    def verify_migration(self, migration: Migration) -> list[str]:
        entry = self.changelog.get(migration.id) or {}
        problems: list[str] = []
        for index, step in enumerate(migration.steps):
            state = (entry.get("steps") or [])[index] if entry.get("steps") else {}
            stats = state.get("stats") or {}
            if state.get("state") == "pending":
                continue
            if step.type.kind == "collection":
                catalog = self._catalog(migration.id, index, step, state)
                problems.extend(COLLECTION_OPERATIONS[step.name].verify(step, catalog))
                continue
            suffix = self._suffix(migration.id, index, step)
            kept = self.folder / backup_name(migration.id, index, f"{step.collection}{suffix}")
            current = self._after(migration, index, step.collection, suffix)
            tally: Tally | None = None
            if step.type.kind == "regroup" and kept.exists() and current.exists() and suffix in JSON_SUFFIXES:
                # The two reads of a large bucket migration's verification, at the same time.
                tally, before = run_parallel(
                    [
                        lambda current=current: tally_buckets(current, self._processes()),
                        lambda kept=kept: _count_file(kept),
                    ]
                )
            else:
                before = _count_file(kept) if kept.exists() else None

            def after(name: str, index: int = index, suffix: str = suffix) -> Iterator[Document]:
                path = self._after(migration, index, name, suffix)
                return _read_file(path) if path.exists() else iter(())

            for name, expected in (stats.get("counts") or {}).items():
                found_path = self._after(migration, index, name, suffix)
                if tally is not None and name == step.collection:
                    found = tally.documents
                else:
                    found = _count_file(found_path) if found_path.exists() else 0
                if found != expected:
                    problems.append(f"{name}: {found} documents, {expected} written by the migration")
            if (
                step.type.kind == "document"
                and before is not None
                and stats.get("counts", {}).get(step.collection) != before
            ):
                problems.append(
                    f"{step.collection}: {stats.get('counts', {}).get(step.collection)} documents after, {before} before"
                )
            if step.type.kind == "regroup" and before is not None:
                if tally is not None:
                    if tally.malformed:
                        problems.append(f"{step.collection}: {tally.malformed} line(s) are not JSON documents")
                    if tally.miscounted:
                        problems.append(
                            f"{step.collection}: {tally.miscounted} bucket(s) whose count is not their readings"
                        )
                    total = tally.readings
                else:
                    total = sum(
                        d.get("count", 0) for d in after(step.collection) if isinstance(d.get("readings"), list)
                    )
                total += stats.get("passthrough", 0)
                if total != before:
                    problems.append(f"{step.collection}: buckets hold {total} readings, the original {before}")
            if step.type.kind == "document":
                problems.extend(OPERATIONS[step.name].verify_files(step, stats, after, self.files.count))
        return problems

    # -- down ------------------------------------------------------------------------------------

    def _revert_step(self, migration_id: str, index: int, step: Step, state: dict[str, Any]) -> None:
        if step.type.kind == "collection":
            catalog = self._catalog(migration_id, index, step, state)
            COLLECTION_OPERATIONS[step.name].revert(step, catalog)
            catalog.reverted()
            return
        suffix = self._suffix(migration_id, index, step)
        self._discard_temps(step, suffix)
        kept = self.folder / backup_name(migration_id, index, f"{step.collection}{suffix}")
        if kept.exists():
            kept.replace(self.folder / f"{step.collection}{suffix}")
        for name in step.created_collections():
            for candidate in (self.folder / f"{name}{suffix}",):
                candidate.unlink(missing_ok=True)

    # -- dry run ---------------------------------------------------------------------------------

    def _dry_run(self, migration: Migration) -> dict[str, Any]:
        from mongopat.migrate.preview import dry_run_examples

        steps = []
        for index, step in enumerate(migration.steps):
            samples = []
            for doc in self.files.read(step.collection):
                samples.append(doc)
                if len(samples) == 3:
                    break
            ctx = self._context(step) if step.type.kind == "document" and samples else None
            examples = dry_run_examples(step, samples, ctx)
            row = {
                "step": step.name,
                "collection": step.collection,
                "documents": self.files.count(step.collection),
                "examples": examples,
            }
            if step.type.kind == "collection":
                row.update(
                    examples=[],
                    would=COLLECTION_OPERATIONS[step.name].dry_run(step, self._catalog(migration.id, index, step, {})),
                )
            steps.append(row)
        return {"id": migration.id, "state": "dry-run", "steps": steps}


def _documents(path: Path) -> Iterator[Document]:
    """Fully decoded documents of a collection file (BSON types restored)."""
    if path.name.endswith(BSON_SUFFIXES):
        return (doc for doc, _size in _read_bson(path))
    return read_json_documents(path)


def _read_file(path: Path) -> Iterator[Document]:
    """Documents of a file as plain structures, for verification: Extended JSON wrappers stay undecoded,
    which is enough to count documents, sum counts and measure arrays, and several times faster."""
    if path.name.endswith(BSON_SUFFIXES):
        return (bson.decode(raw) for _offset, raw in _bson_records(path))
    return (record if isinstance(record, dict) else loads(record) for _line, record in _json_records(path))


def _count_file(path: Path) -> int:
    """Documents in a collection file, exactly, without parsing them (lines, or BSON length headers)."""
    if path.name.endswith(BSON_SUFFIXES):
        return sum(1 for _ in _bson_records(path))
    with _open(path) as handle:
        head = handle.read(4096).lstrip(b" \t\r\n\xef\xbb\xbf")[:1]
        if head == b"[":  # a --jsonArray export: count its elements properly
            return sum(1 for _ in _json_records(path))
        handle.seek(0)
        return sum(1 for line in handle if line and not line.isspace())


def write_json_lines(path: Path, documents: list[Document]) -> None:
    """Helper for tests and the demo: a mongoexport file from documents."""
    path.write_bytes(b"".join(encode_document(d) + b"\n" for d in documents))
