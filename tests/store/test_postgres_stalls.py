"""PostgresStore when a peer stops answering: no connection holds a run hostage.

The store's traffic goes through :class:`NetProxy`, which the tests freeze (a
stalled network, a paused VM: sockets open, nothing moves), cut, or make
refuse new connections (a server that is down).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import pytest
from netproxy import NetProxy
from pgdb import empty_tables

from durable_flow.errors import LeaseLostError, RunLockedError, StoreError
from durable_flow.store._protocols import Claim, Commit, Lease
from durable_flow.store.postgres import _postgres
from durable_flow.store.postgres._postgres import POSTGRES, PostgresStore
from durable_flow.store.sql._base import Op
from durable_flow.store.sql._tables import queries_for

from .builders import Chain, make_run, start_run, step

Q = queries_for(POSTGRES)


async def _until(condition: Callable[[], Awaitable[bool] | bool], what: str,
                 seconds: float = 10) -> None:
    async with asyncio.timeout(seconds):
        while True:
            result = condition()
            if await result if not isinstance(result, bool) else result:
                return
            await asyncio.sleep(0.01)
    raise AssertionError(what)


@pytest.fixture
async def proxy() -> AsyncIterator[NetProxy]:
    async with NetProxy() as p:
        yield p


async def _backends_holding_runs(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval(
            "SELECT count(DISTINCT l.pid) FROM pg_locks l WHERE l.relation = 'runs'::regclass "
            "AND l.mode = 'RowShareLock' AND l.granted AND l.pid <> pg_backend_pid()"))
    finally:
        await conn.close()


def _live_connections(store: PostgresStore) -> int:
    """The pool's open connections."""
    return sum(1 for h in store.driver._pool._holders
               if h._con is not None and not h._con.is_closed())


def _no_session_left_behind(proxy: NetProxy, store: PostgresStore) -> bool:
    """Every connection through the proxy is one the store still uses."""
    return proxy.open == _live_connections(store) and proxy.held == 0


# -- the sessions' limits ---------------------------------------------------------------


async def test_every_session_carries_timeouts_and_keepalives_from_stall_timeout(
    pg_dsn: str,
) -> None:
    async with PostgresStore(pg_dsn, stall_timeout=2.0, max_size=1) as store:
        rows = await store.driver.fetch(
            "SELECT name, setting FROM pg_settings WHERE name = ANY($1)",
            ["lock_timeout", "idle_in_transaction_session_timeout", "tcp_keepalives_idle",
             "tcp_keepalives_interval", "tcp_keepalives_count", "tcp_user_timeout"])
        assert dict(rows) == {
            "lock_timeout": "400", "idle_in_transaction_session_timeout": "2000",
            "tcp_keepalives_idle": "2", "tcp_keepalives_interval": "1",
            "tcp_keepalives_count": "3", "tcp_user_timeout": "4000"}
        async with store.driver._pool.acquire() as conn:
            sock = conn._transport.get_extra_info("socket")
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == 2
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT) == 3
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 4000


# -- a holder stalled inside a transaction ------------------------------------------------


async def test_a_holder_stalled_inside_a_transaction_holds_its_run_for_stall_timeout_only(
    pg_dsn: str, proxy: NetProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = _postgres._perform
    stalls: list[str] = []

    async def perform(conn: Any, op: Op) -> object:
        result = await real(conn, op)
        if op.stmt.sql == Q.lease_check.sql and not stalls:
            stalls.append(op.stmt.sql)
            proxy.freeze()  # the holder's row lock is taken: it stops answering now
        return result

    # the server ends the holder's stalled session after its stall_timeout: long enough
    # that the four refused calls below (1 s lock waits each, at most) see it still there
    # on a loaded machine
    holder = PostgresStore(proxy.dsn(pg_dsn), stall_timeout=4.0, max_size=2)
    other = PostgresStore(pg_dsn, stall_timeout=1.0)
    async with holder, other:
        await empty_tables(pg_dsn)
        chain, lease = await start_run(holder, "r1", ttl=0.001)  # expired at once
        monkeypatch.setattr(_postgres, "_perform", perform)
        stalled = asyncio.create_task(holder.put_step(lease, step(
            "r1", chain.head.id, "n", "s1", b"1")))
        await _until(lambda: proxy.frozen, "the holder to stall inside its transaction")
        async with asyncio.timeout(5):  # without lock_timeout each of these waits for hours
            for call in (other.claim(Claim("r1", "other", 30)), other.respond("r1", {}),
                         other.send_event("r1", "ev", b"1"), other.cancel_run("r1")):
                with pytest.raises(RunLockedError, match="a transaction that holds its row"):
                    await call
        assert await _backends_holding_runs(pg_dsn) == 1  # answered while it still held it
        taken = await _claim_once_free(other, Claim("r1", "other", 30))
        assert await _backends_holding_runs(pg_dsn) == 0  # the server ended the stalled session
        proxy.thaw()
        with pytest.raises(LeaseLostError):
            await stalled
    assert taken.epoch == lease.epoch + 1


async def _claim_once_free(store: PostgresStore, claim: Claim) -> Lease:
    async with asyncio.timeout(10):
        while True:
            try:
                return await store.claim(claim)
            except RunLockedError:
                await asyncio.sleep(0.05)


# -- a network that stalls under a statement ----------------------------------------------


async def test_a_statement_the_network_stalls_gives_its_connection_up(
    pg_dsn: str, proxy: NetProxy
) -> None:
    async with PostgresStore(proxy.dsn(pg_dsn), stall_timeout=0.2, reconnect_timeout=0.5,
                             min_size=1, max_size=1) as store:
        await empty_tables(pg_dsn)
        await store.create_run(make_run("r1"), [], None)
        proxy.freeze()
        async with asyncio.timeout(10):  # without a statement timeout it waits for ever
            with pytest.raises(StoreError, match="unreachable"):
                await store.get_run("r1")
        proxy.thaw()
        # every session of the cut-off client ends once packets flow again
        await _until(lambda: _no_session_left_behind(proxy, store), "the abandoned sessions to end")
        assert (await store.get_run("r1")) is not None  # and the store carries on
        assert proxy.open == _live_connections(store) == 1


async def test_a_call_cancelled_mid_statement_leaves_no_session_behind(
    pg_dsn: str, proxy: NetProxy
) -> None:
    async with PostgresStore(proxy.dsn(pg_dsn), min_size=1, max_size=1) as store:
        await empty_tables(pg_dsn)
        await store.create_run(make_run("r1"), [], None)
        proxy.freeze()
        call = asyncio.create_task(store.get_run("r1"))
        await _until(lambda: proxy.held > 0, "the query to be on its way")
        call.cancel()
        async with asyncio.timeout(5):  # a cancel that waited for the server would hang here
            with pytest.raises(asyncio.CancelledError):
                await call
        proxy.thaw()
        await _until(lambda: _no_session_left_behind(proxy, store),
                     "the cancelled call's session to end")
        # the cancelled call's connection was closed, not handed back: the next call
        # needs a new one (a busy machine may have reconnected more than once meanwhile)
        assert (await store.get_run("r1")) is not None
        assert proxy.connections >= 2


# -- setup while the server is down -------------------------------------------------------


async def test_setup_retries_while_the_server_refuses_connections(
    pg_dsn: str, proxy: NetProxy
) -> None:
    proxy.refuse()
    store = PostgresStore(proxy.dsn(pg_dsn), reconnect_timeout=30)
    opening = asyncio.create_task(store.setup())
    await _until(lambda: proxy.refused >= 2 or opening.done(), "setup to try twice")
    proxy.accept()
    await opening
    try:
        assert await store.get_run("nope") is None
    finally:
        await store.close()


async def test_setup_gives_up_after_reconnect_timeout_with_a_clear_error(
    pg_dsn: str, proxy: NetProxy
) -> None:
    proxy.refuse()
    store = PostgresStore(proxy.dsn(pg_dsn), reconnect_timeout=0.3)
    with pytest.raises(StoreError, match=r"cannot connect to PostgreSQL at .* \(retried for "
                                         r"0\.3s\): "):
        await store.setup()
    assert proxy.refused >= 2


# -- lease renewals --------------------------------------------------------------------------


async def test_a_renewal_never_waits_behind_a_busy_pool(pg: PostgresStore) -> None:
    _chain, lease = await start_run(pg, "r1", ttl=30)
    async with contextlib.AsyncExitStack() as busy:
        for _ in range(pg._max_size):  # every pool connection taken by long work
            await busy.enter_async_context(pg.driver._pool.acquire())
        queued = asyncio.create_task(pg.get_run("r1"))  # waits for a pool connection
        async with asyncio.timeout(5):  # behind the pool it would wait for ever
            renewed = await pg.renew_lease(lease, 60)
        assert not queued.done()
    assert (await queued) is not None
    assert renewed.expires_at > lease.expires_at and renewed.epoch == lease.epoch


async def test_a_renewal_connects_again_after_its_connection_is_lost(
    pg: PostgresStore, pg_dsn: str
) -> None:
    _chain, lease = await start_run(pg, "r1", ttl=30)
    await pg.renew_lease(lease, 30)
    conn = await asyncpg.connect(pg_dsn)
    try:  # end every session but the pool's
        pool_pids = {h._con.get_server_pid() for h in pg.driver._pool._holders
                     if h._con is not None}
        ended = await conn.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND NOT pid = ANY($1)", list(pool_pids))
    finally:
        await conn.close()
    assert ended == 1  # the renewal connection
    renewed = await pg.renew_lease(lease, 60)
    assert renewed.epoch == lease.epoch


# -- prune ---------------------------------------------------------------------------------


async def _three_commits(store: PostgresStore, run_id: str) -> tuple[Chain, Lease]:
    chain, lease = await start_run(store, run_id)
    for i in range(3):
        await store.commit(Commit(lease, checkpoint=chain.next(values={"n": i})))
    return chain, lease


async def test_prune_locks_only_the_run_it_changes_and_passes_busy_ones_by(
    pg: PostgresStore, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _three_commits(pg, "r1")
    chain2, lease2 = await _three_commits(pg, "r2")
    await start_run(pg, "r3")  # nothing to prune
    real = _postgres._perform
    during: list[str] = []

    async def perform(conn: Any, op: Op) -> object:
        result = await real(conn, op)
        if op.stmt.sql == Q.cp_delete.sql and not during:
            during.append(str(op.rows[0][0]))
            # prune is inside its transaction on one run: another run commits meanwhile
            async with asyncio.timeout(5):
                await pg.commit(Commit(lease2, checkpoint=chain2.next(values={"late": 1})))
        return result

    monkeypatch.setattr(_postgres, "_perform", perform)
    busy = await asyncpg.connect(pg_dsn)
    try:  # a long transaction on r3 (a commit, a stalled holder) holds its row
        async with busy.transaction():
            await busy.execute("SELECT 1 FROM runs WHERE run_id = 'r3' FOR UPDATE")
            async with asyncio.timeout(10):  # prune used to lock every run it scanned
                removed = await pg.prune(keep_last=1)
    finally:
        await busy.close()
    assert during == ["r1"]
    assert removed == 3 + 4  # r1's, then r2's older ones (its late commit among them)
    assert [c.id for c in await pg.list_checkpoints("r2")] == [chain2.head.id]
