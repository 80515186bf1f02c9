"""Values wait in per-field buffers between flushes: bounded by bytes as well as by documents, so that a
file of large documents does not hold a thousand of them in memory at once."""

from __future__ import annotations

import json

from mongopat.analysis.collection import AnalyzeOptions, CollectionAnalysis
from mongopat.command import analyze
from mongopat.sources import SourceSpec
from tests.support.dumps import write_export


def big(i: int) -> dict:
    return {"_id": i, "readings": [{"t": k, "v": k * 0.5} for k in range(2000)]}  # about 40 KB of BSON


def buffered(analysis: CollectionAnalysis) -> int:
    element = analysis.root.fields["readings"].element
    return sum(len(slot.buffer) for slot in element.document.fields.values())


def test_large_documents_are_flushed_by_bytes():
    analysis = CollectionAnalysis("c", AnalyzeOptions(flush_bytes=100_000))
    for i in range(10):
        analysis.add(big(i), None)  # size unknown: the first is walked at once, then their size is known
        assert analysis.queued <= 2  # at most the documents of 100 KB wait, never all ten
        assert buffered(analysis) <= 3 * 2 * 2000
    analysis.flush()
    assert analysis.root.fields["readings"].element.document.fields["t"].scalars == 10 * 2000


def test_documents_queue_by_the_bytes_of_their_records():
    analysis = CollectionAnalysis("c", AnalyzeOptions(flush_bytes=100_000))
    for i in range(10):
        analysis.add_batch([big(i)], 40_000)
        assert analysis.queued <= 2
    analysis.flush()
    assert analysis.queued == 0 and analysis.documents == 10


def test_the_report_does_not_depend_on_when_buffers_are_flushed(tmp_path):
    write_export(tmp_path / "db", "c", [big(i) for i in range(30)])
    reports = []
    for flush_bytes in (50_000, 2**30):
        report = analyze(
            SourceSpec(dump=str(tmp_path / "db")), options=AnalyzeOptions(workers=1, flush_bytes=flush_bytes)
        )
        report.pop("generated_at")
        reports.append(json.dumps(report, sort_keys=True, default=str))
    assert reports[0] == reports[1]


def test_an_analysis_is_freed_without_the_cyclic_collector():
    """No reference cycle: a dropped analysis (dates and ids included) is freed at once by reference
    counting, so the cyclic collector never walks its sketches."""
    import datetime
    import gc

    from bson import ObjectId

    def analyse() -> None:
        analysis = CollectionAnalysis("c", AnalyzeOptions())
        for i in range(600):
            at = datetime.datetime(2024, 1, 1) + datetime.timedelta(minutes=i)
            analysis.add({"_id": ObjectId(), "at": at, "tags": [{"k": i % 7}], "sub": {"when": at}}, None)
        analysis.to_dict()

    gc.collect()
    collecting = gc.isenabled()
    gc.disable()
    try:
        analyse()
        assert gc.collect() == 0
    finally:
        if collecting:
            gc.enable()
