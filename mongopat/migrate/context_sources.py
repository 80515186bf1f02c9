"""Where steps read the other documents their transforms need (:class:`~mongopat.migrate.transform_api.
ContextSource`): a database (a server, the embedded engine, the guide's scratch copy) and the placeholders of
a preview. A dump folder's reads its files (``dump_folder/runner.py``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mongopat.migrate.transform_api import Document


class DatabaseDocuments:
    """Documents read from a database. With ``kept``, whole-collection reads are kept there and served
    again (a tree's parent map: one scan a pass over the collection, not one a batch); the runner empties
    it when documents written since must be seen."""

    def __init__(self, db: Any, kept: dict[Any, list[Document]] | None = None) -> None:
        self.db = db
        self.kept = kept

    def documents(
        self, collection: str, field: str | None, values: list[Any] | None, fields: list[str]
    ) -> Iterable[Document]:
        projection = dict.fromkeys([*fields, *([field] if field else [])], 1)
        if field is not None:
            return self.db[collection].find({field: {"$in": values}} if values is not None else {}, projection)
        if self.kept is None:
            return self.db[collection].find({}, projection)
        key = (collection, tuple(fields))
        if key not in self.kept:
            self.kept[key] = list(self.db[collection].find({}, projection))
        return self.kept[key]


class Placeholders:
    """What a preview (``migrate plan``, the HTML report) shows for other documents: one for each value
    asked, its fields ``<collection.field>``; none for a whole collection."""

    def documents(
        self, collection: str, field: str | None, values: list[Any] | None, fields: list[str]
    ) -> Iterable[Document]:
        if field is None:
            return []
        return [{field: value, **{name: f"<{collection}.{name}>" for name in fields}} for value in values or []]
