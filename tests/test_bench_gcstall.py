"""``bench/gcstall.py`` runs end to end: both kinds of process, the frozen one's heap left out."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process

BENCH = Path(__file__).resolve().parents[1] / "bench"


def test_the_gc_stall_benchmark_runs_plain_and_frozen_processes() -> None:
    out = subprocess.run([sys.executable, str(BENCH / "gcstall.py"), "--small", "60",
                          "--runs", "1"], capture_output=True, text=True, timeout=300,
                         check=True).stdout
    rows = re.findall(r"^\| (plain|frozen) \| ([\d,]+)( \(([\d,]+) frozen\))? \| ([\d.]+) ms",
                      out, re.MULTILINE)
    assert [r[0] for r in rows] == ["plain", "frozen"], out
    (_, plain, _, none, _), (_, walked, _, frozen, _) = rows
    assert not none and int(frozen.replace(",", "")) > 10_000
    # what a full collection walks: the start-up heap in the plain process, not in the frozen
    assert int(walked.replace(",", "")) * 10 < int(plain.replace(",", "")), rows
    assert "Median of the worst / median ratios: plain" in out
