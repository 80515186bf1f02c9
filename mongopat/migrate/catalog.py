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
    from mongopat.timeseries.options import TimeSeriesOptions


class Catalog:
    """The collection operations of one backend, for one step (``stats``: the step's recorded figures)."""

    def __init__(self, stats: dict[str, Any] | None = None) -> None:
        self.stats: dict[str, Any] = dict(stats or {})
        self.read = 0
        self.written = 0

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

    def copy_measurements(self, collection: str, to: str, options: TimeSeriesOptions) -> None:
        """Every document of ``collection`` into the time-series collection ``to``, none twice (a reading
        has no unique ``_id`` there), resuming from the step's checkpoint; documents without a date in the
        time field stay out, counted in the step's ``refused``."""
        raise NotImplementedError

    def copy_back(self, to: str, collection: str) -> None:
        """The readings of ``to`` whose ``_id`` ``collection`` lacks (the application's since), into it."""
        raise NotImplementedError

    def missing_measurements(self, collection: str, to: str, time: str) -> int:
        """Documents of ``collection`` with a date in ``time`` that no reading of ``to`` stands for (by
        ``_id``, or by count where the backend cannot match them one by one cheaply)."""
        raise NotImplementedError

    def drop_timeseries(self, name: str) -> None:
        raise NotImplementedError

    def reverted(self) -> None:
        """Called after a step was undone: tidy what only this backend made for it."""


def index_name(keys: dict[str, Any]) -> str:
    """The name MongoDB gives an index when none is given (``a_1_b_-1``)."""
    return "_".join(f"{field}_{direction}" for field, direction in keys.items())


__all__ = ["Catalog", "index_name"]
