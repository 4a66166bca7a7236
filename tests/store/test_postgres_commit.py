"""PostgresStore at COMMIT: a connection the server dropped first, and a COMMIT whose reply is lost.

A restart of the server ends every session: one idle between its last
statement and COMMIT never sends the COMMIT (it surely did not commit, so it
runs again); one whose COMMIT was on its way leaves the outcome unknown, and
only a transaction that may run twice (a renewal, a release, task writes, a
step result) runs again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import asyncpg
import pytest
from asyncpg.transaction import Transaction
from sqlalchemy import func, select

from durable_flow.errors import StoreError
from durable_flow.model._records import RunStatus
from durable_flow.store._protocols import Commit, RunUpdate
from durable_flow.store.postgres import _postgres
from durable_flow.store.postgres._postgres import POSTGRES, PostgresStore, _PostgresDriver
from durable_flow.store.sql._base import Fetch, Op, Tx, create_run_tx
from durable_flow.store.sql._tables import compile_statement, queries_for

from .builders import make_run, start_run, step, task_write

Q = queries_for(POSTGRES)
BACKEND_PID = compile_statement(select(func.pg_backend_pid()), POSTGRES.dialect)


async def _terminate(dsn: str, pid: int) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        assert await conn.fetchval("SELECT pg_terminate_backend($1)", pid)
    finally:
        await conn.close()


def _gone(conn: Any) -> bool:
    try:
        return bool(conn.is_closed())
    except asyncpg.InterfaceError:  # the pool took the closed connection back already
        return True


async def test_a_transaction_whose_session_ended_before_commit_runs_again(
    pg: PostgresStore, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = _postgres._perform
    ended: list[int] = []

    async def perform(conn: Any, op: Op) -> object:
        rows = await real(conn, op)
        if isinstance(op, Fetch) and op.stmt is BACKEND_PID and not ended:
            ended.append(rows[0][0])  # type: ignore[index]
            await _terminate(pg_dsn, ended[0])  # as a restarting server ends idle sessions
            while not _gone(conn):
                await asyncio.sleep(0.01)
        return rows

    def create_then_ask_pid() -> Tx[int]:
        yield from create_run_tx(Q, make_run("r1"), [], None)
        rows = yield Fetch(BACKEND_PID, ())
        return int(rows[0][0])

    monkeypatch.setattr(_postgres, "_perform", perform)
    pid = await pg.driver.run(create_then_ask_pid, write=True)
    assert ended and pid != ended[0]  # the second run, on another session, committed
    assert await pg.get_run("r1") is not None


class _LostReplies:
    """Once armed, the next COMMIT happens, then its connection drops before the reply."""

    def __init__(self) -> None:
        self.armed = False
        self.lost = 0

    def arm(self) -> None:
        self.armed = True


@pytest.fixture
def replies(monkeypatch: pytest.MonkeyPatch) -> _LostReplies:
    real = Transaction.commit
    replies = _LostReplies()

    async def commit(self: Transaction) -> None:
        await real(self)
        if replies.armed:
            replies.armed = False
            replies.lost += 1
            self._connection.terminate()
            raise asyncpg.ConnectionDoesNotExistError(
                "connection was closed in the middle of operation")

    monkeypatch.setattr(Transaction, "commit", commit)
    return replies


async def test_an_idempotent_write_whose_commit_reply_was_lost_runs_again(
    pg: PostgresStore, replies: _LostReplies
) -> None:
    chain, lease = await start_run(pg, "r1")
    base = chain.head.id
    replies.arm()
    await pg.put_step(lease, step("r1", base, "a", "charge", b"1"))
    replies.arm()
    await pg.put_task_writes(lease, [task_write("r1", base, "a")])
    replies.arm()
    renewed = await pg.renew_lease(lease, 60)
    replies.arm()
    await pg.release_lease(renewed, requeue=True)
    assert replies.lost == 4  # each committed, lost its reply, ran again and returned
    assert await pg.get_steps("r1", base, "a") == {"charge": b"1"}
    assert [w.node for w in await pg.get_task_writes("r1", base)] == ["a"]
    run = await pg.get_run("r1")
    assert run is not None and (run.status, run.lease_owner) == (RunStatus.QUEUED, None)


async def test_a_commit_whose_reply_was_lost_is_a_store_error(
    pg: PostgresStore, replies: _LostReplies
) -> None:
    chain, lease = await start_run(pg, "r1")
    base = chain.head.id
    cp = chain.next(values={"n": 1})
    # a commit that leaves the run waiting: a transaction (a plain advance is one statement)
    commit = Commit(lease, extends=base, checkpoint=cp,
                    run=RunUpdate(RunStatus.WAITING, head_checkpoint_id=cp.meta.id))
    replies.arm()
    with pytest.raises(StoreError, match="may or may not have committed"):
        await pg.commit(commit)
    assert replies.lost == 1
    assert (await pg.thread_head("r1", "")) == cp.meta  # it had committed, once


async def test_a_superstep_statement_whose_reply_was_lost_is_decided_and_succeeds(
    pg: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the common superstep commit is one statement: with its reply lost, the usual
    # transaction runs, finds the run's head is the commit's own checkpoint, and succeeds
    chain, lease = await start_run(pg, "r1")
    real = asyncpg.Connection.fetchval
    lost: list[str] = []

    async def fetchval(self: asyncpg.Connection, query: str, *args: Any, **kw: Any) -> Any:
        value = await real(self, query, *args, **kw)
        if query == Q.commit_advance.sql:  # type: ignore[union-attr]
            lost.append(query)
            self.terminate()
            raise asyncpg.ConnectionDoesNotExistError(
                "connection was closed in the middle of operation")
        return value

    monkeypatch.setattr(asyncpg.Connection, "fetchval", fetchval)
    for n in range(3):
        base = chain.head.id
        cp = chain.next(values={"n": n})
        await pg.commit(Commit(lease, extends=base, checkpoint=cp,
                               run=RunUpdate(RunStatus.RUNNING, head_checkpoint_id=cp.meta.id)))
        assert (await pg.thread_head("r1", "")) == cp.meta
        run = await pg.get_run("r1")
        assert run is not None and run.head_checkpoint_id == cp.meta.id
    assert len(lost) == 3
    assert len(await pg.list_checkpoints("r1")) == 4  # each written once


class _Connection:
    """Just enough of an asyncpg connection for a transaction with no statements."""

    def __init__(self, commit_error: BaseException | None) -> None:
        self.commit_error = commit_error
        self.closed = False

    def is_closed(self) -> bool:
        return self.closed

    def transaction(self, **_options: Any) -> Any:
        return self

    async def start(self) -> None:
        pass

    async def rollback(self) -> None:
        pass

    async def commit(self) -> None:
        if self.commit_error is not None:
            self.closed = True
            raise self.commit_error


class _Pool:
    def __init__(self, *commit_errors: BaseException) -> None:
        self.errors = list(commit_errors)
        self.attempts = 0

    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[_Connection]:
        self.attempts += 1
        yield _Connection(self.errors.pop(0) if self.errors else None)


def _no_statements() -> Tx[str]:
    return "committed"
    yield  # a transaction function is a generator


async def test_a_commit_asyncpg_refused_to_send_on_a_broken_connection_runs_again() -> None:
    pool = _Pool(asyncpg.InternalClientError(
        "cannot switch to state 15; another operation (2) is in progress"))
    driver = _PostgresDriver(asyncpg, pool, reconnect_timeout=5)
    assert await driver.run(_no_statements, write=True) == "committed"
    assert pool.attempts == 2


@pytest.mark.parametrize(("idempotent", "attempts"), [(True, 2), (False, 1)])
async def test_only_an_idempotent_transaction_runs_again_after_an_unknown_commit(
    idempotent: bool, attempts: int
) -> None:
    pool = _Pool(asyncpg.ConnectionDoesNotExistError("closed in the middle of operation"))
    driver = _PostgresDriver(asyncpg, pool, reconnect_timeout=5)
    run = partial(driver.run, _no_statements, write=True, idempotent=idempotent)
    if idempotent:
        assert await run() == "committed"
    else:
        with pytest.raises(StoreError, match="may or may not have committed"):
            await run()
    assert pool.attempts == attempts
