"""A SIGKILL right after an escalation loses neither the escalation nor its notification."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from pathlib import Path

import crashkit_approvals as kit
import forkrun
import pytest
from crashkit_approvals import resume_when_free
from crashkit_waits import open_store
from notifykit import Recorder
from pgdb import fresh_database

from durable_flow import Principal, RunStatus, Runtime
from durable_flow.model._clock import utcnow
from durable_flow.model._decisions import verify_chain
from durable_flow.runtime.notifications._outbox import Outbox

pytestmark = pytest.mark.crash


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "runs.db")
        return
    with fresh_database() as dsn:
        yield dsn


async def test_killed_after_the_escalation_its_record_and_notification_remain(db: str) -> None:
    async with Runtime(open_store(db)) as rt:
        started = await rt.run(kit.escalating(), {}, run_id="r1")
        (first,) = started.pending_requests
        assert first.expires_at is not None
        await asyncio.sleep(max(0.0, (first.expires_at - utcnow()).total_seconds()) + 0.02)
    proc = forkrun.run([kit.__file__, db, "r1"], timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    async with Runtime(open_store(db)) as rt:
        assert [(d.kind, d.answer) for d in await rt.decisions("r1")] == [
            ("escalation", {"assignees": [], "roles": ["manager"]})]
        notices = await rt.store.notifications("r1")
        assert [(n.kind, n.delivered_at) for n in notices] == [("opened", None), ("escalated", None)]
        recorder = Recorder()
        assert await Outbox(rt.store, [recorder]).deliver_due() == 2
        assert [(n.kind, n.roles) for n in recorder.sent] == [
            ("opened", ()), ("escalated", ("manager",))]
        result = await resume_when_free(rt, kit.escalating(), "r1")  # the dead child's lease
        assert result.status is RunStatus.WAITING
        (moved,) = await rt.pending_requests()
        assert (moved.roles, moved.escalated) == (("manager",), True)
        await rt.respond("r1", {moved.id: True}, by=Principal("mia", ("manager",)))
        assert (await rt.resume(kit.escalating(), "r1")).state.approved is True
        chain = await rt.decisions("r1")
        assert [d.kind for d in chain] == ["escalation", "answer"] and verify_chain(chain) is None
