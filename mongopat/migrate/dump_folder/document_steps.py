"""Document steps on a dump folder: the collection's file streamed, a batch at a time, through the
algorithm every backend runs (``document_batches.py``), the documents of the collections the step creates
written beside it (``rewrites.py`` commits the files and writes the step's indexes)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from mongopat.errors import OperationFailed
from mongopat.migrate.contracts import StepRun
from mongopat.migrate.document_batches import Change, Version, apply_batches, refuse_existing
from mongopat.migrate.dump_folder.file_parts import MIN_PARALLEL_BYTES, SPILL_PREFIX, run_parallel
from mongopat.migrate.dump_folder.files import DocumentWriter, records_and_documents
from mongopat.migrate.dump_folder.partial_lines import copied_line, merged_line, partial_versions
from mongopat.migrate.dump_folder.rewrites import FileRewrites
from mongopat.migrate.operations import OPERATIONS, DocumentOperation
from mongopat.migrate.operations.base import WrittenFiles
from mongopat.migrate.runner import StepOutcome, count
from mongopat.migrate.steps import Step
from mongopat.migrate.transform_api import Context, Document
from mongopat.sources.dump import JSON_SUFFIXES, FilePart, partition_file

if TYPE_CHECKING:
    from mongopat.migrate.dump_folder.runner import DumpRunner

# Documents a dump folder hands the step at a time. Nothing is sent anywhere, so a batch buys nothing, and a
# small one keeps the documents being worked on in the CPU's caches: parsing 20,000 weather documents
# (1.7 KiB) took 0.13 s in chunks of 16 here and 0.35 s in batches of 1,000. Progress, throttling and the
# lease still go by --batch-size.
CHUNK = 32


class DocumentFiles(FileRewrites):
    def refuse(self, step: Step) -> None:
        refuse_existing(step, lambda name: self.files.file_of(name) is not None)

    def write(self, run: StepRun, source: Path, writer: Callable[[str], DocumentWriter]) -> tuple[int, dict[str, Any]]:
        main = writer(run.step.collection)
        for side in run.step.created_collections():
            writer(side)  # created even when empty, so down and verify find it
        parts = partition_file(source, self.runner.processes(), MIN_PARALLEL_BYTES)
        if not parts:
            outcome = self._rewrite(run, source, None, writer, None)
            return outcome.read, outcome.stats
        return self._rewrite_in_parts(run, source, parts, writer, main)

    def _rewrite_in_parts(
        self,
        run: StepRun,
        source: Path,
        parts: list[FilePart],
        writer: Callable[[str], DocumentWriter],
        main: DocumentWriter,
    ) -> tuple[int, dict[str, Any]]:
        """A large file on several processes: each part of it (whole documents, in file order) through the
        same loop, this process writing the first into the step's files and each worker its own into files
        of a spill folder, appended to the step's files in file order once every part is done. Each
        document's fate depends on the document alone (and on the context, read here before the workers
        start, which they inherit), so the files are the bytes one process writes."""
        context = self.runner.context(run.step)
        kind = ".bson" if main.bson else ".json"
        parent = os.getpid()
        spill = Path(tempfile.mkdtemp(prefix=SPILL_PREFIX, dir=self.folder))
        try:

            def spilled(number: int, part: FilePart) -> PartWritten:
                writers: dict[str, DocumentWriter] = {}

                def part_writer(name: str) -> DocumentWriter:
                    if name not in writers:
                        writers[name] = DocumentWriter(spill / f"{number}.{name}{kind}", kind, main.canonical)
                    return writers[name]

                try:
                    outcome = self._rewrite(run, source, part, part_writer, context, parent=parent)
                finally:
                    for handle in writers.values():
                        handle.close(durable=False)
                return PartWritten(outcome.read, outcome.stats, {name: w.count for name, w in writers.items()})

            def first() -> PartWritten:
                outcome = self._rewrite(run, source, parts[0], writer, context)
                return PartWritten(outcome.read, outcome.stats, {})

            tasks = [first] + [lambda n=n, part=part: spilled(n, part) for n, part in enumerate(parts[1:], 1)]
            results: list[PartWritten] = run_parallel(tasks)
            read, stats = results[0].read, results[0].stats
            for number, part in enumerate(results[1:], 1):
                for name, written in part.counts.items():
                    writer(name).append_file(spill / f"{number}.{name}{kind}", written)
                read += part.read
                add_up(stats, part.stats)
                self.runner.hook(run.migration_id, run.index, read)
            return read, stats
        finally:
            shutil.rmtree(spill, ignore_errors=True)

    def _rewrite(
        self,
        run: StepRun,
        source: Path,
        part: FilePart | None,
        writer: Callable[[str], DocumentWriter],
        context: Context | None,
        parent: int | None = None,
    ) -> StepOutcome:
        """The documents of ``source`` (of ``part`` of it) through the step, a chunk at a time, into
        ``writer(name)``. In a worker (``parent``: the process that started it), progress and the lease are
        the parent's, and the worker stops once its parent is gone (killed: nobody would take its part)."""
        operation = OPERATIONS[run.step.name]
        main = writer(run.step.collection)
        outcome = StepOutcome()
        batch_size = self.runner.options.batch_size
        figures = type(operation).file_stats is not DocumentOperation.file_stats  # most steps add none up
        # id() of a version read partly (its document holds only the fields the step reads) -> its whole
        # line as parsed, until the version is written.
        undecoded: dict[int, dict[str, Any]] = {}
        store = FileDocuments(self.runner, run.step, writer, undecoded, context)

        def write_batch(batch: list[Version], _written: int) -> None:
            # Every document, in file order, in one write: as the step made it, or as it was (not pending,
            # or unchanged), its record written back untouched.
            store.write_side()
            records: list[bytes] = []
            for version in batch:
                replaced = store.replaced.pop(id(version), None)
                parsed = undecoded.pop(id(version), None)
                if parsed is not None and (replaced is not None or version.raw is None):
                    new = version.document if replaced is None else replaced
                    records.append(merged_line(parsed, version.document, new, main.canonical) + b"\n")
                elif replaced is not None:
                    records.append(main.record(replaced))
                elif version.raw is not None:
                    records.append(main.as_written(version.raw))
                else:
                    records.append(main.record(version.document))
            if figures:
                for key, amount in operation.file_stats([version.document for version in batch], run.step).items():
                    count(outcome.stats, key, amount)
            main.write_encoded(b"".join(records), len(records))
            if outcome.read // batch_size > (outcome.read - len(batch)) // batch_size:  # every --batch-size documents
                if parent is None:
                    self.runner.hook(run.migration_id, run.index, outcome.read)
                elif os.getppid() != parent:
                    raise OperationFailed("the run that started this worker is gone")

        versions = _versions(source, operation.read_fields(run.step), part, operation.only_copies_the_id)
        apply_batches(store, run.step, _batches(versions, CHUNK, undecoded), outcome, write_batch)
        return outcome

    def problems(
        self,
        step: Step,
        stats: dict[str, Any],
        before: int | None,
        measured: Any,
        written: WrittenFiles,
    ) -> list[str]:
        found: list[str] = []
        after = (stats.get("counts") or {}).get(step.collection)
        if before is not None and after != before:
            found.append(f"{step.collection}: {after} documents after, {before} before")
        found.extend(OPERATIONS[step.name].verify_files(step, stats, written))
        return found

    def old_shape(self, run: StepRun) -> int | None:
        operation = OPERATIONS[run.step.name]
        return sum(1 for doc in self.files.read(run.step.collection) if operation.is_pending(doc, run.step))

    def sample_context(self, step: Step, samples: list[Document]) -> Context | None:
        return self.runner.context(step) if samples else None


class FileDocuments:
    """A dump folder as the store of a document step's batches (``document_batches.DocumentStore``): the
    new documents go to the rewritten file, in file order, once the batch is done; side documents to the
    files of the collections the step creates. Nothing else writes the folder meanwhile, so every write
    takes."""

    def __init__(
        self,
        runner: DumpRunner,
        step: Step,
        writer: Callable[[str], DocumentWriter],
        undecoded: dict[int, dict[str, Any]],
        context: Context | None = None,
    ) -> None:
        self.runner, self.writer, self.undecoded = runner, writer, undecoded
        self.copies = OPERATIONS[step.name].side_documents_copy_the_document
        self.replaced: dict[int, Document] = {}  # id() of a version of the batch -> its new document
        self.side: dict[str, SideRecords] = {}  # collection -> what the batch writes to it
        self._context = context

    def context(self, step: Step, documents: list[Document]) -> Context:
        if self._context is None:
            self._context = self.runner.context(step)  # of every document of the file, read once
        return self._context

    def write(
        self, step: Step, changes: list[Change], replay: bool, stats: dict[str, Any]
    ) -> tuple[int, list[Version]]:
        written = 0
        for version, result in changes:
            self.replaced[id(version)] = result.document
            parsed = self.undecoded.get(id(version)) if self.copies else None
            for name, documents in result.side.items():
                side = self.side.get(name)
                if side is None:
                    side = self.side[name] = SideRecords(self.writer(name))
                if parsed is None:
                    side.add(documents)
                else:
                    for document in documents:
                        side.add_line(copied_line(parsed, version.document, document, side.writer.canonical))
                written += len(documents)
        count(stats, "transformed", len(changes))
        return written + len(changes), []

    def write_side(self) -> None:
        """The side documents the batch made, to their files, in the order of the documents they came
        from (one write per file)."""
        for side in self.side.values():
            side.write()

    def current(self, step: Step, versions: list[Version], stats: dict[str, Any]) -> list[Version]:
        return versions


class SideRecords:
    """What a batch writes to the file of a collection the step creates, in order, for one write: documents
    (encoded together) and lines already made."""

    def __init__(self, writer: DocumentWriter) -> None:
        self.writer = writer
        self.chunks: list[bytes] = []
        self.documents: list[Document] = []
        self.count = 0

    def add(self, documents: list[Document]) -> None:
        self.documents.extend(documents)
        self.count += len(documents)

    def add_line(self, line: bytes) -> None:
        """A JSON line (without its newline), after what was added before it."""
        self._encode_documents()
        self.chunks.append(line + b"\n")
        self.count += 1

    def write(self) -> None:
        self._encode_documents()
        if self.count:
            self.writer.write_encoded(b"".join(self.chunks), self.count)
        self.chunks, self.count = [], 0

    def _encode_documents(self) -> None:
        if self.documents:
            self.chunks.append(self.writer.encode(self.documents))
            self.documents = []


def _versions(
    source: Path, fields: frozenset[str] | None, part: FilePart | None = None, id_as_spelled: bool = False
) -> Iterator[tuple[Version, dict[str, Any] | None]]:
    """The documents of a collection file (of ``part`` of it): decoded whole, or, for a step that reads
    only some top-level fields of a JSON file, only those, each with its line as parsed (the rest of it
    passes through; ``id_as_spelled``: and an ObjectId ``_id``)."""
    if fields is not None and source.name.endswith(JSON_SUFFIXES):
        return partial_versions(source, fields, part, id_as_spelled)
    return ((Version(record, document), None) for record, document in records_and_documents(source, part))


class PartWritten(NamedTuple):
    """What a worker wrote of its part of the file: documents read, the step's figures, and the
    documents written to each collection's spill file."""

    read: int
    stats: dict[str, Any]
    counts: dict[str, int]


def add_up(into: dict[str, Any], more: dict[str, Any]) -> None:
    """Add a part's figures (counts, and documents of counts) into ``into``."""
    for key, value in more.items():
        if isinstance(value, dict):
            add_up(into.setdefault(key, {}), value)
        else:
            count(into, key, value)


def _batches(
    versions: Iterator[tuple[Version, dict[str, Any] | None]], size: int, undecoded: dict[int, dict[str, Any]]
) -> Iterator[list[Version]]:
    batch: list[Version] = []
    for version, parsed in versions:
        batch.append(version)
        if parsed is not None:
            undecoded[id(version)] = parsed
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
