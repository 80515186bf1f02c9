"""Cutting files of lines into parts, and work run in forked processes."""

from __future__ import annotations

import pytest

from mongopat.errors import OperationFailed
from mongopat.migrate.dump_folder.file_parts import Part, plan_parts, run_parallel


def test_parts_start_on_aligned_lines(tmp_path):
    path = tmp_path / "r.json"
    path.write_bytes(b"".join(f'{{"i": {i}, "pad": "{"x" * (i % 50)}"}}\n'.encode() for i in range(150_000)))
    data = path.read_bytes()
    for count in (2, 3, 4):
        parts = plan_parts(path, count, 4 * 2**20, 1000)
        assert len(parts) == count and parts[0].start == 0 and parts[-1].lines is None
        for part, following in zip(parts, parts[1:], strict=False):
            assert part.first_line + part.lines == following.first_line
        for part in parts[1:]:
            assert (part.first_line - 1) % 1000 == 0
            assert data[part.start - 1 : part.start] == b"\n"
            assert data[: part.start].count(b"\n") == part.first_line - 1
    small = tmp_path / "small.json"
    small.write_bytes(b'{"a": 1}\n')
    assert plan_parts(small, 4, 4 * 2**20, 1000) == [Part(0, 1, None)]


def test_the_first_part_takes_its_share(tmp_path):
    path = tmp_path / "r.json"
    path.write_bytes(b"".join(b'{"i": %07d}\n' % i for i in range(500_000)))
    even = plan_parts(path, 2, 0, 100)
    smaller = plan_parts(path, 2, 0, 100, first_share=0.6)
    assert smaller[0].lines < even[0].lines
    assert abs(smaller[0].lines / 500_000 - 0.3) < 0.01


def test_run_parallel_returns_results_in_order_and_reports_failures():
    assert run_parallel([lambda: 1, lambda: "two", lambda: [3]]) == [1, "two", [3]]

    def fails() -> None:
        raise ValueError("no disk")

    with pytest.raises(OperationFailed, match="no disk"):
        run_parallel([lambda: 1, fails])
