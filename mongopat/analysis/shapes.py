"""Shape drift: how the set of top-level fields changes over insertion time.

Each distinct set of top-level field names is a *shape*; for each we keep how many documents had it and
the first and last time it was seen (by ``_id`` timestamp, else by position in a natural-order scan).
A field *appeared* when it is absent from the oldest documents and present later, and *vanished* when
it stops appearing before the newest documents.
"""

from __future__ import annotations

from mongopat.analysis.timeline import iso

# Beyond this many distinct shapes, the rest are counted but not tracked (memory bound).
SHAPE_LIMIT = 256
# A field appeared/vanished when its first/last sighting is this share of the span inside the range.
EDGE_SHARE = 0.05


class ShapeTracker:
    __slots__ = ("shapes", "overflow", "clock")

    def __init__(self) -> None:
        # frozenset of field names -> [count, first, last]
        self.shapes: dict[frozenset[str], list[float]] = {}
        self.overflow = 0
        self.clock: str | None = None

    def add_many(self, fields: frozenset[str], whens: list[float]) -> None:
        """Count documents of one shape, created at ``whens``."""
        entry = self.shapes.get(fields)
        if entry is None:
            if len(self.shapes) >= SHAPE_LIMIT:
                self.overflow += len(whens)
                return
            self.shapes[fields] = [len(whens), min(whens), max(whens)]
            return
        entry[0] += len(whens)
        entry[1] = min(entry[1], min(whens))
        entry[2] = max(entry[2], max(whens))

    def merge(self, other: ShapeTracker, offset: float = 0) -> None:
        """Fold in the shapes of a later part of the stream; ``offset`` shifts positions (position clock)."""
        self.clock = self.clock or other.clock
        shift = offset if other.clock == "position" else 0
        self.overflow += other.overflow
        for fields, (count, first, last) in other.shapes.items():
            entry = self.shapes.get(fields)
            if entry is None:
                if len(self.shapes) >= SHAPE_LIMIT:
                    self.overflow += int(count)
                    continue
                self.shapes[fields] = [count, first + shift, last + shift]
            else:
                entry[0] += count
                entry[1] = min(entry[1], first + shift)
                entry[2] = max(entry[2], last + shift)

    def to_dict(self) -> dict:
        if not self.shapes:
            return {
                "clock": self.clock,
                "shapes": [],
                "appeared": [],
                "vanished": [],
                "untracked_documents": 0,
            }
        start = min(entry[1] for entry in self.shapes.values())
        end = max(entry[2] for entry in self.shapes.values())
        span = end - start
        fmt = iso if self.clock == "_id" else (lambda x: x)
        first_seen: dict[str, float] = {}
        last_seen: dict[str, float] = {}
        seen_in: dict[str, int] = {}
        for fields, (count, first, last) in self.shapes.items():
            for name in fields:
                first_seen[name] = min(first_seen.get(name, first), first)
                last_seen[name] = max(last_seen.get(name, last), last)
                seen_in[name] = seen_in.get(name, 0) + int(count)
        appeared, vanished = [], []
        if span > 0:
            margin = span * EDGE_SHARE
            for name in sorted(first_seen):
                if first_seen[name] > start + margin:
                    appeared.append({"field": name, "first_seen": fmt(first_seen[name]), "documents": seen_in[name]})
                if last_seen[name] < end - margin:
                    vanished.append({"field": name, "last_seen": fmt(last_seen[name]), "documents": seen_in[name]})
        shapes = sorted(self.shapes.items(), key=lambda item: (item[1][1], -item[1][0]))
        return {
            "clock": self.clock,
            "shapes": [
                {"fields": sorted(fields), "documents": int(count), "first": fmt(first), "last": fmt(last)}
                for fields, (count, first, last) in shapes
            ],
            "appeared": appeared,
            "vanished": vanished,
            "untracked_documents": self.overflow,
        }
