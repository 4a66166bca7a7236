"""``bench/sidebyside.py`` runs end to end and reports every target (no timing asserted).

Run with LangGraph and DBOS left out, as on a machine without them: their
columns say so and everything of ours is still measured.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from pgdb import on_database, server_dsn

pytestmark = pytest.mark.process

BENCH = Path(__file__).resolve().parents[1] / "bench"

TARGETS = (
    r"inbox over 100 waiting runs under 100 ms: [\d.]+ ms \(CPU [\d.]+ ms\)",
    r"resume \(get_state\) from the head at N=200 under 10 ms: get_state [\d.]+ ms, engine "
    r"loader [\d.]+ ms, resume [\d.]+ ms; LangGraph not measured",
    r"a 400-superstep load at most 3x a 50 one: get_state [\d.]+x .*, loader [\d.]+x",
    r"worst superstep of a small run beside a 400-superstep reader at most 5x its median: "
    r"get_state reader [\d.]+x .*; loader reader [\d.]+x",
    r"chain N=100: at least 5x LangGraph's supersteps/s: ours \d+ supersteps/s, LangGraph not",
    r"PostgreSQL chain superstep at most 1.5x a raw asyncpg one-statement transaction: "
    r"[\d.]+x",
    r"2 workers at least 1.8x one on PostgreSQL \(I/O-bound nodes\): [\d.]+x",
    r"short workflows \(3 steps\) on PostgreSQL: at least 3x DBOS's workflows/s: ours \d+ "
    r"workflows/s, DBOS not measured",
)


def test_the_side_by_side_benchmark_reports_every_target(tmp_path: Path) -> None:
    server = on_database(server_dsn(), "postgres")
    done = subprocess.run([sys.executable, str(BENCH / "sidebyside.py"), "--quick", "--without",
                           "langgraph,dbos", "--out", str(tmp_path), "--pg-dsn", server],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "FAILED" not in out, out
    for target in TARGETS:
        assert re.search(r"^ *(met|\*\*missed\*\*|not measured)  " + target, out, re.MULTILINE), (
            target, out)
    section = (tmp_path / "RESULTS.md").read_text()
    assert section.startswith("<!-- sidebyside:start -->"), section[:200]
    assert "`python bench/sidebyside.py --quick --without langgraph,dbos" in section
    assert "| target | measured | status |" in section
    assert "LangGraph is not installed (or left out)" in section
    assert "DBOS Transact is not installed (or left out)" in section
    assert section.count("\n| ") == 1 + len(TARGETS)  # the header and a row a target
