"""The suite's own layout: what test modules share lives in ``tests/support``, and no test module imports
another (or conftest), so that a test can be moved or deleted without breaking one elsewhere."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.paths import REPOSITORY

TESTS = REPOSITORY / "tests"


def _imported_modules(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
    return found


def _is_test_module(module: str) -> bool:
    """A module of the suite other than its support package: ``tests.test_x``, ``test_x``, conftest."""
    parts = module.split(".")
    if parts[0] == "tests":
        return len(parts) > 1 and parts[1] != "support"
    return parts[-1] == "conftest" or parts[-1].startswith("test_")


def test_no_test_module_imports_another():
    modules = sorted(TESTS.rglob("*.py"))
    assert len(modules) > 50, f"found only {len(modules)} modules under {TESTS}"
    offending = [
        f"{path.relative_to(REPOSITORY)}:{line}: {module}"
        for path in modules
        for line, module in _imported_modules(path)
        if _is_test_module(module)
    ]
    assert offending == []


def test_the_support_package_has_a_docstring_for_each_module():
    modules = sorted((TESTS / "support").glob("*.py"))
    assert len(modules) >= 10
    assert [m.name for m in modules if ast.get_docstring(ast.parse(m.read_text(encoding="utf-8"))) is None] == []


def test_the_check_recognises_what_it_forbids():
    assert _is_test_module("tests.test_online") and _is_test_module("test_online")
    assert _is_test_module("tests.conftest") and _is_test_module("tests.rules.helpers")
    assert not _is_test_module("tests.support.dumps") and not _is_test_module("mongopat.cli")
