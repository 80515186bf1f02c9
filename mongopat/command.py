"""Every user-facing command as a plain function: the CLI is a thin layer over these, and scripts and
tests call them directly. Each returns data (a report, findings) and raises :class:`MongopatError` on
bad input; printing is the caller's business.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mongopat.analysis.collection import AnalyzeOptions, CollectionAnalysis, analyze_collection
from mongopat.analysis.references import find_references
from mongopat.errors import InputError
from mongopat.report import build_report
from mongopat.sources import Source, SourceSpec, open_source

# Called once per collection with (name, expected documents or None); returns the per-batch callback.
ProgressFactory = Callable[[str, int | None], Callable[[int], None]]


def analyze(
    spec: SourceSpec,
    collections: list[str] | None = None,
    options: AnalyzeOptions | None = None,
    progress: ProgressFactory | None = None,
) -> dict[str, Any]:
    """Measure the collections of a database or dump folder; returns a report (``report_version`` 1)."""
    with open_source(spec) as source:
        return analyze_source(source, collections, options, progress)


def analyze_source(
    source: Source,
    collections: list[str] | None = None,
    options: AnalyzeOptions | None = None,
    progress: ProgressFactory | None = None,
) -> dict[str, Any]:
    options = options or AnalyzeOptions()
    if options.sample_size is not None and options.sample_size < 1:
        raise InputError("--sample must be at least 1")
    available = source.collections()
    if collections:
        missing = [name for name in collections if name not in available]
        if missing:
            raise InputError(
                f"collection not found in {source.database}: {', '.join(missing)}",
                hint=f"collections: {', '.join(available) or 'none'}",
            )
        names = list(dict.fromkeys(collections))
    else:
        names = available
    if not names:
        raise InputError(
            f"database {source.database!r} at {source.location} has no collections",
            hint="check --db (MongoDB answers an unknown database as an empty one)",
        )
    analyses: dict[str, CollectionAnalysis] = {}
    for name in names:
        callback = None
        if progress is not None:
            expected = options.sample_size
            callback = progress(name, expected)
        analyses[name] = analyze_collection(source, name, options, callback)
    find_references(analyses, source)
    notes = []
    if source.kind == "mongomock":
        notes.append("mongomock is an in-process test double: storage sizes and index usage are not reported")
    return build_report(
        source.kind, source.location, source.database, [analyses[name].to_dict() for name in names], notes
    )
