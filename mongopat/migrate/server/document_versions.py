"""Conditional writes on a live server: document versions as read, and filters that match only them.

The runner rewrites or deletes a document only while it is exactly the version it read; a write that
finds the document changed lost a race with the application and is tried again from the current version.
A backup keeps the bytes read and a digest of what replaced them, so that ``down`` can tell a document
left alone since ``up`` from one the application changed.
"""

from __future__ import annotations

import hashlib
from typing import Any

import bson
from pymongo import ReplaceOne
from pymongo.errors import BulkWriteError

from mongopat.migrate.document_batches import Version
from mongopat.migrate.transform_api import Document


def raw_bytes(document: Any) -> bytes:
    return bytes(document.raw) if hasattr(document, "raw") else bson.encode(document)


def decoded(document: Any) -> Document:
    return bson.decode(raw_bytes(document))


def decoded_id(document: Any) -> Any:
    if hasattr(document, "raw"):
        return bson.decode(bytes(document.raw))["_id"]
    return document["_id"]


def versions_of(documents: Any) -> list[Version]:
    """Documents as read, each with its BSON bytes (what a backup keeps) and decoded."""
    return [Version(raw, bson.decode(raw)) for raw in map(raw_bytes, documents)]


def digest(raw: bytes) -> bytes:
    """A document version's fingerprint. Plain bytes: pymongo stores them as binary subtype 0 and reads them
    back as ``bytes``, and a ``Binary`` never equals ``bytes`` in pymongo, whatever their content."""
    return hashlib.sha1(raw, usedforsecurity=False).digest()


def left_alone(current: bytes, kept: Any) -> bool:
    """Whether a document (its bytes now) is still the version ``up`` wrote in place of the backup ``kept``.
    A backup made by mongopat holds a digest, compared as bytes (a server returns ``bytes``, mongomock
    whatever object it was given: a ``Binary`` where an earlier mongopat wrote one); one made inside the
    server (``in_server_steps.py``) holds the document itself."""
    after = kept.get("after")
    if after is None or kept.get("raced"):  # raced: changed between its backup and its rewrite inside the server
        return False
    if isinstance(after, bytes):
        return bytes(after) == digest(current)
    return raw_bytes(after) == current


def original_bytes(kept: Any) -> bytes:
    """The bytes of the version a backup kept: ``raw``, or the ``original`` document of a backup made
    inside the server (read as raw BSON, it is the server's own bytes)."""
    if kept.get("raw") is not None:
        return bytes(kept["raw"])
    return raw_bytes(kept["original"])


def unchanged_since(doc: Document) -> dict[str, Any]:
    """A filter that matches ``doc`` only while it is exactly this version (every field, in order)."""
    return {"_id": doc["_id"], "$expr": {"$eq": ["$$ROOT", {"$literal": doc}]}}


def backup_id(migration_id: str, step: int, collection: str, document_id: Any) -> dict[str, Any]:
    return {"m": migration_id, "s": step, "c": collection, "id": document_id}


def step_backups(migration_id: str, step: int) -> dict[str, Any]:
    """The filter of the backups one step of a migration keeps in ``mongopat_backup``."""
    return {"_id.m": migration_id, "_id.s": step}


def backup(key: dict[str, Any], raw: bytes, after: bytes) -> dict[str, Any]:
    """What ``down`` needs of one document: the bytes read, and a digest of what replaced them."""
    return {"_id": key, "raw": raw, "after": digest(after)}


def keep_backups(collection: Any, backups: list[dict[str, Any]]) -> None:
    """Insert backups; one that exists already (a replayed batch, a lost race) is replaced by the version
    now transformed. One command when nothing was kept before."""
    try:
        collection.insert_many(backups, ordered=False)
    except BulkWriteError as exc:
        errors = exc.details.get("writeErrors", [])
        if any(error.get("code") != 11000 for error in errors):
            raise
        again = [backups[error["index"]] for error in errors]
        collection.bulk_write([ReplaceOne({"_id": b["_id"]}, b, upsert=True) for b in again], ordered=False)
