"""Where the repository's files are, resolved from this file: a test reads nothing relative to the working
directory, so the suite runs the same from anywhere."""

from __future__ import annotations

from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
SAMPLE_CONFIGS = REPOSITORY / "sample_configs"
FIXTURES = REPOSITORY / "tests" / "fixtures"
REAL = FIXTURES / "real"  # slices of MongoDB's sample archives and of other people's databases
REPORTS = FIXTURES / "reports"
RULE_CASES = REPOSITORY / "tests" / "rules" / "cases"
DOCUMENT_SETS = REPOSITORY / "tests" / "rules" / "document_sets.yaml"
