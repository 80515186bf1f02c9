"""Predictions for the migrations recommendations carry (see :mod:`mongopat.predictions`).

A rule that sizes its migration from counted evidence sets the prediction itself (the bucket rule, from
the readings per series per window). For every other migration the prediction comes from the documents
the migration will transform: a sample of the collection is run through the step's own transform, in
memory, and the sizes before and after are measured and scaled to the collection. Steps on a collection
as a whole (indexes, validators) change no document. The reads come from the guide's cost model: the
documents each declared read examines before and after, on the declared workload.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import bson

from mongopat.migrate.transform_api import copy_document
from mongopat.predictions import CollectionPrediction, Figures, Prediction, ReadPrediction, figures, prediction

# Documents sampled per collection to run a step's transform on.
SAMPLE_DOCUMENTS = 1000


class SourceDocuments:
    """The other documents a step's transform reads (references, parents, aggregates), from a source."""

    def __init__(self, source: Any) -> None:
        self.source = source

    def documents(
        self, collection: str, field: str | None, values: list[Any] | None, fields: list[str]
    ) -> Iterable[Any]:
        from mongopat.migrate.transform_api import get_path, hashable_key

        if collection not in self.source.collections():
            return []
        wanted = None if values is None else {hashable_key(value) for value in values}
        found = []
        for document, _size in self.source.documents(collection, None, decoded=True):
            if field is not None and wanted is not None and hashable_key(get_path(document, field)) not in wanted:
                continue
            found.append(document)
        return found


def before_figures(collection: dict[str, Any]) -> Figures:
    size = collection.get("document_size") or {}
    count = int(collection.get("count") or 0)
    return {
        "documents": count,
        "data_bytes": round(count * float(size.get("mean") or 0)),
        "median_document_bytes": size.get("p50"),
        "p95_document_bytes": size.get("p95"),
    }


def forecast(
    recommendation: dict[str, Any], report: dict[str, Any], access: Any = None, source: Any = None
) -> Prediction | None:
    """The prediction of a recommendation's migration (None when it carries none)."""
    from mongopat.migrate.operations import STEP_OPERATIONS
    from mongopat.migrate.operations.base import CollectionOperation, DocumentOperation
    from mongopat.migrate.steps import StepError, build_step

    spec = recommendation.get("migration")
    if not spec:
        return None
    try:
        step = build_step(spec)
    except StepError:
        return None
    collections = {c["name"]: c for c in report.get("collections", [])}
    entry = collections.get(step.collection)
    if entry is None:
        return None
    before = before_figures(entry)
    operation = STEP_OPERATIONS[step.name]
    predicted: list[CollectionPrediction]
    if isinstance(operation, CollectionOperation):
        predicted = [
            {"collection": step.collection, "before": before, "after": dict(before),  # type: ignore[typeddict-item]
             "basis": f"{step.name} changes the collection, not its documents"}
        ]  # fmt: skip
    elif isinstance(operation, DocumentOperation) and source is not None:
        predicted = _sampled(operation, step, entry, before, source)
    else:
        after: Figures = {"documents": before["documents"]} if isinstance(operation, DocumentOperation) else {}
        predicted = [
            {"collection": step.collection, "before": before, "after": after,
             "basis": "bytes not predicted from a report alone: run recommend on the data (--dump or --uri)"}
        ]  # fmt: skip
    return prediction(predicted, reads(recommendation, report, access))


def _sampled(operation: Any, step: Any, entry: dict[str, Any], before: Figures, source: Any) -> list[Any]:
    """Run the step's transform on a sample of the collection; scale the sizes measured to it."""
    documents = [doc for doc, _size in source.documents(step.collection, SAMPLE_DOCUMENTS, decoded=True)]
    if not documents:
        return [{"collection": step.collection, "before": before, "after": dict(before), "basis": "no documents"}]
    context = operation.context(step, documents, SourceDocuments(source))
    sizes_before: list[int] = []
    sizes_after: list[int] = []
    sides: dict[str, list[int]] = {}
    for document in documents:
        sizes_before.append(len(bson.encode(document)))
        result = operation.transform(copy_document(document), step, context)
        sizes_after.append(len(bson.encode(result.document)))
        for name, side in result.side.items():
            sides.setdefault(name, []).extend(len(bson.encode(doc)) for doc in side)
    count = before["documents"]
    scale = count / len(documents)
    ratio = sum(sizes_after) / sum(sizes_before)
    ordered = sorted(sizes_after)
    basis = (
        f"the step's transform run on {len(documents):,} of {count:,} documents"
        + (" (all of them)" if len(documents) >= count else ", scaled to the collection")
        + f": data bytes {ratio - 1:+.1%}"
    )
    after = figures(ordered, count, round(before["data_bytes"] * ratio))
    found: list[CollectionPrediction] = [
        {"collection": step.collection, "before": before, "after": after, "basis": basis}
    ]
    for name, sizes in sorted(sides.items()):
        found.append(
            {
                "collection": name,
                "before": {"documents": 0, "data_bytes": 0},
                "after": figures(sorted(sizes), round(len(sizes) * scale), round(sum(sizes) * scale)),
                "basis": f"documents the step writes to {name} for the {len(documents):,} sampled, scaled",
            }
        )
    return found


def reads(recommendation: dict[str, Any], report: dict[str, Any], access: Any) -> list[ReadPrediction]:
    """The declared reads the migration affects: documents examined before and after (the guide's model)."""
    if access is None:
        return []
    from mongopat.guide.build import recommendation_guide

    try:
        guide = recommendation_guide(
            str(recommendation.get("code")), str(recommendation.get("title")), recommendation["migration"], access,
            report,
        )  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - a read the model cannot cost is reported, not fatal
        return [{"read": "*", "collection": "", "examined_before": None, "examined_after": None,
                 "basis": f"not estimated: {exc}"}]  # fmt: skip
    return [
        {
            "read": read.name,
            "collection": read.before.collection,
            "examined_before": read.examined.get("before"),
            "examined_after": read.examined.get("after"),
            "basis": read.basis,
        }
        for read in guide.reads
    ]
