"""Cutting a file of lines into parts at chosen line numbers, and running work in other processes. Used
by the bucket step on mongoexport files and by its verification (which cuts files with
:func:`mongopat.sources.dump.partition_file`, as the analysis does)."""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from mongopat.errors import InputError, OperationFailed
from mongopat.sources.dump import FilePart, partition_file

# Folders (in the dump folder) where workers write their parts; a run that was killed leaves them behind,
# and the next run removes them once it holds the lock.
SPILL_PREFIX = ".mongopat-spill-"

# Files below this are read by one process: starting a worker and gathering its part costs more than it saves.
MIN_PARALLEL_BYTES = 4 * 1024 * 1024

T = TypeVar("T")


@dataclass(frozen=True)
class Part:
    """A run of whole lines of a file."""

    start: int  # byte offset of its first line
    first_line: int
    lines: int | None  # None: to the end of the file


def plan_parts(path: Path, parts: int, min_bytes: int, align: int, first_share: float = 1.0) -> list[Part]:
    """Cut a plain file into ``parts`` runs of lines whose first line numbers (less one) are multiples of
    ``align``; one part when the file is under ``min_bytes`` or compressed. The first part gets
    ``first_share`` of an even share (its reader may have other work too)."""
    size = path.stat().st_size
    if parts < 2 or path.name.endswith(".gz") or size < min_bytes:
        return [Part(0, 1, None)]
    first = int(size * first_share) // parts
    cuts_at = [first + (size - first) * i // (parts - 1) for i in range(parts - 1)]
    # Lines before each byte cut, rounded to whole multiples of align; then where those lines end.
    lines_at = _newlines_before(path, cuts_at)
    cuts = sorted({round(n / align) * align for n in lines_at} - {0})
    offsets = _offsets_after_lines(path, cuts)
    starts = [Part(0, 1, None)] + [
        Part(offset, cut + 1, None) for cut, offset in zip(cuts, offsets, strict=False) if offset < size
    ]
    return [
        Part(part.start, part.first_line, following.first_line - part.first_line)
        for part, following in zip(starts, starts[1:], strict=False)
    ] + [starts[-1]]


def _newlines_before(path: Path, offsets: list[int]) -> list[int]:
    """Newlines before each of ``offsets`` (ascending byte offsets)."""
    counts: list[int] = []
    position = seen = 0
    with path.open("rb") as handle:
        for offset in offsets:
            while position < offset:
                block = handle.read(min(1 << 20, offset - position))
                if not block:
                    break
                seen += block.count(b"\n")
                position += len(block)
            counts.append(seen)
    return counts


def _offsets_after_lines(path: Path, counts: list[int]) -> list[int]:
    """Byte offsets just after the ``count``-th newline, for each of ``counts`` (ascending; a count past
    the end of the file gets no offset)."""
    offsets: list[int] = []
    position = seen = 0
    wanted = iter(counts)
    target = next(wanted, None)
    with path.open("rb") as handle:
        while target is not None:
            block = handle.read(1 << 20)
            if not block:
                break
            in_block = block.count(b"\n")
            cursor = 0
            while target is not None and seen + in_block >= target:
                for _ in range(target - seen):
                    cursor = block.index(b"\n", cursor) + 1
                in_block -= target - seen
                seen = target
                offsets.append(position + cursor)
                target = next(wanted, None)
            seen += in_block
            position += len(block)
    return offsets


def over_parts(path: Path, workers: int, read: Callable[[FilePart | None], T]) -> list[T]:
    """``read`` of each part of a collection file, in file order, on up to ``workers`` processes at once
    (``read(None)``: the whole file, when it is small, gzipped or not one document per line)."""
    found = partition_file(path, workers, MIN_PARALLEL_BYTES)
    parts: list[FilePart | None] = list(found) if found else [None]
    return run_parallel([lambda part=part: read(part) for part in parts])  # type: ignore[misc]


def start_without_ctrl_c(process: Any) -> None:
    """Start ``process`` with SIGINT blocked in it. Ctrl-C reaches every process of the terminal's group:
    blocked in the workers, it interrupts only this process, which stops them; a worker interrupted at
    any moment (even while forking) could otherwise print a traceback or unwind this process's stack."""
    if not hasattr(signal, "pthread_sigmask"):  # Windows
        process.start()
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        process.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)  # a Ctrl-C that came meanwhile is delivered now


def run_parallel(tasks: list[Callable[[], Any]]) -> list[Any]:
    """Results of ``tasks``, the first run here and the others in forked processes at the same time
    (one after the other where processes cannot be forked). Results travel back pickled: keep them small."""
    if len(tasks) == 1 or "fork" not in multiprocessing.get_all_start_methods():
        return [task() for task in tasks]
    context = multiprocessing.get_context("fork")
    running = []
    for task in tasks[1:]:
        receiver, sender = context.Pipe(duplex=False)
        process = context.Process(target=_send_result, args=(task, sender), daemon=True)
        start_without_ctrl_c(process)
        sender.close()
        running.append((process, receiver))
    try:
        results = [tasks[0]()]
        for _process, receiver in running:
            try:
                ok, value = receiver.recv()
            except EOFError:
                raise OperationFailed("a worker process stopped without a result") from None
            if not ok:
                message, bad_input = value
                if bad_input:  # the file's fault (a malformed line, named): an input error, as on one process
                    raise InputError(message)
                raise OperationFailed(f"a worker process failed: {message}")
            results.append(value)
        return results
    finally:
        for process, receiver in running:
            receiver.close()
            if process.is_alive():
                process.terminate()
            process.join()


def _send_result(task: Callable[[], Any], sender: Any) -> None:
    try:
        result = (True, task())
    except Exception as exc:
        result = (False, (str(exc) or type(exc).__name__, isinstance(exc, InputError)))
    sender.send(result)
    sender.close()
