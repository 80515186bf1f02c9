"""A document step applied batch by batch: the one algorithm every backend runs on the client side.

A backend reads the batches (a server in ``_id`` order from its last checkpoint, a dump folder its file
from the start) and offers a :class:`DocumentStore`: the context a batch's transforms read, a write that
takes only where a document is still the version read, and the current versions of those it did not.
This module decides which documents a batch gives the step (its pending filter: a document already in the
new shape is left as it is), transforms them, counts those the transform leaves as they were, and takes
again, from the version now stored, each document whose write lost a race with the application, at most
``CONFLICT_ROUNDS`` times. Steps computed inside the server do not come here
(``server/in_server_steps.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple, Protocol

from mongopat.errors import OperationFailed
from mongopat.migrate.operations import OPERATIONS, transformer
from mongopat.migrate.runner import StepOutcome, count
from mongopat.migrate.steps import Step
from mongopat.migrate.transform_api import Context, Document, Result

# Rounds of reading again and writing again documents whose conditional write lost to the application's.
CONFLICT_ROUNDS = 5


class Version(NamedTuple):
    """A document as read: its record as the backend holds it (a server's BSON, kept for ``down``; a dump
    file's BSON document or line, written back as it was when the step leaves the document alone), and
    decoded."""

    raw: bytes | None
    document: Document


class Change(NamedTuple):
    """What the step makes of one version: the document that replaces it and its side documents."""

    version: Version
    result: Result


class DocumentStore(Protocol):
    """What a backend offers a document step's batches."""

    def context(self, step: Step, documents: list[Document]) -> Context:
        """The other documents the transforms of ``documents`` read (parents, references, aggregates)."""
        ...

    def write(
        self, step: Step, changes: list[Change], replay: bool, stats: dict[str, Any]
    ) -> tuple[int, list[Version]]:
        """Write each change while its document is still the version read (and its side documents, and
        what ``down`` needs); returns the writes sent and the versions whose write may not have taken
        (read again: those still in the old shape are taken again). ``replay``: side documents of an
        earlier attempt at these documents may exist already."""
        ...

    def current(self, step: Step, versions: list[Version], stats: dict[str, Any]) -> list[Version]:
        """The versions stored now of documents whose write did not take (those deleted meanwhile are
        gone from the list)."""
        ...


def refuse_existing(step: Step, exists: Callable[[str], bool]) -> None:
    """Before a document step's first write: the collections it creates must not hold documents yet (it
    would mix its documents with others, and ``down`` removes them). ``exists`` says whether one does."""
    clash = [name for name in step.created_collections() if exists(name)]
    if clash:
        raise OperationFailed(f"{step.name} would write into existing collection(s) {', '.join(clash)}")


def apply_batch(
    store: DocumentStore, step: Step, versions: list[Version], stats: dict[str, Any], replay: bool = False
) -> int:
    """Transform and write the documents of a batch still in the old shape; returns the writes sent."""
    operation = OPERATIONS[step.name]

    def attempt(todo: list[Version], again: bool) -> tuple[int, list[Version]]:
        return store.write(step, changes(store, step, todo, stats), replay or again, stats)

    pending = operation.pending_of([version.document for version in versions], step)
    written, left = conflict_rounds(
        [version for version, taken in zip(versions, pending, strict=True) if taken],
        attempt,
        lambda missed: store.current(step, missed, stats),
        lambda document: operation.is_pending(document, step),
        stats,
    )
    if left:
        count(stats, "conflicts_unresolved", len(left))  # a server's catch-up passes take them
    return written


def conflict_rounds(
    todo: list[Version],
    attempt: Callable[[list[Version], bool], tuple[int, list[Version]]],
    current: Callable[[list[Version]], list[Version]],
    is_pending: Callable[[Document], bool],
    stats: dict[str, Any],
) -> tuple[int, list[Version]]:
    """``attempt(todo, again)`` writes the documents of ``todo`` (the versions read) and returns the writes
    sent and the versions whose write may not have taken; those still to write once read again
    (``current``, then ``is_pending``) are attempted again, at most ``CONFLICT_ROUNDS`` times (``again``: a
    later round), each round counted in ``conflicts``. Every conditional write on the client side goes
    so: a document step's, the bucket step's moves, and ``down``'s. Returns the writes sent and the
    versions still to write after the last round (their write kept losing to the application's)."""
    written = 0
    for round_number in range(CONFLICT_ROUNDS + 1):
        if not todo:
            break
        if round_number:
            count(stats, "conflicts", len(todo))
        sent, missed = attempt(todo, round_number > 0)
        written += sent
        # Every conditional write took (the usual case): nothing to read again.
        todo = [version for version in current(missed) if is_pending(version.document)] if missed else []
    return written, todo


def changes(store: DocumentStore, step: Step, versions: list[Version], stats: dict[str, Any]) -> list[Change]:
    """The step's transform of each version; one it leaves as it was, with nothing to write beside it (a
    reference with nothing to copy), is only counted."""
    ctx = store.context(step, [version.document for version in versions])
    apply = transformer(step)
    found = []
    for version in versions:
        result = apply(version.document, ctx)
        if result.document == version.document and not result.side:
            count(stats, "unchanged")
            continue
        found.append(Change(version, result))
    return found


def apply_batches(
    store: DocumentStore,
    step: Step,
    batches: Iterable[list[Version]],
    outcome: StepOutcome,
    after: Callable[[list[Version], int], None],
) -> None:
    """Every batch through :func:`apply_batch`, then ``after(batch, writes sent)`` (the backend's
    checkpoint and progress). The first batch may be one an interrupted run had begun to write."""
    for number, batch in enumerate(batches):
        written = apply_batch(store, step, batch, outcome.stats, replay=number == 0)
        outcome.read += len(batch)
        outcome.written += written
        after(batch, written)
