"""What every kind of step gets from the dump-folder backend (:class:`~mongopat.migrate.dump_folder.runner.DumpRunner`),
and the file rewrite that document and bucket steps share.

A rewrite streams the collection's file into a temporary file (``.<name>.mongopat-tmp``, never taken for a
collection), then commits: the original file is renamed to ``mongopat_backup__<migration>__<step>__<file>``
(kept byte for byte for ``down``) and the new file takes the original name. The changelog records the
phase of every step, so a crash while writing restarts the step from the untouched original, and a crash
while committing finishes the renames: no half-written file ever carries a collection's name. The kinds
are ``document_steps.py``, ``bucket_steps.py`` and ``collection_steps.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mongopat.errors import InputError
from mongopat.migrate.catalog import index_name
from mongopat.migrate.contracts import StepRun
from mongopat.migrate.dump_folder.file_parts import MIN_PARALLEL_BYTES, over_parts, run_parallel
from mongopat.migrate.dump_folder.files import DocumentWriter, DumpFolder, backup_name, count_records, plain_documents
from mongopat.migrate.operations import STEP_OPERATIONS
from mongopat.migrate.operations.base import WrittenFiles
from mongopat.migrate.runner import KindRunner
from mongopat.migrate.steps import Step
from mongopat.migrate.transform_api import Document

if TYPE_CHECKING:
    from mongopat.migrate.dump_folder.runner import DumpRunner


class DumpSteps(KindRunner):
    """One kind of step on a dump folder."""

    def __init__(self, runner: DumpRunner) -> None:
        self.runner = runner

    @property
    def folder(self) -> Path:
        return self.runner.folder

    @property
    def files(self) -> DumpFolder:
        return self.runner.files


class FileRewrites(DumpSteps):
    """A kind of step that rewrites its collection's file (and writes the collections it creates)."""

    # -- what a kind says ------------------------------------------------------------------------

    def refuse(self, step: Step) -> None:
        """Raise OperationFailed when the step cannot start (before anything is written)."""

    def write(self, run: StepRun, source: Path, writer: Callable[[str], DocumentWriter]) -> tuple[int, dict[str, Any]]:
        """Stream ``source`` into ``writer(name)`` for each collection written; (documents read, figures)."""
        raise NotImplementedError

    def measure(self, step: Step, kept: Path, current: Path, suffix: str, written: StepFiles) -> tuple[int | None, Any]:
        """What verify reads once: documents in the original (None when it is not kept), and what the kind
        measured of the rewritten file (None: nothing). Here the original and every file the step wrote are
        counted at the same time (``written`` keeps their counts)."""
        written.count_at_once([kept, current, *map(written.path_of, step.created_collections())])
        return (written.count_file(kept) if kept.exists() else None), None

    def documents_written(self, measured: Any) -> int | None:
        """The rewritten collection's documents, when :meth:`measure` counted them already."""
        return None

    def problems(
        self,
        step: Step,
        stats: dict[str, Any],
        before: int | None,
        measured: Any,
        written: WrittenFiles,
    ) -> list[str]:
        """Problems beyond the document counts every rewrite gets; ``written`` reads the collections as the
        step left them."""
        return []

    # -- up --------------------------------------------------------------------------------------

    def run(self, run: StepRun) -> None:
        if run.state.get("phase") == "done":
            return  # committed by a run that stopped before it could mark the step applied
        runner = self.runner
        suffix = runner.suffix(run)
        if run.state.get("phase") != "commit":
            self._discard_temps(run.step, suffix)
            source = self.files.file_of(run.step.collection)
            kept = self.folder / backup_name(run.migration_id, run.index, f"{run.step.collection}{suffix}")
            if source is None and kept.exists():
                source = kept  # a crash between the two renames of an earlier commit left only the backup
            if source is None:
                raise InputError(f"collection {run.step.collection!r} not found in {self.folder}")
            self.refuse(run.step)
            read, written, stats = self._write_step(run, suffix, source)
            runner.changelog.step(run.migration_id, run.index, phase="commit", read=read, written=written, stats=stats)
            runner.changelog.add_counts(run.migration_id, read, written)
        self._commit(run, suffix)
        runner.lock.renew()

    def _outputs(self, step: Step) -> list[str]:
        """Collections the step writes: its own (rewritten) and the ones it creates."""
        return [step.collection, *step.created_collections()]

    def _discard_temps(self, step: Step, suffix: str) -> None:
        for name in self._outputs(step):
            self.files.temp_path(f"{name}{suffix}").unlink(missing_ok=True)

    def _write_step(self, run: StepRun, suffix: str, source: Path) -> tuple[int, int, dict[str, Any]]:
        runner = self.runner
        canonical = self.files.canonical(run.step.collection)
        # A quick count of records for the progress bar's ETA, only when someone watches it.
        runner.total = count_records(source) if runner.options.progress is not None else None
        runner.throttle.start()
        writers: dict[str, DocumentWriter] = {}

        def writer(name: str) -> DocumentWriter:
            if name not in writers:
                writers[name] = DocumentWriter(self.files.temp_path(f"{name}{suffix}"), suffix, canonical)
            return writers[name]

        try:
            read, stats = self.write(run, source, writer)
        finally:
            for handle in writers.values():
                handle.close()
        stats["counts"] = {name: w.count for name, w in writers.items()}
        return read, sum(w.count for w in writers.values()), stats

    def _commit(self, run: StepRun, suffix: str) -> None:
        own = f"{run.step.collection}{suffix}"
        kept = self.folder / backup_name(run.migration_id, run.index, own)
        if not kept.exists() and (self.folder / own).exists():
            (self.folder / own).rename(kept)
            self.runner.hook(run.migration_id, run.index, -1)  # between the two renames: the riskiest moment
        for name in self._outputs(run.step):
            temporary = self.files.temp_path(f"{name}{suffix}")
            if temporary.exists():
                temporary.replace(self.folder / f"{name}{suffix}")
        self._write_indexes(run)
        self.runner.changelog.step(run.migration_id, run.index, phase="done")

    def _write_indexes(self, run: StepRun) -> None:
        """The step's indexes (a subset's full list by parent, buckets by series and start...) into the
        collections' ``.metadata.json``, where ``mongorestore`` creates them. Before the step is marked
        done: a crash writes them again (an index already there is left as it is)."""
        wanted = STEP_OPERATIONS[run.step.name].indexes(run.step)
        if not wanted:
            return
        catalog = self.runner.catalog(run.with_state(self.runner.step_state(run.migration_id, run.index)))
        added = list(catalog.stats.get("indexes_added") or [])
        for collection, keys in wanted:
            name = index_name(dict(keys))
            present = any(spec.get("name") == name for spec in catalog.indexes(collection))
            if collection == run.step.collection and name not in added and not present:
                added.append(name)  # down drops only these, never an index the collection had before
                catalog.record(indexes_added=added)
            catalog.create_index(collection, {"key": dict(keys)})
        catalog.record(indexes=[index_name(dict(keys)) for _collection, keys in wanted])

    # -- verify ----------------------------------------------------------------------------------

    def verify(self, run: StepRun) -> list[str]:
        if run.state.get("state") == "pending":
            return []
        runner = self.runner
        stats = run.state.get("stats") or {}
        suffix = runner.suffix(run)
        kept = self.folder / backup_name(run.migration_id, run.index, f"{run.step.collection}{suffix}")
        current = runner.after(run.migration_id, run.index, run.step.collection, suffix)
        written = StepFiles(lambda name: runner.after(run.migration_id, run.index, name, suffix), runner.processes())
        before, measured = self.measure(run.step, kept, current, suffix, written)
        problems = []
        for name, expected in (stats.get("counts") or {}).items():
            found = self.documents_written(measured) if name == run.step.collection else None
            if found is None:
                found = written.count(name)
            if found != expected:
                problems.append(f"{name}: {found} documents, {expected} written by the migration")
        problems.extend(self.problems(run.step, stats, before, measured, written))
        if "indexes" in stats:  # an earlier mongopat wrote no indexes into the metadata
            catalog = runner.catalog(run)
            problems.extend(catalog.missing_indexes(STEP_OPERATIONS[run.step.name].indexes(run.step)))
        return problems

    # -- down ------------------------------------------------------------------------------------

    def revert(self, run: StepRun) -> None:
        suffix = self.runner.suffix(run)
        self._discard_temps(run.step, suffix)
        kept = self.folder / backup_name(run.migration_id, run.index, f"{run.step.collection}{suffix}")
        if kept.exists():
            kept.replace(self.folder / f"{run.step.collection}{suffix}")
        for name in run.step.created_collections():
            (self.folder / f"{name}{suffix}").unlink(missing_ok=True)
        catalog = self.runner.catalog(run)
        for name in catalog.stats.get("indexes_added") or []:  # the created collections went with theirs
            catalog.drop_index(run.step.collection, name)
        catalog.reverted()


class StepFiles:
    """The collections of a dump folder as a step left them (:class:`~mongopat.migrate.operations.base.WrittenFiles`):
    ``path_of(name)`` is the file of each, ``workers`` the processes a large one is read on."""

    def __init__(self, path_of: Callable[[str], Path], workers: int) -> None:
        self.path_of, self.workers = path_of, workers
        self._counts: dict[Path, int] = {}

    def count(self, name: str) -> int:
        return self.count_file(self.path_of(name))

    def count_file(self, path: Path) -> int:
        """The documents of a file (none when it does not exist), counted once."""
        if path not in self._counts:
            self._counts[path] = count_records(path) if path.exists() else 0
        return self._counts[path]

    def count_at_once(self, paths: list[Path]) -> None:
        """Count the documents of ``paths`` at the same time, for :meth:`count_file`: the large files
        spread over up to ``workers`` processes (the largest first, each to the least loaded), the small
        ones here."""
        todo = [path for path in dict.fromkeys(paths) if path not in self._counts and path.exists()]
        sizes = {path: path.stat().st_size for path in todo}
        groups: list[list[Path]] = [[] for _ in range(max(1, min(self.workers, len(todo))))]
        loads = [0] * len(groups)
        for path in sorted(todo, key=sizes.__getitem__, reverse=True):
            least = 0 if sizes[path] < MIN_PARALLEL_BYTES else loads.index(min(loads))
            groups[least].append(path)
            loads[least] += sizes[path]
        busy = [group for group in groups if group]
        for group, counts in zip(busy, run_parallel([partial(_count_each, group) for group in busy]), strict=True):
            self._counts.update(zip(group, counts, strict=True))

    def total(self, name: str, measure: Callable[[Document], int]) -> int:
        path = self.path_of(name)
        if not path.exists():
            return 0
        return sum(over_parts(path, self.workers, lambda part: sum(map(measure, plain_documents(path, part)))))


def _count_each(paths: list[Path]) -> list[int]:
    return [count_records(path) for path in paths]
