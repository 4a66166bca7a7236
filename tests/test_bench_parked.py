"""``bench/parked.py`` runs end to end in a short form and reports both modes (no timing asserted)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process

BENCH = Path(__file__).resolve().parents[1] / "bench"


def test_the_parked_benchmark_reports_both_modes_and_their_ratio() -> None:
    out = subprocess.run([sys.executable, str(BENCH / "parked.py"), "--repeat", "1",
                          "--answer-after", "0.2", "--work", "0.05", "--steps", "2"],
                         capture_output=True, text=True, timeout=300, check=True).stdout
    assert "<!-- parked:start -->" in out and "<!-- parked:end -->" in out
    for mode in ("`superstep` (default)", "`branch`"):
        assert re.search(re.escape(f"| {mode} | ") + r"[\d,]+ ms \| [\d,]+ ms \| [\d,]+ ms \|",
                         out), mode
    assert re.search(r'`waits="branch"` reaches the join in [\d.]+ times the default', out)
