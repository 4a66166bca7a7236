"""The expense approval example, with short deadlines: policy, escalation, second step, webhooks."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import forkrun
import pytest
from test_examples import EXAMPLES, load


async def test_policy_escalation_second_step_and_notifications(tmp_path: Path) -> None:
    example = load("expense_approval")
    # bob's answer must come within a deadline of the escalation: 2 s is long enough on a
    # loaded machine (1 s was not always, with the whole suite running in parallel)
    results = await example.main(tmp_path / "expenses.db", deadline=timedelta(seconds=2))
    assert results["alice"] == {"approved": True,
                                "decisions": [("policy", "policy:small-expenses")]}
    assert results["bob"] == {"approved": True,
                              "decisions": [("escalation", None), ("answer", "mia")]}
    assert results["carol"] == {"approved": False, "decisions": [
        ("escalation", None), ("timeout", None), ("timeout", None)]}
    assert sorted(results["notifications"]) == ["escalated", "escalated", "opened", "opened",
                                                "opened"]


@pytest.mark.process
def test_expense_approval_runs_as_a_script(tmp_path: Path) -> None:
    proc = forkrun.run([EXAMPLES / "expense_approval.py"], cwd=tmp_path, timeout=120,
                       plain=True)
    assert proc.returncode == 0, proc.stderr
    assert "answered by the policy small-expenses" in proc.stdout
    assert "escalated to manager" in proc.stdout
    assert "webhook notifications: 5 (2 escalations)" in proc.stdout
