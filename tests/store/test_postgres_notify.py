"""PostgreSQL wake-ups: ``NOTIFY`` when a run becomes claimable, and ``listen`` that hears it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Any

import asyncpg
import orjson
import pytest

from durable_flow.errors import RunExistsError
from durable_flow.model._records import RunStatus
from durable_flow.store._protocols import Commit, RunUpdate
from durable_flow.store.postgres._postgres import PostgresStore
from durable_flow.store.sql._base import RUNS_CHANNEL

from .builders import make_run, request, start_run


@pytest.fixture
async def heard(pg_dsn: str) -> AsyncIterator[list[str]]:
    """The payloads (run ids) notified on the runs channel, heard by a connection of its own."""
    payloads: list[str] = []
    conn = await asyncpg.connect(pg_dsn)
    await conn.add_listener(RUNS_CHANNEL, lambda _c, _pid, _ch, payload: payloads.append(payload))
    try:
        yield payloads
    finally:
        await conn.close()


async def test_a_queued_run_is_announced_when_created_and_a_running_one_is_not(
    pg: PostgresStore, heard: list[str], pg_dsn: str
) -> None:
    await pg.create_run(make_run("queued-1", status=RunStatus.QUEUED), [], None)
    await pg.create_run(make_run("running-1"), [], None)
    with pytest.raises(RunExistsError):  # rolled back: nothing is sent
        await pg.create_run(make_run("queued-1", status=RunStatus.QUEUED), [], None)
    assert await _heard_until_marker(heard, pg_dsn) == ["queued-1"]


async def test_an_answer_that_queues_a_run_and_every_released_lease_are_announced(
    pg: PostgresStore, heard: list[str], pg_dsn: str
) -> None:
    await pg.create_run(make_run("waiting-1", status=RunStatus.WAITING), [], None,
                        requests=[request("waiting-1", "ck-1", "approve@1#0")])
    _, held = await start_run(pg, "held")
    _, kept = await start_run(pg, "kept")
    await pg.respond("waiting-1", {"approve@1#0": b"true"})
    await pg.release_lease(held, requeue=True)
    await pg.release_lease(kept)  # still running, but nobody holds it: a worker may take it
    await pg.release_lease(held, requeue=True)  # no longer ours: nothing changes, nothing sent
    assert await _heard_until_marker(heard, pg_dsn) == ["waiting-1", "held", "kept"]
    assert (await pg.get_run("kept")).status is RunStatus.RUNNING
    assert (await pg.get_run("held")).status is RunStatus.QUEUED


async def test_listen_calls_back_for_runs_other_processes_queue(
    pg: PostgresStore, pg_dsn: str
) -> None:
    woken = asyncio.Event()
    await pg.listen(woken.set)
    woken.clear()  # listening calls back once at the start, for runs queued before
    async with PostgresStore(pg_dsn, max_size=1) as other:
        await other.create_run(make_run("q1", status=RunStatus.QUEUED), [], None)
    await asyncio.wait_for(woken.wait(), 5)


async def test_listen_connects_again_after_its_connection_is_lost(
    pg: PostgresStore, pg_dsn: str
) -> None:
    woken = asyncio.Event()
    await pg.listen(woken.set)
    [pid] = await _listening_backends(pg_dsn)
    woken.clear()
    await _admin(pg_dsn, lambda conn: conn.fetchval("SELECT pg_terminate_backend($1)", pid))
    await asyncio.wait_for(woken.wait(), 10)  # reconnected: a wake for what it may have missed
    assert (await _listening_backends(pg_dsn)) not in ([], [pid])
    woken.clear()
    await pg.create_run(make_run("q2", status=RunStatus.QUEUED), [], None)
    await asyncio.wait_for(woken.wait(), 5)


async def test_close_stops_listening(pg: PostgresStore, pg_dsn: str) -> None:
    await pg.listen(lambda: None)
    assert len(await _listening_backends(pg_dsn)) == 1
    await pg.close()
    for _ in range(50):
        if not await _listening_backends(pg_dsn):
            return
        await asyncio.sleep(0.1)
    pytest.fail("the listening connection is still open after close()")


async def _admin(dsn: str, action: Callable[[Any], Awaitable[Any]]) -> Any:
    conn = await asyncpg.connect(dsn)
    try:
        return await action(conn)
    finally:
        await conn.close()


async def _listening_backends(dsn: str) -> list[int]:
    """Backends of this database that LISTEN (asyncpg's LISTEN is their last query)."""
    rows = await _admin(dsn, lambda conn: conn.fetch(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
        "AND query LIKE 'LISTEN %' AND pid <> pg_backend_pid()"))
    return [r[0] for r in rows]


async def _heard_until_marker(payloads: list[str], dsn: str) -> list[str]:
    """What was heard before a marker notified afterwards (notifications arrive in order)."""
    await _admin(dsn, lambda conn: conn.execute(f"NOTIFY {RUNS_CHANNEL}, 'marker'"))
    for _ in range(100):
        if "marker" in payloads:
            return payloads[:payloads.index("marker")]
        await asyncio.sleep(0.05)
    pytest.fail(f"the marker notification never arrived (heard {payloads})")


async def test_an_event_that_queues_a_waiting_run_is_announced(
    pg: PostgresStore, heard: list[str], pg_dsn: str
) -> None:
    wait = replace(request("event-1", "ck-1", "listen@1#0", node="listen"), kind="event",
                   payload=orjson.dumps("paid"), response_schema=b"{}")
    await pg.create_run(make_run("event-1", status=RunStatus.WAITING), [], None, requests=[wait])
    await pg.create_run(make_run("event-2", status=RunStatus.WAITING), [], None)
    await pg.send_event("event-2", "paid", b"1")  # nobody waits for it: kept, not queued
    await pg.send_event("event-1", "paid", b"2")
    assert await _heard_until_marker(heard, pg_dsn) == ["event-1"]
    assert (await pg.get_run("event-1")).status is RunStatus.QUEUED


async def test_a_commit_that_finds_a_kept_event_queues_the_run_and_announces_it(
    pg: PostgresStore, heard: list[str], pg_dsn: str
) -> None:
    chain, lease = await start_run(pg, "event-3")
    await pg.send_event("event-3", "paid", b"3")  # held by its execution: kept
    wait = replace(request("event-3", chain.head.id, "listen@1#0", node="listen"), kind="event",
                   payload=orjson.dumps("paid"), response_schema=b"{}")
    await pg.commit(Commit(lease, requests=[wait],
                           run=RunUpdate(RunStatus.WAITING, release=True)))
    assert await _heard_until_marker(heard, pg_dsn) == ["event-3"]
    assert (await pg.get_run("event-3")).status is RunStatus.QUEUED
