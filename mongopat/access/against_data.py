"""The access file checked against the data it describes.

A collection the file names and the data lacks is a typo until said otherwise: an input error with the
nearest name, unless the file marks it ``created_by_migration``. A field a read or a write names that no
document holds is a warning with the nearest path: it may be one a planned migration adds (``ancestors``
before the tree step), or a typo that would make every figure of that read wrong.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from typing import Any

from mongopat.access.model import AccessFile, CollectionAccess
from mongopat.errors import InputError


def check_against_data(access: AccessFile, report: dict[str, Any]) -> list[str]:
    """Raise :class:`InputError` for collections the data lacks; the warnings on fields, one a line."""
    present = {c["name"]: c for c in report.get("collections", [])}
    missing = []
    for name, spec in access.collections.items():
        if name in present or spec.created_by_migration:
            continue
        close = difflib.get_close_matches(name, sorted(present), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        missing.append(f"{spec.location or access.path}: collections.{name}: not in the data{hint}")
    if missing:
        raise InputError(
            "; ".join(missing),
            hint="fix the name, or mark a collection a migration creates with 'created_by_migration: true'",
        )
    warnings = []
    for name, spec in access.collections.items():
        collection = present.get(name)
        if collection is None:
            continue
        paths = _paths(collection)
        for where, field in _named_fields(spec):
            if field in paths or any(field.startswith(p + ".") for p in _opaque(collection)):
                continue
            close = difflib.get_close_matches(field, sorted(paths), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else " (a field a migration adds?)"
            warnings.append(f"{where}: field '{field}' of {name} is in no document of the data{hint}")
    return warnings


def _paths(collection: dict[str, Any]) -> set[str]:
    """Field paths as queries write them: array elements reached by the dotted path (``items.price``)."""
    return {f["path"].replace("[]", "") for f in collection.get("fields", [])} | {"_id"}


def _opaque(collection: dict[str, Any]) -> list[str]:
    """Paths below which any name is data (maps keyed by ids): a query may name one of their keys."""
    return [f["path"].replace("[]", "") for f in collection.get("fields", []) if f.get("map")]


def _named_fields(spec: CollectionAccess) -> Iterator[tuple[str, str]]:
    where = str(spec.location) if spec.location else f"collections.{spec.name}"
    for query in spec.queries:
        at = f"{query.location or where}: queries.{query.name}"
        for field in [*query.filter, *query.sort, *query.fields]:
            if field not in query.derive:  # a derived field is computed by the read, not stored
                yield at, field
        if query.lookup is not None:
            yield at, query.lookup.local
        if query.aggregate is not None:
            yield at, query.aggregate.local
        if query.embed is not None:
            yield at, query.embed.field
    for counter in spec.counters:
        yield f"{where}: counters", counter.field
