"""Migrations on a dump folder: the backend every kind of step runs on.

The runner holds what the steps share: the folder and its files (``files.py``: changelog, lock,
collections), the lease kept while a long step runs, progress and pacing, the context a document step
reads from the folder, and which file holds a collection as a given step left it. Each kind of step runs
in a module of its own: document steps in ``document_steps.py``, the bucket step in ``bucket_steps.py``
(both rewrite whole files, atomically: ``rewrites.py``), collection steps in ``collection_steps.py``.
The folder keeps its format: ``.json`` stays mongoexport JSON (relaxed or canonical, as it was), ``.bson``
stays BSON, ``.gz`` stays compressed.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import bson

from mongopat.errors import InputError
from mongopat.migrate.contracts import StepRun
from mongopat.migrate.dump_folder.bucket_steps import BucketFiles
from mongopat.migrate.dump_folder.catalog import DumpFolderCatalog
from mongopat.migrate.dump_folder.collection_steps import CollectionFiles
from mongopat.migrate.dump_folder.document_steps import DocumentFiles
from mongopat.migrate.dump_folder.file_parts import SPILL_PREFIX
from mongopat.migrate.dump_folder.files import DumpFolder, FileChangelog, FileLock, backup_name
from mongopat.migrate.operations import OPERATIONS
from mongopat.migrate.runner import KindRunner, RunnerBase, RunOptions
from mongopat.migrate.script import Migration
from mongopat.migrate.steps import Step
from mongopat.migrate.throttling import Throttle
from mongopat.migrate.transform_api import Context, Document, get_path, has_path, hashable_key, heads, set_path
from mongopat.predictions import Figures, figures
from mongopat.sources.dump import BSON_SUFFIXES, JSON_SUFFIXES, resolve_dump_folder


class DumpRunner(RunnerBase):
    """The same commands as :class:`~mongopat.migrate.server.runner.Runner`, on a dump folder."""

    changelog: FileChangelog

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
        self.total: int | None = None  # documents of the file being rewritten, for the progress bar's ETA
        self._renewed = time.monotonic()
        self.throttle = Throttle(self.options.max_docs_per_sec)
        self.kinds: dict[str, KindRunner] = {
            "document": DocumentFiles(self),
            "regroup": BucketFiles(self),
            "collection": CollectionFiles(self),
        }

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

    def suffix(self, run: StepRun) -> str:
        """The collection's file format, from its file or, mid-commit, from this step's backup of it."""
        for suffix in BSON_SUFFIXES + JSON_SUFFIXES:
            if (self.folder / f"{run.step.collection}{suffix}").exists():
                return suffix
            if (self.folder / backup_name(run.migration_id, run.index, f"{run.step.collection}{suffix}")).exists():
                return suffix
        raise InputError(f"collection {run.step.collection!r} not found in {self.folder}")

    def hook(self, migration_id: str, index: int, done: int) -> None:
        """Progress, the lease, and the place tests inject faults (between batches and commit renames)."""
        if done >= 0:
            self.throttle.after(done)
            now = time.monotonic()
            if now - self._renewed > self.lock.lease.total_seconds() / 4:  # a long step keeps its lock
                self.lock.renew()
                self._renewed = now
        if self.options.progress is not None and done >= 0:
            self.options.progress(migration_id, index, done, self.total)
        if self.options.on_batch is not None:
            self.options.on_batch(migration_id, index, done)

    def processes(self) -> int:
        """Processes for a large file: --workers when given, otherwise one per CPU (at most 4); one when
        throttled, since a throttle paces the reading anyway."""
        if self.options.max_docs_per_sec:
            return 1
        return self.options.workers or min(os.cpu_count() or 1, 4)

    def context(self, step: Step) -> Context:
        """The context of every document of the step's collection, read from the folder's files."""
        return OPERATIONS[step.name].context(step, None, self)

    def documents(
        self, collection: str, field: str | None, values: list[Any] | None, fields: list[str]
    ) -> Iterable[Document]:
        """The folder's documents of ``collection`` (:class:`~mongopat.migrate.transform_api.ContextSource`;
        the context of every document asks for all of them)."""
        wanted = None if values is None else {hashable_key(v) for v in values}
        kept_heads = heads("_id", *fields, *([field] if field else []))
        for document in self.files.read_heads(collection, kept_heads):
            if wanted is not None and field is not None and hashable_key(get_path(document, field)) not in wanted:
                continue
            # As a server's projection: only what the context keeps, not whole documents in memory.
            kept = {name: document[name] for name in ("_id", *fields) if name in document}
            if field is not None and has_path(document, field):
                set_path(kept, field, get_path(document, field))
            yield kept

    def catalog(self, run: StepRun) -> DumpFolderCatalog:
        return DumpFolderCatalog(
            self.files, self.changelog, run.migration_id, run.index, run.step.collection, run.state
        )

    def after(self, migration_id: str, index: int, name: str, suffix: str) -> Path:
        """The file holding collection ``name`` as step ``index`` of ``migration_id`` left it: the backup
        taken by the next step (of this or a later migration) that rewrote it, or the current file when
        none did."""
        ids = [m.id for m in self.migrations]
        position = ids.index(migration_id) if migration_id in ids else 0
        later: list[tuple[str, int]] = []
        for other in self.migrations[position:]:
            start = index + 1 if other.id == migration_id else 0
            later.extend((other.id, j) for j in range(start, len(other.steps)))
        for later_id, j in later:
            kept = self.folder / backup_name(later_id, j, f"{name}{suffix}")
            if kept.exists():
                return kept
        return self.folder / f"{name}{suffix}"

    # -- dry run ---------------------------------------------------------------------------------

    def _first_documents(self, collection: str, size: int) -> list[Document]:
        samples: list[Any] = []
        for doc in self.files.read(collection):
            if len(samples) == size:
                break
            samples.append(doc)
        return samples

    def _count(self, collection: str) -> int:
        return self.files.count(collection)

    def measure(self, collection: str) -> Figures:
        """Every document of the collection's file, encoded: exact."""
        return figures(sorted(len(bson.encode(doc)) for doc in self.files.read(collection)))
