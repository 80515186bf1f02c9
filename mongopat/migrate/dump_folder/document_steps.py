"""Document steps on a dump folder: the collection's file streamed through the step's transform, the
documents of the collections it creates written beside it (``rewrites.py`` commits the files and
writes the step's indexes)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from mongopat.errors import OperationFailed
from mongopat.migrate.dump_folder.files import DocumentWriter, decoded_documents
from mongopat.migrate.dump_folder.rewrites import FileRewrites
from mongopat.migrate.operations import OPERATIONS, transform
from mongopat.migrate.steps import Step
from mongopat.migrate.transform_api import Context, Document


class DocumentFiles(FileRewrites):
    def refuse(self, step: Step) -> None:
        existing = [c for c in step.created_collections() if self.files.file_of(c) is not None]
        if existing:
            raise OperationFailed(f"{step.name} would write into existing collection(s) {', '.join(existing)}")

    def write(
        self, migration_id: str, index: int, step: Step, source: Path, writer: Callable[[str], DocumentWriter]
    ) -> tuple[int, dict[str, Any]]:
        ctx = self.runner.context(step)
        operation = OPERATIONS[step.name]
        main = writer(step.collection)
        for side in step.created_collections():
            writer(side)  # created even when empty, so down and verify find it
        read = 0
        stats: dict[str, Any] = {}
        batch_size = self.runner.options.batch_size
        for doc in decoded_documents(source):
            result = transform(doc, step, ctx)
            main.write(result.document)
            for name, docs in result.side.items():
                for side_doc in docs:
                    writer(name).write(side_doc)
            for key, amount in operation.file_stats(doc, step).items():
                stats[key] = stats.get(key, 0) + amount
            read += 1
            if read % batch_size == 0:
                self.runner.hook(migration_id, index, read)
        return read, stats

    def problems(
        self,
        step: Step,
        stats: dict[str, Any],
        before: int | None,
        measured: Any,
        after: Callable[[str], Iterator[Document]],
    ) -> list[str]:
        found: list[str] = []
        written = (stats.get("counts") or {}).get(step.collection)
        if before is not None and written != before:
            found.append(f"{step.collection}: {written} documents after, {before} before")
        found.extend(OPERATIONS[step.name].verify_files(step, stats, after, self.files.count))
        return found

    def old_shape(self, migration_id: str, index: int, step: Step) -> int | None:
        operation = OPERATIONS[step.name]
        return sum(1 for doc in self.files.read(step.collection) if operation.is_pending(doc, step))

    def sample_context(self, step: Step, samples: list[Any]) -> Context | None:
        return self.runner.context(step) if samples else None
