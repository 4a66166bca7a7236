"""The research-and-approval example: research goes on while the approval is parked."""

from __future__ import annotations

from pathlib import Path

import forkrun
import pytest
from test_examples import EXAMPLES, load


async def test_research_finishes_while_the_approval_waits_then_the_join_runs(
        tmp_path: Path) -> None:
    example = load("research_approval")
    state = await example.main(tmp_path / "research.db")
    assert sorted(state.checked) == ["legal", "market", "tech"]
    assert state.approved and state.limit_eur == 5000
    assert state.report.startswith("solar roofs for schools: approved up to 5000 EUR; market:")


@pytest.mark.process
def test_research_approval_runs_as_a_script(tmp_path: Path) -> None:
    proc = forkrun.run([EXAMPLES / "research_approval.py"], cwd=tmp_path, timeout=120,
                       plain=True)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "is waiting; parked: approve since superstep" in out
    assert ("research finished while the approval waited: legal, market, tech "
            "(checked: legal, market, tech)") in out
    assert out.index("research finished") < out.index("asked:") < out.index("joined:")
