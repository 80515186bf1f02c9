"""What a backend does to collections as a whole: names, indexes, options, copies.

Collection steps (``create_index``, ``drop_index``, ``copy_collection``, ``rename_collection``,
``validator``) are written once, in their modules under ``mongopat/migrate/operations/``, against this
protocol; each backend implements it once, in its package: ``server/catalog.py`` with database commands,
``dump_folder/catalog.py`` with the files of a dump folder.

A catalog is made for one step of one migration: :meth:`Catalog.record` keeps the step's figures in the
changelog at once, so that what a destructive command needs to be undone (the spec of a dropped index,
a collection's previous validator) is saved before the command runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from mongopat.timeseries.options import TimeSeriesOptions
    from mongopat.timeseries.sync import Change, Digest
    from mongopat.timeseries.unwind import Readings


class Catalog:
    """The collection operations of one backend, for one step (``stats``: the step's recorded figures)."""

    def __init__(self, stats: dict[str, Any] | None = None) -> None:
        self.stats: dict[str, Any] = dict(stats or {})
        self.read = 0
        self.written = 0
        from mongopat.timeseries.sync import Digest

        self.inserted = Digest()  # readings a time-series copy inserted, in this run

    def record(self, **fields: Any) -> None:
        """Add ``fields`` to the step's figures and save them before anything else happens."""
        self.stats.update(fields)
        self._save()

    def _save(self) -> None:
        raise NotImplementedError

    def names(self) -> set[str]:
        """The collections that exist."""
        raise NotImplementedError

    def count(self, collection: str) -> int:
        raise NotImplementedError

    def indexes(self, collection: str) -> list[dict[str, Any]]:
        """Index specs (``key``, ``name`` and options), as the backend keeps them."""
        raise NotImplementedError

    def create_index(self, collection: str, spec: dict[str, Any]) -> str:
        """Create the index ``spec`` (``key`` and options; no ``name``: the backend's default); its name."""
        raise NotImplementedError

    #: Where an index the step wants was looked for, in what ``verify`` says of a missing one.
    INDEXES_KEPT_IN = ""

    def missing_indexes(self, wanted: list[tuple[str, Any]]) -> list[str]:
        """What ``verify`` says of each index in ``wanted`` (collection, keys: a step module's ``indexes()``)
        that its collection lacks: none of its indexes has those keys, or the name they give."""
        problems = []
        for collection, keys in wanted:
            key, name = list(dict(keys).items()), index_name(dict(keys))
            have = self.indexes(collection)
            if not any(spec.get("name") == name or list(dict(spec.get("key") or {}).items()) == key for spec in have):
                problems.append(f"{collection}: index {name} missing{self.INDEXES_KEPT_IN}")
        return problems

    def drop_index(self, collection: str, name: str) -> None:
        raise NotImplementedError

    def rename(self, collection: str, to: str) -> None:
        raise NotImplementedError

    def drop(self, collection: str) -> None:
        raise NotImplementedError

    def copy(self, collection: str, to: str) -> None:
        """Copy every document of ``collection`` into ``to``; safe to run again after a crash."""
        raise NotImplementedError

    def options(self, collection: str) -> dict[str, Any]:
        """The collection's options (``validator``, ``validationLevel``, ``validationAction``...)."""
        raise NotImplementedError

    def set_validation(self, collection: str, validator: dict[str, Any], level: str, action: str) -> None:
        """Replace the collection's validator (``{}``: none) with its level and action."""
        raise NotImplementedError

    def violations(self, collection: str, validator: dict[str, Any]) -> int | None:
        """Documents of ``collection`` that ``validator`` rejects; None when the backend cannot tell."""
        raise NotImplementedError

    # -- time-series collections (the timeseries step) ---------------------------------------------

    def create_timeseries(self, name: str, options: TimeSeriesOptions) -> None:
        """Create the time-series collection ``name``."""
        raise NotImplementedError

    #: Whether :meth:`copy_measurements` adds to what the time-series collection holds from the step's
    #: checkpoint (and counts what it added in :attr:`inserted`), rather than writing it whole.
    copies_incrementally = False

    def copy_measurements(
        self, collection: str, to: str, options: TimeSeriesOptions, source: Readings
    ) -> Digest | None:
        """Copy the readings of ``collection`` (``source`` tells them: its dated documents, or the dated
        elements of its hand-made buckets) into the time-series collection ``to``, none twice (a reading
        has no unique ``_id`` there), resuming from the step's
        checkpoint. Returns the digest of what ``to`` holds when the copy is known to agree with
        ``collection`` (nothing wrote either meanwhile), else None: the step then compares the two."""
        raise NotImplementedError

    def copied_through(self, collection: str) -> Any:
        """Once a copy agrees with ``collection``: its greatest ``_id``, from which the copy's next passes
        start (the readings inserted after it are the step's pending documents); None where a backend copies
        whole."""
        return None

    def readings(self, collection: str, time_field: str | None) -> Iterator[dict[str, Any]]:
        """The documents of ``collection`` holding a date in ``time_field`` (every one when None; of a
        time-series collection, its readings), decoded."""
        raise NotImplementedError

    def undated(self, collection: str, time_field: str) -> int:
        """Documents of ``collection`` without a date in ``time_field``: no time-series collection takes them."""
        raise NotImplementedError

    def write_readings(self, to: str, changes: Iterable[Change]) -> None:
        """Make the time-series collection ``to`` hold the truth's version of each change (a ``missing``
        reading inserted, one that ``differs`` replaced, an ``extra`` removed)."""
        raise NotImplementedError

    def documents(self, collection: str, ids: list[Any]) -> list[dict[str, Any]]:
        """The documents of ``collection`` with these ``_id``s, decoded."""
        raise NotImplementedError

    def write_source(self, collection: str, changes: Iterable[Change], expected: Callable[[Any], int | None]) -> int:
        """The same for an ordinary collection, each document changed only while it is still the version
        compared (``expected``: the hash it had then, by ``_id``); returns how many the application's
        writes overtook (left as they are)."""
        raise NotImplementedError

    def drop_timeseries(self, name: str) -> None:
        raise NotImplementedError

    def reverted(self) -> None:
        """Called after a step was undone: tidy what only this backend made for it."""


def index_name(keys: dict[str, Any]) -> str:
    """The name MongoDB gives an index when none is given (``a_1_b_-1``)."""
    return "_".join(f"{field}_{direction}" for field, direction in keys.items())


__all__ = ["Catalog", "index_name"]
