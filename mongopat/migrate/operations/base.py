"""What an online document step is beyond its transform: which documents are still in the old shape (a
query and the same test in Python), and its inverse on a document the application changed after ``up``.

``pending`` returns a MongoDB filter; ``is_pending`` answers the same question for one document in hand (the
runner reads documents once and must not ask the server again per document). ``inverse`` receives the
document as it is now and the original the step transformed, and returns the document in the old shape that
keeps what the application wrote since, or None when it cannot (the runner then leaves the document as it is
and reports it). ``side`` holds, per document ``_id``, the documents the step wrote to other collections
(subset's full list, outlier's overflow pages), for steps whose inverse merges them back.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar

from mongopat.migrate.steps import Step
from mongopat.migrate.transforms import Document, _has, _pop_path, _set_path, get_path

_MISSING = object()


class DocumentOperation:
    """The online protocol of one document step type; subclasses live one per module."""

    name: ClassVar[str]
    # Collections (parameter names) whose documents, keyed by ``parentId``, the inverse needs.
    side_collections: ClassVar[tuple[str, ...]] = ()

    def pending(self, step: Step) -> dict[str, Any]:
        raise NotImplementedError

    def is_pending(self, doc: Document, step: Step) -> bool:
        raise NotImplementedError

    def inverse(self, current: Document, original: Document, step: Step, side: list[Document]) -> Document | None:
        raise NotImplementedError


class AddsFields(DocumentOperation):
    """A step that adds fields (computed, versions, ancestors...): pending while the first is missing; the
    inverse gives each added field back its original value, or removes it when the original had none."""

    def added(self, step: Step) -> list[str]:
        raise NotImplementedError

    def pending(self, step: Step) -> dict[str, Any]:
        return {self.added(step)[0]: {"$exists": False}}

    def is_pending(self, doc: Document, step: Step) -> bool:
        return not _has(doc, self.added(step)[0])

    def inverse(self, current: Document, original: Document, step: Step, side: list[Document]) -> Document | None:
        result = copy.deepcopy(current)
        for path in self.added(step):
            restore_field(result, original, path)
        return result


def restore_field(document: Document, original: Document, path: str) -> None:
    """``path`` in ``document`` as it was in ``original``: its value, or absent."""
    if _has(original, path):
        _set_path(document, path, copy.deepcopy(get_path(original, path)))
    else:
        _pop_path(document, path)
