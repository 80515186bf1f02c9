"""Progress bars on a terminal: one per collection while analysing, one per migration step while running."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from mongopat import command
from mongopat.cli.output import (
    State,
)
from mongopat.sources import SourceSpec

if TYPE_CHECKING:
    from mongopat.analysis.collection import AnalyzeOptions
    from mongopat.migrate.runner import RunOptions


def analyze_with_progress(spec: SourceSpec, collections: list[str] | None, options: AnalyzeOptions) -> dict[str, Any]:
    from mongopat.render.progress import collection_bars

    progress, start = collection_bars(State.progress_console())
    if progress is None:
        return command.analyze(spec, collections, options)
    with progress:
        return command.analyze(spec, collections, options, start)


@contextlib.contextmanager
def step_bars(options: RunOptions) -> Iterator[RunOptions]:
    """``options`` with a progress bar per migration step while the run lasts, on a terminal."""
    from mongopat.render.progress import step_bars

    display = step_bars(options, State.progress_console())
    try:
        yield options
    finally:
        if display is not None:
            display.stop()
