"""A lease is a local deadline: a holder cut off from the store stops before anyone takes over."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from ownerkit import Faulty, Journal, charging
from structlog.testing import capture_logs

from durable_flow import END, Blackboard, LeaseLostError, RunStatus, Runtime, Worker, WorkflowBuilder
from durable_flow.engine._ownership import LOCAL_EXPIRY, LeaseClock

TTL = 1.0


@asynccontextmanager
async def serving(*workers: Worker) -> AsyncIterator[None]:
    tasks = [asyncio.create_task(w.serve()) for w in workers]
    try:
        yield
    finally:
        for w in workers:
            await w.stop()
        await asyncio.wait_for(asyncio.gather(*tasks), 10)


async def until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def recorded(rt: Runtime, run_id: str, node: str, step: str) -> None:
    """Wait until the step's result is in the store."""
    deadline = time.monotonic() + 10
    while True:
        head = (await rt.store.get_run(run_id)).head_checkpoint_id
        if step in await rt.store.get_steps(run_id, head, node):
            return
        assert time.monotonic() < deadline, "the step was never recorded"
        await asyncio.sleep(0.01)


def test_the_local_deadline_counts_from_the_renewal_sent_last() -> None:
    clock = LeaseClock(10.0, sent_at=100.0, margin=2.0)
    assert clock.deadline == 108.0
    clock.renewed(103.0)
    assert clock.deadline == 111.0
    clock.renewed(101.0)  # an older renewal answered late moves nothing back
    assert clock.deadline == 111.0


async def test_a_holder_cut_off_from_the_store_stops_before_another_worker_takes_over(
    store_factory: Callable[[], Any],
) -> None:
    journal = Journal()
    async with Runtime(store_factory()) as rt:
        info = await rt.submit(charging(journal, "A", hold=3.0), {})
        cut = Faulty(store_factory(), stall=("renew_lease", "claim_next", "release_lease",
                                             "put_step", "commit", "put_task_writes"))
        cut.stalled.clear()  # A's connection works until it has claimed the run
        a = Worker(cut, [charging(journal, "A", hold=3.0)], lease_ttl=TTL, poll_interval=0.05,
                   name="A", grace_period=0.5)
        b = Worker(store_factory(), [charging(journal, "B", hold=0.1)], lease_ttl=TTL,
                   poll_interval=0.05, name="B")
        async with a, b, serving(a):
            await recorded(rt, info.run_id, "charge", "charge card")
            cut.stalled.set()  # the partition: A's calls get no reply from now on
            cut_at = time.monotonic()
            async with serving(b):
                done = await rt.wait(info.run_id, timeout=15)
        assert done.status is RunStatus.COMPLETED
    assert journal.overlaps() == []
    assert journal.effects == {"charge card": 1, "ship": 1}  # the step A recorded is not redone
    (who_a, _, _, a_end), (who_b, _, b_start, _) = journal.spans
    assert (who_a, who_b) == ("A", "B")
    assert a_end is not None and a_end - cut_at < TTL  # A stopped on its own clock
    assert a_end < b_start


async def test_a_worker_whose_renewals_fail_never_runs_its_run_twice_at_once(
    store_factory: Callable[[], Any],
) -> None:
    journal = Journal()
    async with Runtime(store_factory()) as rt:
        await rt.submit(charging(journal, "A", hold=3.0), {})
        cut = Faulty(store_factory(), stall=("renew_lease",))
        a = Worker(cut, [charging(journal, "A", hold=3.0)], lease_ttl=TTL, poll_interval=0.05,
                   name="A")
        async with a, serving(a):
            await until(lambda: len(journal.spans) >= 3, timeout=15)  # claimed again and again
    assert journal.overlaps() == []
    assert journal.effects == {"charge card": 1}


class Flag(Blackboard):
    done: bool = False


async def test_no_step_starts_past_the_deadline_even_in_a_node_that_swallows_cancellation(
    store_factory: Callable[[], Any],
) -> None:
    effects: list[str] = []
    b = WorkflowBuilder("stubborn", state=Flag)

    @b.node()
    async def stubborn(state: Flag, ctx: Any) -> dict[str, Any]:
        with contextlib.suppress(asyncio.CancelledError):  # user code that should not
            await asyncio.sleep(5)
        await ctx.step("side effect", lambda: effects.append("ran") or 1)
        return {"done": True}

    b.set_entry("stubborn").add_edge("stubborn", END)
    wf = b.build()
    store = Faulty(store_factory(), stall=("renew_lease",))
    async with Runtime(store, lease_ttl=TTL) as rt:
        with pytest.raises(LeaseLostError) as lost:
            await rt.run(wf, {})
    assert lost.value.reason == LOCAL_EXPIRY
    assert effects == []


async def test_a_run_that_went_waiting_does_not_report_its_lease_lost(
    store_factory: Callable[[], Any],
) -> None:
    b = WorkflowBuilder("asks", state=Flag)

    @b.node()
    async def ask(state: Flag, ctx: Any) -> dict[str, Any]:
        return {"done": await ctx.request({"q": "ok?"}, response_type=bool)}

    b.set_entry("ask").add_edge("ask", END)
    wf = b.build()
    # the commit that frees the lease answers slowly: renewals are due meanwhile
    store = Faulty(store_factory(), delay_after={"commit": 0.5})
    async with Runtime(store, lease_ttl=0.3) as rt:
        with capture_logs() as logs:
            result = await rt.run(wf, {})
            await asyncio.sleep(0.3)
    assert result.status is RunStatus.WAITING
    assert [e for e in logs if e["event"] in ("lease_lost", "lease_expired")] == []
