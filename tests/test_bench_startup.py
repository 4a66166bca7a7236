"""``bench/imports.py`` runs end to end and reports both start-up targets (no timing asserted)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process

BENCH = Path(__file__).resolve().parents[1] / "bench"


def test_the_startup_benchmark_measures_every_case() -> None:
    out = subprocess.run([sys.executable, str(BENCH / "imports.py"), "--repeat", "1"],
                         capture_output=True, text=True, timeout=300, check=True).stdout
    for case in ("import durable_flow ", "durable-flow runs (console script)",
                 "python -m durable_flow runs", "durable-flow runs, no statement cache",
                 "python -c pass"):
        assert re.search(re.escape(case) + r".* min +[\d.]+ ms +median +[\d.]+ ms", out), case
    verdicts = re.findall(r"^\[(met|MISSED)\] (.+?): median [\d.]+ ms, target < (\d+) ms$",
                          out, re.MULTILINE)
    assert [(what, target) for _, what, target in verdicts] == [
        ("import durable_flow", "150"), ("durable-flow runs (console script, wall)", "400")]
