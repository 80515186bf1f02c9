"""Data sources: one interface (:class:`Source`), one implementation per backend."""

from __future__ import annotations

from dataclasses import dataclass

from mongopat.errors import InputError
from mongopat.sources.base import CollectionStats, DocumentStream, IndexInfo, Sampling, Source
from mongopat.sources.dump import DumpSource
from mongopat.sources.mongo import DEFAULT_MAX_TIME_MS, DEFAULT_TIMEOUT_MS, MongoSource

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


def open_source(spec: SourceSpec) -> Source:
    if spec.uri and spec.dump:
        raise InputError("give either --uri or --dump, not both")
    if spec.dump:
        return DumpSource(spec.dump, spec.db, seed=spec.seed)
    if spec.uri:
        return MongoSource(
            spec.uri,
            spec.db,
            timeout_ms=spec.timeout_ms,
            max_time_ms=spec.max_time_ms,
            read_preference=spec.read_preference,
        )
    raise InputError("no data source", hint="pass --dump DIR (a mongoexport/mongodump folder) or --uri mongodb://...")
