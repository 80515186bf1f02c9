"""What share of a collection one condition of a read keeps, from the analysis report, with its basis.

The model (stated in every estimate's basis): an equality, or an ``$in`` of one value, keeps ``1 /
distinct`` of the documents; a field whose sampled values were all distinct is taken as unique in the
collection (a sample of a million-document collection sees only a thousand of its emails); a range on a
date field covers one hour (:data:`RANGE_SECONDS`) of it, an hour of the declared inserts where the access
file declares them, else an hour of the span the analysis saw; a range of unknown width and the filters an
index bounds loosely (``$ne``, ``$nin``, ``$exists``, a regular expression) keep everything. Unknown shares
make estimates high, never low: advice never rests on a share it made up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

RANGE_SECONDS = 3600


class Evidence(Protocol):
    """What the model reads of one collection (:class:`mongopat.rules.base.CollectionEvidence` has it)."""

    name: str

    @property
    def count(self) -> int: ...

    @property
    def documents_read(self) -> int: ...

    def field(self, path: str) -> dict[str, Any] | None: ...

    def profile(self, field_name: str) -> dict[str, Any] | None: ...


@dataclass
class Share:
    value: float | None  # None: not known (counts as the whole collection)
    basis: str

    @property
    def known(self) -> float:
        return 1.0 if self.value is None else self.value


class Selectivity:
    """Shares of one collection's documents, from its evidence and the declared inserts per second."""

    def __init__(self, evidence: Evidence | None, inserts_per_sec: float | None = None) -> None:
        self.evidence = evidence
        self.inserts_per_sec = inserts_per_sec

    @property
    def count(self) -> int | None:
        return self.evidence.count if self.evidence is not None else None

    def entry(self, path: str) -> dict[str, Any] | None:
        """The report's field for a query path, also where it runs through arrays (``items.sku`` is
        ``items[].sku`` in the report)."""
        if self.evidence is None:
            return None
        found = self.evidence.field(path)
        if found is not None:
            return found
        parts = path.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            head, tail = ".".join(parts[:cut]), ".".join(parts[cut:])
            if self.evidence.field(head + "[]") is not None or self.is_array(head):
                return self.evidence.field(f"{head}[].{tail}")
        return None

    def is_array(self, path: str) -> bool:
        found = self.evidence.field(path) if self.evidence is not None else None
        return bool(found and any(t["type"] == "array" for t in found.get("types", [])))

    def multikey(self, path: str) -> bool:
        """Whether an index on ``path`` is multikey: the field, or a sub-document on its path, holds arrays."""
        parts = path.split(".")
        if any(self.is_array(".".join(parts[:cut])) for cut in range(1, len(parts) + 1)):
            return True
        return "[]" in str((self.entry(path) or {}).get("path", ""))

    def values_per_document(self, path: str) -> float:
        """Values of ``path`` per document read: above 1 where it runs through arrays."""
        card = (self.entry(path) or {}).get("cardinality") or {}
        read = self.evidence.documents_read if self.evidence is not None else 0
        return card["values"] / read if read and card.get("values") and self.multikey(path) else 1.0

    def distinct(self, path: str) -> tuple[int | None, str]:
        if path == "_id" and self.count:
            return self.count, f"_id is unique in {self.count:,}"
        found = self.entry(path)
        card = (found or {}).get("cardinality")
        if not card or not card.get("distinct"):
            return None, ""
        distinct = int(card["distinct"])
        count = self.count or 0
        if card.get("all_distinct") and count > distinct:
            return count, f"every sampled {path} distinct: unique in {count:,}"
        return distinct, f"1/{distinct:,} distinct"

    def share(self, path: str, op: str) -> Share:
        if op in ("eq", "in", "elemMatch"):
            if self.entry(path) is None and path != "_id":
                return Share(None, f"{path} is not in the data")
            distinct, how = self.distinct(path)
            if not distinct:
                return Share(None, f"{path}: distinct values not measured")
            one = "one value" if op != "in" else "one value of the $in"
            per_document = self.values_per_document(path)
            if per_document > 1:  # an array: a document holds several values, and matches any of them
                share = min(1.0, per_document / distinct)
                return Share(share, f"{one} of {path} ({how}, {per_document:,.3g} values per document)")
            return Share(1 / distinct, f"{one} of {path} ({how})")
        if op in ("range", "gt", "gte", "lt", "lte"):
            profile = self.evidence.profile(path) if self.evidence is not None else None
            count = self.count or 0
            if profile and self.inserts_per_sec and count:
                share = min(1.0, self.inserts_per_sec * RANGE_SECONDS / count)
                return Share(share, f"one hour of {path} at the declared {self.inserts_per_sec:,g} inserts/s")
            if profile and profile.get("span_seconds"):
                share = min(1.0, RANGE_SECONDS / profile["span_seconds"])
                return Share(share, f"one hour of {path} in the data's span")
            return Share(None, f"a range of {path} of unknown width (counted as every document)")
        if op == "text":
            return Share(None, "a text search (share not estimated)")
        if op == "geo":
            return Share(None, "a geo filter (share not estimated)")
        return Share(None, f"{op} on {path} (keeps most documents)")
