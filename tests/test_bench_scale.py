"""``bench/scale.py`` runs end to end at a tiny N and reports every figure (no timing asserted)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process

BENCH = Path(__file__).resolve().parents[1] / "bench"
FIGURES = ("cost per superstep, last", "get_state (head) at", "head load (engine loader) at",
           "resume with the answer at", "history(limit=50) first page at",
           "history(limit=50, before=<superstep N/2>) at", "storage O(n), bytes/superstep at",
           "prune(keep_last=", "run beside a reader of the long run, worst superstep",
           "start-up heap frozen as durable-flow worker does, worst superstep")


def test_the_scale_benchmark_reports_every_figure_on_both_stores(tmp_path: Path) -> None:
    server = os.environ["DURABLE_FLOW_TEST_PG_DSN"]
    out = subprocess.run([sys.executable, str(BENCH / "scale.py"), "--supersteps", "200",
                          "--pg-supersteps", "200", "--pg-server", server, "--reps", "1",
                          "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=300, check=True).stdout
    for store in ('SQLite (synchronous="normal")', "PostgreSQL"):
        for figure in FIGURES:
            line = re.escape(f"{store}: ") + r"[^\n]*" + re.escape(figure)
            assert re.search(r"^\[(met|MISSED)\] " + line + r"[^\n]*: [\d.]+x? ", out,
                             re.MULTILINE), (store, figure, out)
    assert "[n/a]" not in out, out
    section = (tmp_path / "RESULTS.md").read_text()
    assert section.startswith("<!-- scale:start -->") and "<!-- scale:end -->" in section
    assert re.search(r"load average before/after: [\d.]+ [\d.]+ [\d.]+ / ", section)
    assert section.count("| met |") + section.count("| **missed** |") == 2 * len(FIGURES)
