"""Workers at the edges: stop during a claim or a superstep, runs that cannot start, lost replies."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from ownerkit import Faulty
from structlog.testing import capture_logs

from durable_flow import END, Blackboard, RunStatus, Runtime, StoreError, Worker, WorkflowBuilder
from durable_flow.model._clock import utcnow
from durable_flow.store._protocols import RunRecord


class Steps(Blackboard):
    done: list[str] = []


def three_steps(started: list[str], *, hold: float = 0.0, extra: bool = False) -> Any:
    """a -> b -> c; ``extra`` adds a node (the same name and version, another graph)."""
    b = WorkflowBuilder("steps", state=Steps)
    def step(name: str) -> Any:
        async def node(state: Steps) -> dict[str, Any]:
            started.append(name)
            await asyncio.sleep(hold)
            return {"done": [*state.done, name]}
        return node

    for name in ("a", "b", "c"):
        b.add_node(name, step(name))
    b.set_entry("a").add_edge("a", "b").add_edge("b", "c")
    if extra:
        b.add_node("d", lambda state: {}).add_edge("c", "d").add_edge("d", END)
    else:
        b.add_edge("c", END)
    return b.build()


@asynccontextmanager
async def serving(worker: Worker) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(worker.serve())
    try:
        yield task
    finally:
        await worker.stop()
        await asyncio.wait_for(task, 10)


async def test_a_claim_that_returns_after_stop_is_handed_back_at_once(
    store_factory: Callable[[], Any],
) -> None:
    started: list[str] = []
    wf = three_steps(started)
    async with Runtime(store_factory()) as rt:
        info = await rt.submit(wf, {})
        slow = Faulty(store_factory(), delay_after={"claim_next": 0.5})  # the reply is slow
        worker = Worker(slow, [wf], poll_interval=0.05, lease_ttl=30)
        async with worker:
            task = asyncio.create_task(worker.serve())
            while not slow.calls.get("claim_next"):
                await asyncio.sleep(0.01)
            await worker.stop()  # while the claim is in flight
            await asyncio.wait_for(task, 5)
        run = await rt.store.get_run(info.run_id)
    assert started == []
    assert run.status is RunStatus.QUEUED and run.lease_owner is None


async def test_a_worker_cancelled_during_a_claim_strands_nothing(
    store_factory: Callable[[], Any],
) -> None:
    wf = three_steps([])
    async with Runtime(store_factory()) as rt:
        info = await rt.submit(wf, {})
        slow = Faulty(store_factory(), delay_after={"claim_next": 0.5})
        worker = Worker(slow, [wf], poll_interval=0.05, lease_ttl=30)
        async with worker:
            task = asyncio.create_task(worker.serve())
            while not slow.calls.get("claim_next"):
                await asyncio.sleep(0.01)
            task.cancel()  # how a web server's shutdown ends its worker
            await asyncio.gather(task, return_exceptions=True)
        run = await rt.store.get_run(info.run_id)
    assert run.status is RunStatus.QUEUED and run.lease_owner is None


async def test_a_stopping_worker_finishes_its_superstep_and_starts_no_other(
    store_factory: Callable[[], Any],
) -> None:
    started: list[str] = []
    wf = three_steps(started, hold=0.5)
    async with Runtime(store_factory()) as rt:
        info = await rt.submit(wf, {})
        worker = Worker(store_factory(), [wf], poll_interval=0.05, grace_period=5)
        async with worker:
            task = asyncio.create_task(worker.serve())
            while not started:
                await asyncio.sleep(0.01)
            await worker.stop()
            await asyncio.wait_for(task, 5)
        run = await rt.store.get_run(info.run_id)
        state = await rt.get_state(info.run_id)
    assert started == ["a"]
    assert run.status is RunStatus.QUEUED and run.lease_owner is None
    assert state.values["done"] == ["a"] and state.next_tasks == ("b",)


async def test_a_run_that_cannot_start_is_claimed_once_per_backoff_step_then_failed(
    store_factory: Callable[[], Any],
) -> None:
    started: list[str] = []
    async with Runtime(store_factory()) as rt:
        info = await rt.submit(three_steps(started), {})
        counting = Faulty(store_factory(), on_call={"claim_next": _count_claims})
        changed = three_steps(started, extra=True)  # same name and version, another graph
        worker = Worker(counting, [changed], poll_interval=0.01, max_start_attempts=5)
        _claims.clear()
        with capture_logs() as logs:
            async with worker, serving(worker):
                await asyncio.sleep(4)
        run = await rt.store.get_run(info.run_id)
        # attempts at 0, 1 and 3 s (the backoff doubles from 1 s); the fourth is due at 7 s
        assert 2 <= len(_claims) <= 3, _claims
        assert all(b - a >= 0.9 for a, b in itertools.pairwise(_claims)), _claims
        assert run.status is RunStatus.QUEUED and run.start_attempts == len(_claims)
        assert run.error is not None and run.error.type == "WorkflowMismatchError"
        assert started == []
        causes = [e for e in logs if e["event"] == "run_start_failed" and e["log_level"] != "debug"]
        assert len(causes) == 1  # the cause, logged once for the run

        failing = Worker(store_factory(), [changed], poll_interval=0.01, max_start_attempts=1)
        async with failing, serving(failing):
            await asyncio.sleep(0.05)
            await _wait_status(rt, info.run_id, RunStatus.FAILED)  # past max_start_attempts
        run = await rt.store.get_run(info.run_id)
        assert run.error is not None and "could not be started" in run.error.message
        # the cause fixed (the right code), a user resumes it on purpose
        result = await rt.resume(three_steps(started), info.run_id)
        assert (await rt.store.get_run(info.run_id)).start_attempts == 0
    assert result.status is RunStatus.COMPLETED and started == ["a", "b", "c"]


_claims: list[float] = []


async def _count_claims(claimed: Any) -> Any:
    if claimed:
        _claims.append(time.monotonic())
    return claimed


async def _wait_status(rt: Runtime, run_id: str, status: RunStatus) -> None:
    for _ in range(500):
        if (await rt.store.get_run(run_id)).status is status:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the run never became {status}")


async def test_a_claim_whose_reply_was_lost_finds_its_runs_when_tried_again(
    store_factory: Callable[[], Any],
) -> None:
    started: list[str] = []
    wf = three_steps(started)
    lost = {"once": True}

    async def lose_the_reply(claimed: Any) -> Any:
        if claimed and lost["once"]:  # committed, but the reply never came back
            lost["once"] = False
            raise StoreError.lost("connection lost after COMMIT")
        return claimed

    async with Runtime(store_factory()) as rt:
        info = await rt.submit(wf, {})
        flaky = Faulty(store_factory(), on_call={"claim_next": lose_the_reply})
        worker = Worker(flaky, [wf], poll_interval=0.05, lease_ttl=30)
        async with worker, serving(worker):
            done = await rt.wait(info.run_id, timeout=5)  # not after the 30 s lease
    assert done.status is RunStatus.COMPLETED and started == ["a", "b", "c"]


async def test_a_retried_claim_token_returns_the_runs_it_took_and_takes_no_more(
    store_factory: Callable[[], Any],
) -> None:
    wf = three_steps([])
    async with Runtime(store_factory()) as rt:
        first = await rt.submit(wf, {})
        store = rt.store
        claimed = await store.claim_next("w", 30, [("steps", "1")], limit=5, token="t1")
        await rt.submit(wf, {})
        again = await store.claim_next("w", 30, [("steps", "1")], limit=5, token="t1")
        assert [(r.run_id, lease) for r, lease in again] == [
            (r.run_id, lease) for r, lease in claimed]
        assert [r.run_id for r, _ in claimed] == [first.run_id]
        other = await store.claim_next("w", 30, [("steps", "1")], limit=5, token="t2")
        assert len(other) == 1 and other[0][0].run_id != first.run_id


async def test_a_run_whose_head_is_damaged_fails_after_its_start_attempts(
    store_factory: Callable[[], Any],
) -> None:
    wf = three_steps([])
    store = store_factory()
    async with Runtime(store) as rt:
        now = utcnow()
        await store.create_run(RunRecord(
            run_id="damaged", workflow_name=wf.name, status=RunStatus.QUEUED, created_at=now,
            updated_at=now, head_checkpoint_id="no-such-checkpoint", signature=wf.signature,
            workflow_version=wf.version), [], None)
        worker = Worker(store_factory(), [wf], poll_interval=0.01, max_start_attempts=2)
        with capture_logs() as logs:
            async with worker, serving(worker):
                await _wait_status(rt, "damaged", RunStatus.FAILED)
        run = await store.get_run("damaged")
    assert run.error is not None and run.error.type == "CheckpointCorruptedError"
    assert run.start_attempts == 2
    assert [e["event"] for e in logs if e["event"].startswith("run_")
            and e["log_level"] != "debug"] == ["run_start_failed", "run_failed_to_start"]
