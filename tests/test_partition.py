"""A worker partitioned from PostgreSQL while a node runs: another takes over, nothing overlaps.

Worker A reaches the database through a TCP proxy the test freezes past A's
lease while A's node runs (a network partition: no error, no reply). Worker B
takes the run over once the lease expired. The journal counts executions of
the node and its side effects: no two executions overlap, no recorded step
runs again, and when the proxy thaws, A commits nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator

import pytest
from netproxy import NetProxy
from ownerkit import Journal, charging
from stores.pgdb import fresh_database

from durable_flow import PostgresStore, RunStatus, Runtime, Worker

TTL = 2.0


@pytest.fixture
def pg_db() -> Iterator[str]:
    with fresh_database() as dsn:
        yield dsn


async def _serve(worker: Worker) -> asyncio.Task[None]:
    await worker.store.setup()
    return asyncio.create_task(worker.serve())


async def _stopped(worker: Worker, task: asyncio.Task[None]) -> None:
    await worker.stop()
    await asyncio.wait_for(task, 30)
    await worker.store.close()


async def _step_recorded(rt: Runtime, run_id: str, name: str) -> None:
    deadline = time.monotonic() + 20
    while True:
        run = await rt.store.get_run(run_id)
        if run.head_checkpoint_id and name in await rt.store.get_steps(
                run_id, run.head_checkpoint_id, "charge"):
            return
        assert time.monotonic() < deadline, "the step was never recorded"
        await asyncio.sleep(0.02)


@pytest.fixture
async def proxy() -> AsyncIterator[NetProxy]:
    async with NetProxy() as p:
        yield p


async def test_a_partitioned_worker_never_overlaps_the_worker_that_takes_over(
    pg_db: str, proxy: NetProxy,
) -> None:
    journal = Journal()
    async with Runtime(PostgresStore(pg_db, max_size=2)) as rt:
        info = await rt.submit(charging(journal, "A", hold=6.0), {})
        a = Worker(PostgresStore(proxy.dsn(pg_db), max_size=2), [charging(journal, "A", hold=6.0)],
                   lease_ttl=TTL, poll_interval=0.05, grace_period=1.0, name="A")
        serving_a = await _serve(a)
        await _step_recorded(rt, info.run_id, "charge card")
        proxy.freeze()  # the partition, while A's node runs
        frozen_at = time.monotonic()
        b = Worker(PostgresStore(pg_db, max_size=2), [charging(journal, "B", hold=0.1)],
                   lease_ttl=TTL, poll_interval=0.05, name="B")
        serving_b = await _serve(b)
        done = await rt.wait(info.run_id, timeout=30)
        assert done.status is RunStatus.COMPLETED
        head_before_thaw = done.head_checkpoint_id
        proxy.thaw()  # whatever A had in flight now reaches the server
        await asyncio.sleep(TTL)
        await _stopped(b, serving_b)
        await _stopped(a, serving_a)
        after = await rt.store.get_run(info.run_id)
        history = await rt.history(info.run_id)
        state = await rt.get_state(info.run_id)
    assert journal.overlaps() == []
    assert journal.effects == {"charge card": 1, "ship": 1}
    (who_a, _, _, a_end), (who_b, _, b_start, _) = journal.spans
    assert (who_a, who_b) == ("A", "B")
    assert a_end is not None and a_end - frozen_at < TTL and a_end < b_start
    # A committed nothing once the proxy thawed: the run is as B left it
    assert after.status is RunStatus.COMPLETED and after.head_checkpoint_id == head_before_thaw
    assert [c.superstep for c in history] == [1, 0]
    assert state.values["charged"] == 1 and state.values["shipped"] is True
