"""The parts of one export file read by several processes at once, which take work from each other.

Each process reads its part a chunk at a time. A process done with its part takes the second half of
what is left of the part with the most left (:meth:`SharedParts.steal`), so that none waits idle while
another still reads: on a shared host, one of two processes often runs much slower than the other. What
each part still has to read lives in memory the processes share (inherited when they are forked), under
a lock.

Only mongoexport files (one document a line) are shared: a cut is moved to the next line start by reading
a line. BSON files have no such mark to find a document boundary from the middle.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mongopat.sources.dump import FilePart

# A part is only split when this many bytes of it are left, so that the stolen half is worth what a steal
# costs: the thief pickles its analysis, which the parent unpickles and merges at the end (50 to 100 ms
# together on the benchmark's orders, where two busy processes read a mebibyte in about 40 ms each).
MIN_STEAL_BYTES = 4 * 2**20

# SharedParts by key: a forked worker finds its parts' shared state here (it cannot be pickled to it).
_REGISTRY: dict[int, SharedParts] = {}
_KEYS = itertools.count(1)


class SharedParts:
    """Byte ranges of ``path`` being read by several processes: per part the next byte to read and the end.

    The owner of a part asks for its next chunk (:meth:`claim`) and says where the chunk, completed to a
    whole line, ended (:meth:`reached`). A thief moves a part's end back to a line start at or after the
    owner's claimed position (:meth:`steal`), so the owner never reads past it.
    """

    def __init__(self, path: Path, parts: list[FilePart], context: Any) -> None:
        self.path = path
        self.key = next(_KEYS)
        # [next, end] of each part, as 64-bit integers in shared memory.
        self._positions = context.Array("q", [bound for part in parts for bound in (part.start, part.end)])
        self.parts = [replace(part, shared=self.key, index=index) for index, part in enumerate(parts)]

    def __enter__(self) -> SharedParts:
        _REGISTRY[self.key] = self
        return self

    def __exit__(self, *exc: object) -> None:
        _REGISTRY.pop(self.key, None)

    def claim(self, index: int, size: int) -> int:
        """How many bytes part ``index`` reads next (at most ``size``; 0 once it has reached its end)."""
        positions = self._positions
        with positions.get_lock():
            start, end = positions[2 * index], positions[2 * index + 1]
            if start >= end:
                return 0
            stop = min(start + size, end)
            positions[2 * index] = stop
        return stop - start

    def reached(self, index: int, position: int) -> None:
        """Part ``index`` has read up to ``position`` (its claim, completed to the end of a line)."""
        positions = self._positions
        with positions.get_lock():
            positions[2 * index] = position

    def steal(self, thief: int) -> FilePart | None:
        """Take the second half of what is left of the part with the most left (not ``thief``'s own): a new
        part, read by the thief alone. None when no part has :data:`MIN_STEAL_BYTES` left."""
        from mongopat.sources.dump import FilePart

        positions = self._positions
        for _attempt in range(3):  # another thief may move the same end between the two locks
            with positions.get_lock():
                victims = [i for i in range(len(self.parts)) if i != thief]
                victim = max(victims, key=lambda i: positions[2 * i + 1] - positions[2 * i], default=None)
                if victim is None:
                    return None
                start, end = positions[2 * victim], positions[2 * victim + 1]
            if end - start < MIN_STEAL_BYTES:
                return None
            cut = _line_start(self.path, start + (end - start) // 2)
            with positions.get_lock():
                # The owner reads on meanwhile: the cut must still lie ahead of what it has claimed.
                if positions[2 * victim + 1] == end and positions[2 * victim] <= cut < end:
                    positions[2 * victim + 1] = cut
                    return FilePart(cut, end, None)
        return None


def lookup(key: int) -> SharedParts:
    return _REGISTRY[key]


def _line_start(path: Path, position: int) -> int:
    """The first line start at or after ``position`` (> 0)."""
    with path.open("rb") as handle:
        handle.seek(position - 1)
        handle.readline()
        return handle.tell()
