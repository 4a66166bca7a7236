"""A parked task's request is answerable the moment the task parks (``waits="branch"``).

A slow sibling of its superstep never delays the question: the request is in
the inbox and takes an answer while the sibling still runs.
"""

from __future__ import annotations

import asyncio
import collections

from parkkit import fork_join

from durable_flow import RunStatus, Runtime
from durable_flow.model._clock import utcnow


async def test_a_parked_request_is_answerable_before_a_slow_sibling_finishes(
        rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = fork_join(calls, delay={"w1": 1.5})
    running = asyncio.create_task(rt.run(wf, {}, run_id="inst"))
    try:
        for _ in range(100):  # well within w1's 1.5 s
            if pending := await rt.pending_requests():
                break
            await asyncio.sleep(0.01)
        assert [q.id for q in pending] == ["ask@2#0"]
        info = await rt.respond("inst", {"ask@2#0": "early"})
        answered_at = utcnow()
        assert info.status is RunStatus.RUNNING
    finally:
        r = await running
    assert r.status is RunStatus.COMPLETED, r.error
    assert r.state.answer == "early" and r.state.joined
    [w1_done] = [c for c in await rt.history("inst") if "w1" in c.nodes]
    assert answered_at < w1_done.created_at  # answered while its slow sibling still ran
    assert calls["ask"] == 2 and calls["w1"] == 1
