"""Progress bars on a terminal's stderr: one per collection read, one per migration step run, one for the
bytes of logs an access draft reads.

Each function takes the console to draw on, or None (``--quiet``), and draws nothing when that console is
not a terminal, so that piped and captured runs stay plain.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

    from mongopat.migrate.runner import RunOptions


def collection_bars(console: Console | None) -> tuple[Progress | None, Callable[[str, int | None], Any] | None]:
    """A bar per collection (``start(name, expected)`` adds one and returns its ``update(done)``), and the
    display to enter while reading; (None, None) where nothing is drawn."""
    if console is None or not console.is_terminal:
        return None, None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("docs"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )

    def start(name: str, expected: int | None) -> Callable[[int], None]:
        task = progress.add_task(name, total=expected)

        def update(done: int) -> None:
            progress.update(task, completed=done)

        return update

    return progress, start


def step_bars(options: RunOptions, console: Console | None) -> Progress | None:
    """Set ``options.progress`` to draw a bar per migration step (documents done, rate, time left); returns
    the display, to stop when the run ends (None where nothing is drawn)."""
    if console is None or not console.is_terminal:
        return None
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]} docs/s"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )
    tasks: dict[tuple[str, int], Any] = {}
    started: dict[tuple[str, int], float] = {}

    def update(migration_id: str, index: int, done: int, total: int | None = None) -> None:
        key = (migration_id, index)
        if key not in tasks:
            progress.start()
            tasks[key] = progress.add_task(f"{migration_id} step {index + 1}", total=total, rate="-")
            started[key] = time.monotonic()
        elapsed = max(time.monotonic() - started[key], 1e-6)
        progress.update(tasks[key], completed=done, total=total, rate=f"{done / elapsed:,.0f}")

    options.progress = update
    options.on_batch = None
    return progress


def byte_bar(console: Console | None, label: str, total: int | None) -> tuple[Progress | None, Callable[[int], None]]:
    """A bar of bytes read out of ``total`` (None: not known), the display to enter while reading, and its
    ``update(done)``; (None, a no-op) where nothing is drawn."""
    if console is None or not console.is_terminal:
        return None, lambda done: None
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn(label), BarColumn(), TimeElapsedColumn(), console=console, transient=True)
    task = progress.add_task(label, total=total or None)

    def update(done: int) -> None:
        progress.update(task, completed=done)

    return progress, update
