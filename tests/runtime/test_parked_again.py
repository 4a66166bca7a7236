"""An answer that queues a parking run at its waiting commit: ``run`` goes on in process."""

from __future__ import annotations

import collections
from typing import Any

import pytest
from parkkit import fork_join

from durable_flow import RunStatus, Runtime
from durable_flow.store._protocols import CheckpointStore, Claim


def _answer_at_the_waiting_commit(monkeypatch: pytest.MonkeyPatch, store: CheckpointStore,
                                  rt: Runtime, answers: dict[str, Any]) -> list[str]:
    """Record ``answers`` just before the run's first ``waiting`` commit (after the
    barrier looked for answers), so the store leaves the run ``queued``."""
    real = store.commit
    seen: list[str] = []

    async def commit(c: Any) -> None:
        if not seen and c.run is not None and c.run.status is RunStatus.WAITING and c.parked_on:
            seen.append(c.lease.run_id)
            await rt.respond(c.lease.run_id, answers)
        await real(c)

    monkeypatch.setattr(store, "commit", commit)
    return seen


async def test_run_goes_on_when_an_answer_lands_as_it_commits_waiting(
        store: CheckpointStore, monkeypatch: pytest.MonkeyPatch) -> None:
    async with Runtime(store) as rt:
        calls: collections.Counter[str] = collections.Counter()
        wf = fork_join(calls)
        seen = _answer_at_the_waiting_commit(monkeypatch, store, rt, {"ask@2#0": "late"})
        r = await rt.run(wf, {}, run_id="g1")
        assert seen == ["g1"]  # the answer came in between
        assert r.status is RunStatus.COMPLETED, r.status
        assert r.state.answer == "late" and r.state.joined
        assert list(r.state.log) == ["start", "w1", "w2", "w3", "ask saw 4", "join"]
        assert calls["ask"] == 2 and calls["join"] == 1
        assert (await rt.get_run("g1")).status is RunStatus.COMPLETED


async def test_stream_goes_on_too_and_ends_with_one_final_event(
        store: CheckpointStore, monkeypatch: pytest.MonkeyPatch) -> None:
    async with Runtime(store) as rt:
        _answer_at_the_waiting_commit(monkeypatch, store, rt, {"ask@2#0": "late"})
        events = [e async for e in rt.stream(fork_join(), {}, run_id="g2")]
        finals = [e for e in events if e.result is not None]
        assert len(finals) == 1 and events[-1] is finals[0]
        assert finals[0].kind == "run_completed"
        assert finals[0].result is not None and finals[0].result.state.answer == "late"


async def test_queued_is_the_answer_when_another_executor_took_the_run(
        store: CheckpointStore, monkeypatch: pytest.MonkeyPatch) -> None:
    async with Runtime(store) as rt:
        taken = _answer_at_the_waiting_commit(monkeypatch, store, rt, {"ask@2#0": "late"})
        real_continue = rt._runs.go_on

        def claimed_first(*args: Any, **kw: Any) -> Any:
            async def go() -> Any:  # another executor claims the queued run first
                record = await store.get_run(args[1])
                assert record is not None and record.status is RunStatus.QUEUED
                await store.claim(Claim(args[1], "other-worker", 30.0))
                async for event in real_continue(*args, **kw):
                    yield event
            return go()

        monkeypatch.setattr(rt._runs, "go_on", claimed_first)
        r = await rt.run(fork_join(), {}, run_id="g3")
        assert taken == ["g3"]
        assert r.status is RunStatus.QUEUED
        run = await store.get_run("g3")
        assert run is not None and run.lease_owner == "other-worker"
