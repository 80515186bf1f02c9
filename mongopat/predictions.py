"""What a migration is predicted to do, and how far what it did was from it.

Every recommendation that carries a migration carries a ``prediction`` (``prediction_version`` 1): for each
collection the migration changes or creates, its documents and data bytes before and after, the median and
95th-percentile document bytes after; for each declared read it affects, the documents it examines before
and after. Each figure states its basis. ``migrate plan`` writes the prediction into the migration file,
``migrate up`` records what it measured beside it, and ``migrate verify`` and ``migrate rehearse`` report
the difference (rehearse fails past :data:`TOLERANCE`).

This module is the contract between those parts: the shapes (TypedDicts, as they are JSON), and the
comparison. It knows no rule, step or backend.
"""

from __future__ import annotations

from typing import Any, TypedDict

PREDICTION_VERSION = 1
# A measured figure further than this from its prediction (relative to the prediction) is a difference
# rehearse fails on: predictions come from samples and estimates, not from the migration's run.
TOLERANCE = 0.25
# Figures below this many bytes or documents are compared in absolute terms (a 2-document collection
# predicted at 1 is not 100% off in any sense that matters).
ABSOLUTE_FLOOR = {"documents": 10, "data_bytes": 4096, "median_document_bytes": 256, "p95_document_bytes": 256}
FIGURES = ("documents", "data_bytes", "median_document_bytes", "p95_document_bytes")


class Figures(TypedDict, total=False):
    """A collection's size: documents, data bytes (the sum of its documents' BSON sizes) and document sizes."""

    documents: int
    data_bytes: int
    median_document_bytes: int | None
    p95_document_bytes: int | None


class ScaledBy(TypedDict, total=False):
    """For a collection a migration creates from another: the other collection and its documents when the
    prediction was made. Where that collection holds another number when the migration runs (a rehearsal's
    sample), documents and bytes scale with it (``linear``), or are not compared (buckets: a sample's hold
    fewer readings each)."""

    collection: str
    documents: int
    linear: bool


class CollectionPrediction(TypedDict, total=False):
    collection: str
    before: Figures
    after: Figures
    basis: str
    scaled_by: ScaledBy
    # Figures predicted as a bound the measured one may stay below (a time-series collection's buckets:
    # their uncompressed bytes, which a server compresses).
    at_most: list[str]


class ReadPrediction(TypedDict):
    read: str
    collection: str
    examined_before: float | None
    examined_after: float | None
    basis: str


class Prediction(TypedDict):
    prediction_version: int
    collections: list[CollectionPrediction]
    reads: list[ReadPrediction]
    # Where a declared workload says something today's data does not: both, labelled.
    notes: list[str]


class Difference(TypedDict):
    collection: str
    figure: str
    predicted: float
    measured: float
    off_by: float  # measured / predicted - 1
    beyond_tolerance: bool


def prediction(
    collections: list[CollectionPrediction], reads: list[ReadPrediction] | None = None, notes: list[str] | None = None
) -> Prediction:
    return {
        "prediction_version": PREDICTION_VERSION,
        "collections": collections,
        "reads": reads or [],
        "notes": notes or [],
    }


def differences(
    predicted: Prediction | dict[str, Any],
    measured: dict[str, Figures],
    measured_before: dict[str, Figures] | None = None,
) -> list[Difference]:
    """Each figure of ``predicted``'s collections ("after") against ``measured`` (by collection).

    Where the figures before the migration were measured too (``measured_before``) and differ from the
    prediction's "before" (an earlier migration of the same plan changed the collection meanwhile, or the
    application wrote to it since the plan), the predicted change is applied to what was measured before:
    a prediction says what the migration does to the collection, not what the collection holds.
    """
    found: list[Difference] = []
    for entry in predicted.get("collections") or []:
        name = entry["collection"]
        after, before = entry.get("after") or {}, entry.get("before") or {}
        actual = measured.get(name)
        if actual is None:
            continue
        start = (measured_before or {}).get(name) or {}
        factor = 1.0
        scaled = entry.get("scaled_by")
        if scaled:
            then = ((measured_before or {}).get(scaled.get("collection", "")) or {}).get("documents")
            was = scaled.get("documents")
            if then is not None and was and then != was:
                if not scaled.get("linear", True):
                    continue
                factor = then / was
        for figure in FIGURES:
            want, got = after.get(figure), actual.get(figure)
            if want is None or got is None:
                continue
            then, was = start.get(figure), before.get(figure)
            if then is not None and was and then != was:
                want = round(want * then / was)
            elif factor != 1.0 and figure in ("documents", "data_bytes"):
                want = round(want * factor)
            off = (got / want - 1) if want else (0.0 if got == 0 else 1.0)
            beyond = abs(got - want) > ABSOLUTE_FLOOR[figure] and abs(off) > TOLERANCE
            if figure in (entry.get("at_most") or []):
                beyond = got - want > ABSOLUTE_FLOOR[figure] and off > TOLERANCE
            found.append(
                {
                    "collection": name,
                    "figure": figure,
                    "predicted": want,
                    "measured": got,
                    "off_by": round(off, 4),
                    "beyond_tolerance": beyond,
                }
            )
    return found


def describe(difference: Difference) -> str:
    return (
        f"{difference['collection']}: {difference['figure'].replace('_', ' ')} {difference['measured']:,} "
        f"against {difference['predicted']:,} predicted ({difference['off_by']:+.0%})"
    )


def figures(sizes: list[int], documents: int | None = None, data_bytes: int | None = None) -> Figures:
    """A collection's figures from its documents' sizes (sorted): all of them, or a sample of them with
    ``documents`` and ``data_bytes`` counted otherwise."""
    return {
        "documents": len(sizes) if documents is None else documents,
        "data_bytes": sum(sizes) if data_bytes is None else data_bytes,
        "median_document_bytes": percentile(sizes, 50),
        "p95_document_bytes": percentile(sizes, 95),
    }


def percentile(sorted_values: list[int], p: int) -> int | None:
    """Nearest-rank percentile of sorted values (None for none)."""
    if not sorted_values:
        return None
    rank = max(1, -(-p * len(sorted_values) // 100))
    return sorted_values[rank - 1]
