"""What every data source offers to the analysis: one interface, one implementation per backend."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

DEFAULT_TIMEOUT_MS = 5000  # how long to wait for an unreachable server
DEFAULT_MAX_TIME_MS = 60_000  # maxTimeMS sent with every read command


@dataclass
class CollectionStats:
    count: int | None = None
    count_exact: bool = False
    size_bytes: int | None = None
    storage_bytes: int | None = None
    avg_document_bytes: float | None = None
    index_bytes: int | None = None
    sharded: bool = False
    shard_key: dict[str, Any] | None = None
    # Sharded collections: documents per shard (collStats) and chunk ranges (config.chunks).
    shards: dict[str, int] = field(default_factory=dict)
    chunks: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # A time-series collection: its options and what its buckets hold (timeseries.buckets.BucketFigures).
    timeseries: dict[str, Any] | None = None


@dataclass
class IndexInfo:
    name: str
    key: list[tuple[str, Any]]
    unique: bool = False
    sparse: bool = False
    ttl_seconds: int | None = None
    partial: dict[str, Any] | None = None
    hidden: bool = False
    collation: dict[str, Any] | None = None
    usage_ops: int | None = None
    usage_since: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "key": [[name, direction] for name, direction in self.key],
            "unique": self.unique,
            "sparse": self.sparse,
            "ttl_seconds": self.ttl_seconds,
            "partial": self.partial,
            "hidden": self.hidden,
            "collation": self.collation,
            "usage": None if self.usage_ops is None else {"ops": self.usage_ops, "since": self.usage_since},
        }


@dataclass
class Sampling:
    """How a collection's documents were chosen; recorded in the report."""

    method: str  # "$sample", "scan", "file", "file-reservoir"
    requested: int | None
    note: str = ""
    documents: int = 0
    # True when the documents come in insertion (natural) order, so position can stand in for time.
    natural_order: bool = False
    # Every document of the collection was read (sketches hold all of it).
    complete: bool = False


class DocumentStream:
    """An iterator of ``(document, bson_size)`` with the :class:`Sampling` that produced it.

    With ``decoded=False`` a source may instead yield *batches* of documents that still hold Extended JSON
    wrappers, ``(documents, record_bytes)``: it then sets ``undecoded``. ``record_bytes`` is what the
    batch's records take in the file (0 when not known), which bounds memory; the caller decodes the
    documents (see ``analysis.schema.walk_values``) and measures their BSON size. ``locate`` names where
    the stream's document at an index (from 0) is, for error messages ("orders.json:12"), when the source
    can tell.
    """

    def __init__(
        self,
        sampling: Sampling,
        documents: Iterator[Any],
        undecoded: bool = False,
        locate: Callable[[int], str] | None = None,
    ) -> None:
        self.sampling = sampling
        self._documents = documents
        self.undecoded = undecoded
        self.locate = locate

    def __iter__(self) -> Iterator[Any]:
        if self.undecoded:
            for batch in self._documents:
                self.sampling.documents += len(batch[0])
                yield batch
            return
        for item in self._documents:
            self.sampling.documents += 1
            yield item


class Source(ABC):
    """A database to read: a live deployment (pymongo, mongomock) or a dump folder."""

    kind: str
    location: str  # safe to print: passwords removed
    database: str

    @abstractmethod
    def collections(self) -> list[str]:
        """Names of the non-system collections, sorted."""

    @abstractmethod
    def stats(self, name: str) -> CollectionStats: ...

    @abstractmethod
    def indexes(self, name: str) -> tuple[list[IndexInfo], list[str]]:
        """The indexes, and notes on what could not be read."""

    @abstractmethod
    def documents(self, name: str, sample_size: int | None, decoded: bool = True, part: Any = None) -> DocumentStream:
        """Documents to analyse; ``sample_size`` None means the source's default; ``part`` one of
        :meth:`partitions`."""

    def partitions(self, name: str, parts: int) -> list[Any] | None:
        """Independent pieces of a collection that workers may read in parallel; None when not splittable."""
        return None

    def share_parts(self, name: str, parts: list[Any], context: Any) -> Any:
        """The :meth:`partitions` as parts that processes forked from the multiprocessing ``context`` read
        while taking work from each other (a :class:`~mongopat.sources.shared_parts.SharedParts`); None
        when they cannot, and each reads its own part to the end."""
        return None

    @abstractmethod
    def count_existing_ids(self, name: str, values: list[Any]) -> int | None:
        """How many of ``values`` are ``_id``s in collection ``name``; None when it cannot tell."""

    def close(self) -> None:  # noqa: B027 - optional hook
        pass

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
