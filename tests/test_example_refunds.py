"""The refunds example: each refund call approved by a person, a killed transfer asked about."""

from __future__ import annotations

import os
from pathlib import Path

import forkrun
import pytest
from test_examples import EXAMPLES, load

pytestmark = [pytest.mark.process, pytest.mark.crash]


async def test_refunds_approves_refuses_and_pays_once_after_a_kill(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REFUNDS_DIR", str(tmp_path))
    refunds = load("refunds")
    out = await refunds.main(tmp_path / "refunds.db")
    assert out["status"] == "completed"
    assert out["refunds"] == ["A-7 40"]  # the refused 500 EUR refund never ran
    assert out["bank"] == ["transfer 40 EUR"]  # the killed transfer was not sent again
    assert out["paid"] == "bank-ref-1"
    assert out["asked"]["kind"] == "in_doubt" and out["asked"]["step"] == "transfer"
    assert "over 300 EUR needs the receipt" in out["answer"]
    assert out["decisions"] == ["answer", "answer", "answer"]  # two tool calls, one doubt


def test_refunds_runs_as_a_script(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "REFUNDS_DIR"}
    proc = forkrun.run([EXAMPLES / "refunds.py"], cwd=tmp_path, env=env, timeout=120,
                       plain=True)
    assert proc.returncode == 0, proc.stderr
    assert "child exit code: -9" in proc.stdout
    assert "completed: paid bank-ref-1" in proc.stdout
    assert (tmp_path / "bank.txt").read_text().splitlines() == ["transfer 40 EUR"]
