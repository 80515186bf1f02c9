"""The ``_id``s that cut the documents a filter matches into parts of about as many documents each, for the
passes that split a collection among threads (``--workers``): the client side's ranges
(``DocumentSteps._ranges``) and the in-server pass's stretches (``stretches.planned``)."""

from __future__ import annotations

from typing import Any

from pymongo.collection import Collection


def id_cuts(collection: Collection[Any], where: dict[str, Any], parts: int, matching: int) -> list[Any]:
    """The ``_id``s (ascending, distinct) at which ``parts`` parts of the ``matching`` documents ``where``
    selects begin, the first part's excepted: one small sorted query per cut."""
    cuts: list[Any] = []
    for part in range(1, parts):
        skip = part * matching // parts
        for found in collection.find(where, {"_id": 1}, sort=[("_id", 1)], skip=skip, limit=1):
            if not cuts or found["_id"] != cuts[-1]:
                cuts.append(found["_id"])
    return cuts
