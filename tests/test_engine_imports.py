"""The migration engine stands apart from the advice: importing its runners loads nothing of the rules, the
analysis, the access file's parser, the index model, the renderers or the guide's cost model. (The
operations still return the guide's read and write plans, so ``guide.placeholders``, ``guide.reads`` and
``guide.writes`` come with them: those three import nothing else of the project's advice.)"""

from __future__ import annotations

import subprocess
import sys

from tests.support.paths import REPOSITORY

FORBIDDEN = ("mongopat.rules", "mongopat.analysis", "mongopat.access", "mongopat.draft", "mongopat.indexes",
             "mongopat.render", "mongopat.check", "mongopat.forecast")  # fmt: skip
# (mongopat.predictions, the figures a migration is checked against after it ran, belongs to the engine.)
GUIDE_ALLOWED = {"mongopat.guide", "mongopat.guide.placeholders", "mongopat.guide.reads", "mongopat.guide.writes"}


def test_the_runners_load_no_advice_module():
    probe = (
        "import sys, mongopat.migrate.dump_folder.runner, mongopat.migrate.server.runner\n"
        "print('\\n'.join(sorted(m for m in sys.modules if m.startswith('mongopat'))))\n"
    )
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPOSITORY, check=True)
    loaded = run.stdout.split()
    assert "mongopat.migrate.operations.extended_reference" in loaded  # the probe loaded the operations
    assert [m for m in loaded if m.startswith(FORBIDDEN)] == []
    assert [m for m in loaded if m.startswith("mongopat.guide") and m not in GUIDE_ALLOWED] == []
