"""The escalation example runs with short deadlines and does what its docstring says."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import forkrun
import pytest
from test_examples import EXAMPLES, load

from durable_flow import Runtime, SqliteStore, UnknownRequestError


async def test_escalation_times_out_escalates_and_pays_once(tmp_path: Path) -> None:
    escalation = load("escalation")
    provider = escalation.Provider()
    db = tmp_path / "escalation.db"
    state = await escalation.main(db, provider, approval_deadline=timedelta(seconds=0.3))
    assert state.trail == ["the manager did not answer in time", "director answered",
                           "payment succeeded"]
    assert state.approver == "director" and state.approved and state.paid
    assert state.charge_id == "ch_1" and provider.charges == [1200]  # charged once
    async with Runtime(SqliteStore(db)) as rt:
        [run] = await rt.list_runs()
        manager = next(r for r in await rt.store.get_requests(run.run_id)
                       if r.kind == "request" and r.timed_out)
        with pytest.raises(UnknownRequestError):
            await rt.respond(run.run_id, {manager.id: True})  # the manager, too late


@pytest.mark.process
def test_escalation_runs_as_a_script(tmp_path: Path) -> None:
    proc = forkrun.run([EXAMPLES / "escalation.py"], cwd=tmp_path, timeout=120, plain=True)
    assert proc.returncode == 0, proc.stderr
    assert "escalated to the director" in proc.stdout
    assert "approved by the director, paid: True" in proc.stdout
