"""The bucket step on a dump folder: readings streamed into buckets, or, for a relaxed Extended JSON file,
bucketed straight from its lines on several processes (``bucket_lines.py``); ``rewrites.py`` commits
the file."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from mongopat.migrate.contracts import StepRun
from mongopat.migrate.dump_folder.bucket_lines import CLOSE_EVERY_LINES, BucketSpec, Tally, bucket_file, tally_buckets
from mongopat.migrate.dump_folder.file_parts import run_parallel
from mongopat.migrate.dump_folder.files import DocumentWriter, count_records, decoded_documents
from mongopat.migrate.dump_folder.rewrites import FileRewrites, StepFiles
from mongopat.migrate.operations.base import WrittenFiles
from mongopat.migrate.operations.bucket import BucketBuilder
from mongopat.migrate.operations.bucket import pending as bucket_pending
from mongopat.migrate.steps import Step
from mongopat.migrate.transform_api import Document
from mongopat.sources.dump import JSON_SUFFIXES


class BucketFiles(FileRewrites):
    def write(self, run: StepRun, source: Path, writer: Callable[[str], DocumentWriter]) -> tuple[int, dict[str, Any]]:
        out = writer(run.step.collection)
        if source.name.endswith(JSON_SUFFIXES) and not self.files.canonical(run.step.collection):
            return self._write_buckets_fast(run.step, source, out, run.migration_id, run.index)
        return self._write_buckets(run.step, decoded_documents(source), out, run.migration_id, run.index)

    def measure(self, step: Step, kept: Path, current: Path, suffix: str, written: StepFiles) -> tuple[int | None, Any]:
        if kept.exists() and current.exists() and suffix in JSON_SUFFIXES:
            # The two reads of a large bucket migration's verification, at the same time.
            tally, before = run_parallel(
                [lambda: tally_buckets(current, self.runner.processes()), lambda: count_records(kept)]
            )
            return before, tally
        return super().measure(step, kept, current, suffix, written)

    def documents_written(self, measured: Any) -> int | None:
        return measured.documents if isinstance(measured, Tally) else None

    def problems(
        self,
        step: Step,
        stats: dict[str, Any],
        before: int | None,
        measured: Any,
        written: WrittenFiles,
    ) -> list[str]:
        if before is None:
            return []
        found: list[str] = []
        if isinstance(measured, Tally):
            if measured.malformed:
                found.append(f"{step.collection}: {measured.malformed} line(s) are not JSON documents")
            if measured.miscounted:
                found.append(f"{step.collection}: {measured.miscounted} bucket(s) whose count is not their readings")
            total = measured.readings
        else:
            total = written.total(step.collection, _readings)
        total += stats.get("passthrough", 0)
        if total != before:
            found.append(f"{step.collection}: buckets hold {total} readings, the original {before}")
        return found

    def old_shape(self, run: StepRun) -> int | None:
        from mongomock.filtering import filter_applies  # the embedded engine evaluates the filter

        where = bucket_pending(run.step)
        return sum(1 for doc in self.files.read(run.step.collection) if filter_applies(where, doc))

    def _write_buckets(
        self, step: Step, documents: Iterator[Document], out: DocumentWriter, migration_id: str, index: int
    ) -> tuple[int, dict[str, Any]]:
        """Stream readings into buckets; buckets of windows well behind the newest are written out, so
        memory holds the open windows only (plus one sequence number per window closed)."""
        builder = BucketBuilder(step)
        read = passthrough = 0
        for doc in documents:
            if builder.add(doc) is None:
                out.write(doc)
                passthrough += 1
            read += 1
            for full in builder.completed:
                out.write(full)
            builder.completed.clear()
            if read % CLOSE_EVERY_LINES == 0:
                for bucket in builder.close_behind():
                    out.write(bucket)
            if read % self.runner.options.batch_size == 0:
                self.runner.hook(migration_id, index, read)
        for bucket in builder.close():
            out.write(bucket)
        return read, {"passthrough": passthrough}

    def _write_buckets_fast(
        self, step: Step, source: Path, out: DocumentWriter, migration_id: str, index: int
    ) -> tuple[int, dict[str, Any]]:
        """Bucketing straight from relaxed Extended JSON lines, on several processes for large files
        (:mod:`mongopat.migrate.dump_folder.bucket_lines`): the same buckets as the decoded path."""

        def write(data: bytes) -> None:
            out.handle.write(data)

        merger = bucket_file(
            source,
            BucketSpec.of(step.params),
            write,
            workers=self.runner.processes(),
            after_chunk=lambda read: self.runner.hook(migration_id, index, read),
            spill_in=self.folder,
        )
        out.count += merger.written
        return merger.read, {"passthrough": merger.passthrough}


def _readings(document: Document) -> int:
    """The readings a bucket says it holds (0 for a document passed through)."""
    return document.get("count", 0) if isinstance(document.get("readings"), list) else 0
