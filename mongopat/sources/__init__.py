"""Data sources: one interface (:class:`Source`), one implementation per backend."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mongopat.errors import InputError
from mongopat.sources.base import (
    DEFAULT_MAX_TIME_MS,
    DEFAULT_TIMEOUT_MS,
    CollectionStats,
    DocumentStream,
    IndexInfo,
    Sampling,
    Source,
)

__all__ = [
    "CollectionStats",
    "DocumentStream",
    "DumpSource",
    "IndexInfo",
    "MongoSource",
    "Sampling",
    "Source",
    "SourceSpec",
    "open_source",
]


@dataclass
class SourceSpec:
    """The source options every command that reads data accepts."""

    uri: str | None = None
    dump: str | None = None
    db: str | None = None
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    max_time_ms: int = DEFAULT_MAX_TIME_MS
    read_preference: str = "secondaryPreferred"
    seed: int = 0


def __getattr__(name: str) -> Any:
    # The backends load on first use: pymongo alone takes ~0.15 s to import, and a dump folder never needs it.
    if name == "DumpSource":
        from mongopat.sources.dump import DumpSource

        return DumpSource
    if name == "MongoSource":
        from mongopat.sources.mongo import MongoSource

        return MongoSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_source(spec: SourceSpec) -> Source:
    if spec.uri and spec.dump:
        raise InputError("give either --uri or --dump, not both")
    if spec.dump:
        from mongopat.sources.dump import DumpSource

        return DumpSource(spec.dump, spec.db, seed=spec.seed)
    if spec.uri:
        from mongopat.sources.mongo import MongoSource

        return MongoSource(
            spec.uri,
            spec.db,
            timeout_ms=spec.timeout_ms,
            max_time_ms=spec.max_time_ms,
            read_preference=spec.read_preference,
        )
    raise InputError("no data source", hint="pass --dump DIR (a mongoexport/mongodump folder) or --uri mongodb://...")
