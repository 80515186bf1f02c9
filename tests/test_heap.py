"""The C heap's headroom (``mongopat/heap.py``), set when the command line starts."""

from __future__ import annotations

import platform
import sys

import pytest

import mongopat.cli
from mongopat.heap import keep_headroom


def test_the_headroom_is_set_on_glibc_and_left_alone_elsewhere():
    on_glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert keep_headroom() is on_glibc


def test_the_command_line_sets_it_before_any_command(monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(mongopat.cli, "keep_headroom", lambda: calls.append("headroom"))
    monkeypatch.setattr(sys, "argv", ["mongopat", "--help"])
    with pytest.raises(SystemExit) as exited:
        mongopat.cli.main()
    assert exited.value.code == 0
    assert calls == ["headroom"]
