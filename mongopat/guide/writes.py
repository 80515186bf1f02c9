"""A write as the driver commands the application sends, before and after a migration.

A command is ``{"collection": name, "command": "insertOne" | "insertMany" | "updateOne" | "updateMany" |
"deleteOne", ...its arguments}``
(``document``, ``documents``, ``filter``, ``update``, ``upsert``), with ``{"$param": ...}`` placeholders;
``probability`` says the application sends it only that share of the times (the approximation pattern);
``unless_matched`` that it is sent only when the commands before it (since the last one without the mark)
matched no document. :func:`run` sends bound commands to a database (pymongo's interface, mongomock's too).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mongopat.guide.placeholders import param

# (before values, after values) for one sampled document; None when the sample cannot exercise the write.
Binder = Callable[[Any], "tuple[dict[str, Any], dict[str, Any]] | None"]


@dataclass
class WritePlan:
    collection: str
    operation: str  # insert, update, counter, insert_related, update_referenced, update_derived, revision
    description: str
    before: list[dict[str, Any]]
    after: list[dict[str, Any]]
    parameters: dict[str, str] = field(default_factory=dict)  # name -> how the application gets the value
    per_sec: float | None = None
    documents_written: dict[str, float | None] = field(default_factory=dict)
    # How the proof binds the placeholders from a sampled document (not part of the guide's output).
    binder: Binder | None = None
    # Approximate writes are proven by their totals over many writes, not one by one.
    approximate: bool = False
    # The documents the proof samples to bind it (those holding the field a write changes).
    sample_filter: dict[str, Any] | None = None


def command(collection: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"collection": collection, "command": name, **arguments}


def insert_one(collection: str) -> dict[str, Any]:
    return command(collection, "insertOne", document=param("document"))


def run(db: Any, commands: list[dict[str, Any]]) -> int:
    """Send bound commands; returns the documents they wrote (inserted, modified or upserted). A command
    marked ``unless_matched`` is sent only when no command since the last unmarked one matched a document
    (the next place to try: the last overflow page, then a new one)."""
    written = 0
    matched = False
    for spec in commands:
        if spec.get("unless_matched") and matched:
            continue
        target = db[spec["collection"]]
        name = spec["command"]
        if name == "insertOne":
            target.insert_one(copy.deepcopy(spec["document"]))
            written, hit = written + 1, True
        elif name == "insertMany":
            if spec["documents"]:
                target.insert_many(copy.deepcopy(spec["documents"]))
            written, hit = written + len(spec["documents"]), True
        elif name in ("updateOne", "updateMany"):
            method = target.update_one if name == "updateOne" else target.update_many
            result = method(spec["filter"], spec["update"], upsert=bool(spec.get("upsert")))
            written += result.modified_count + (1 if result.upserted_id is not None else 0)
            hit = bool(result.matched_count) or result.upserted_id is not None
        elif name == "deleteOne":
            deleted = target.delete_one(spec["filter"]).deleted_count
            written, hit = written + deleted, bool(deleted)
        else:  # pragma: no cover - every command a guide writes is one of the above
            raise ValueError(f"unknown command {name!r}")
        matched = (matched or hit) if spec.get("unless_matched") else hit
    return written


def moved_inserts(collection: str, into: str, evidence: Any, description: str) -> list[WritePlan]:
    """The declared inserts of ``collection``, into ``into`` after a step that gives its documents another
    collection (none when none are declared)."""
    per_sec = evidence.per_sec(collection, "inserts")
    return [same_insert(collection, into, description, per_sec)] if per_sec else []


def same_insert(collection: str, into: str, description: str, per_sec: float) -> WritePlan:
    """An insert whose document does not change: into ``collection`` today, into ``into`` after (the same
    collection, or its new name)."""

    def binder(sample: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        document = sample.fresh()
        return {"document": document}, {"document": document}

    return WritePlan(
        collection,
        "insert",
        description,
        [insert_one(collection)],
        [insert_one(into)],
        {"document": "the document"},
        per_sec,
        {"before": 1, "after": 1},
        binder,
    )


def insert_write(step: Any, new_shape: str, per_sec: float | None, side_documents: float | None = 1.0) -> WritePlan:
    """An insert into the step's collection: after the migration the document is inserted in the new shape,
    with the documents the step keeps in other collections (a history revision, the full list, overflow):
    ``side_documents`` of them on average (None: unknown)."""
    side = step.created_collections()
    after = [command(step.collection, "insertOne", document=param("document", shape="new"))]
    after += [command(name, "insertMany", documents=param(f"{name}Documents", shape="new")) for name in side]
    parameters = {"document": f"the document in the new shape: {new_shape}"}
    parameters.update({f"{name}Documents": f"its documents in {name}, as the step writes them" for name in side})

    def binder(sample: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        document = sample.fresh()
        result = sample.new_shape(document, step)
        after_values = {"document": result.document}
        after_values.update({f"{name}Documents": result.side.get(name, []) for name in side})
        return {"document": document}, after_values

    return WritePlan(
        step.collection,
        "insert",
        f"insert a document into {step.collection}",
        [insert_one(step.collection)],
        after,
        parameters,
        per_sec,
        {"before": 1, "after": (None if side_documents is None else round(1 + side_documents, 2)) if side else 1},
        binder,
    )


def changed(value: Any) -> Any:
    """A different value of the same kind, for a proof's update: numbers move by one, strings get a suffix,
    lists lose their last element (or repeat their first), booleans flip."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + " (changed)"
    if isinstance(value, list):
        return copy.deepcopy(value[:-1] if len(value) > 1 else value * 2)
    return "changed"


def scalar(value: Any) -> bool:
    return isinstance(value, (bool, int, float, str))
