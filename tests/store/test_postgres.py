"""PostgresStore specifics: isolation under concurrency, round trips, lost connections, options."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import asyncpg
import pytest
from pgdb import empty_tables, run_async
from sqlalchemy import func, select

from durable_flow.errors import (
    InvalidInputError,
    RunExistsError,
    RunNotResumableError,
    StoreError,
)
from durable_flow.model._records import RunStatus
from durable_flow.store._protocols import Claim, Commit, RunUpdate
from durable_flow.store.postgres._postgres import POSTGRES, PostgresStore, _perform, _PostgresDriver
from durable_flow.store.sql._base import Fetch, Op, Tx, drive_async, get_run_tx, prune_tx
from durable_flow.store.sql._tables import RUNS, compile_statement, queries_for, run_params

from .builders import make_run, start_run, state_of

Q = queries_for(POSTGRES)


async def _until(condition: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + 10
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def _lock_waiters(dsn: str) -> list[int]:
    """Backends of the test database waiting for a lock."""
    conn = await asyncpg.connect(dsn)
    try:
        return [r[0] for r in await conn.fetch(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'")]
    finally:
        await conn.close()


async def _someone_waits(dsn: str) -> bool:
    return bool(await _lock_waiters(dsn))


# -- isolation: what a write transaction may assume ------------------------------------------


async def test_a_run_created_by_a_concurrent_transaction_already_exists(
    pg: PostgresStore, pg_dsn: str
) -> None:
    other = await asyncpg.connect(pg_dsn)
    try:
        xact = other.transaction()
        await xact.start()
        await other.fetch(Q.run_insert.sql, *Q.run_insert.bind(run_params(make_run("r1"))))
        creating = asyncio.create_task(pg.create_run(make_run("r1"), [], None))
        await _until(partial(_someone_waits, pg_dsn), "the second creator to wait")
        await xact.commit()
        with pytest.raises(RunExistsError, match="r1 already exists"):
            await creating
    finally:
        await other.close()


async def test_a_claim_during_a_concurrent_cancel_sees_the_cancel(
    pg: PostgresStore, pg_dsn: str
) -> None:
    await pg.create_run(make_run("r1"), [], None)
    other = await asyncpg.connect(pg_dsn)
    try:
        xact = other.transaction()
        await xact.start()
        await other.fetch(Q.run_cancel.sql, *Q.run_cancel.bind({"run_id": "r1", "now": 1}))
        taking = asyncio.create_task(pg.claim(Claim("r1", "a", 30)))
        await _until(partial(_someone_waits, pg_dsn), "the claim to wait")
        await xact.commit()
        with pytest.raises(RunNotResumableError):  # it waited for the row and saw the cancel
            await taking
    finally:
        await other.close()
    run = await pg.get_run("r1")
    assert run is not None and run.status is RunStatus.CANCELLED and run.lease_owner is None


async def test_prune_holds_off_commits_to_the_runs_it_prunes(
    pg: PostgresStore, pg_dsn: str
) -> None:
    chain, lease = await start_run(pg, "r1")
    for i in range(3):
        await pg.commit(Commit(lease, checkpoint=chain.next(values={"n": i})))
    late = chain.next(values={"late": 1})
    committing: asyncio.Task[None] | None = None
    conn = await asyncpg.connect(pg_dsn)

    async def perform(op: Op) -> object:
        nonlocal committing
        result = await _perform(conn, op)
        # Between reading which values checkpoints use and listing the stored
        # ones: a commit landing here would have its new value deleted.
        if op.stmt is Q.cp_versions and committing is None:
            committing = asyncio.create_task(pg.commit(Commit(lease, checkpoint=late)))
            await _until(lambda: _landed_or_waits(committing, pg_dsn), "the commit")
        return result

    try:
        async with conn.transaction(isolation="read_committed"):
            pruned = await drive_async(prune_tx(Q, "r1", None, None), perform)
    finally:
        await conn.close()
    assert committing is not None
    await committing
    assert pruned == 3
    loaded = await pg.load_checkpoint("r1", late.meta.id)
    assert state_of(loaded) == chain.expected[late.meta.id]


async def _landed_or_waits(task: asyncio.Task[None] | None, dsn: str) -> bool:
    return task is not None and (task.done() or await _someone_waits(dsn))


def _count_twice(create_elsewhere: Callable[[], None]) -> Tx[tuple[int, int]]:
    count = compile_statement(select(func.count()).select_from(RUNS), POSTGRES.dialect)
    [(before,)] = yield Fetch(count, ())
    create_elsewhere()  # committed by another connection while this transaction is open
    [(after,)] = yield Fetch(count, ())
    return before, after


async def test_a_read_transaction_sees_one_snapshot(pg: PostgresStore, pg_dsn: str) -> None:
    async def create(run_id: str) -> None:
        async with PostgresStore(pg_dsn) as other:
            await other.create_run(make_run(run_id), [], None)

    def create_elsewhere() -> None:
        run_async(create("r2"))

    await pg.create_run(make_run("r1"), [], None)
    assert await pg.driver.run(partial(_count_twice, create_elsewhere), write=False) == (1, 1)
    assert len(await pg.list_runs()) == 2


# -- round trips ---------------------------------------------------------------------------------


async def test_a_superstep_commit_is_one_statement(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with PostgresStore(pg_dsn, min_size=1, max_size=1) as store:  # migrates a new database
        await empty_tables(pg_dsn)
        chain, lease = await start_run(store, "r1")

        def superstep() -> Commit:
            base = chain.head.id  # a top-level commit names the head it extends, as the engine does
            cp = chain.next(values={"n": len(chain.metas)}, appends={"log": [1]})
            return Commit(lease, extends=base, checkpoint=cp, run=RunUpdate(
                RunStatus.RUNNING, head_checkpoint_id=cp.meta.id))

        await store.commit(superstep())  # prepares the statements on the connection
        calls: list[str] = []
        for name in ("execute", "executemany", "fetch", "fetchmany", "fetchrow", "fetchval"):
            monkeypatch.setattr(asyncpg.Connection, name,
                                _counted(getattr(asyncpg.Connection, name), calls))
        await store.commit(superstep())
    # the run's UPDATE (lease and head check), the checkpoint, its values and its log
    # chunks in one statement, on its own: no BEGIN, no COMMIT (see _pg_advance)
    assert calls == [Q.commit_advance.sql]  # type: ignore[union-attr]


def _counted(method: Callable[..., Any], calls: list[str]) -> Callable[..., Any]:
    async def wrapper(self: Any, query: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(query)
        return await method(self, query, *args, **kwargs)
    return wrapper


# -- failures --------------------------------------------------------------------------------------


async def test_a_transaction_whose_connection_is_lost_runs_again(
    pg: PostgresStore, pg_dsn: str
) -> None:
    chain, lease = await start_run(pg, "r1")
    cp = chain.next(values={"n": 1})
    blocker = await asyncpg.connect(pg_dsn)
    try:
        xact = blocker.transaction()
        await xact.start()
        await blocker.execute("SELECT 1 FROM runs WHERE run_id = 'r1' FOR UPDATE")
        committing = asyncio.create_task(pg.commit(Commit(lease, checkpoint=cp)))
        await _until(partial(_someone_waits, pg_dsn), "the commit to wait")
        [pid] = await _lock_waiters(pg_dsn)
        assert await blocker.fetchval("SELECT pg_terminate_backend($1)", pid)
        await xact.rollback()
    finally:
        await blocker.close()
    await committing
    assert await pg.get_checkpoint("r1", cp.meta.id) == cp.meta
    assert (await pg.thread_head("r1", "")) == cp.meta


async def test_statements_prepared_before_a_schema_change_are_prepared_again(
    fresh_pg: str,
) -> None:
    async with PostgresStore(fresh_pg, max_size=1) as store:
        await store.create_run(make_run("r1", workflow_ref="m:w"), [], None)
        assert await store.get_run("r1") is not None  # run_get is now prepared
        conn = await asyncpg.connect(fresh_pg)
        try:  # as a newer durable-flow's migration might
            await conn.execute("ALTER TABLE runs ALTER COLUMN workflow_ref TYPE text")
        finally:
            await conn.close()
        run = await store.get_run("r1")
    assert run is not None and run.workflow_ref == "m:w"


async def test_calls_retry_an_unreachable_server_until_reconnect_timeout() -> None:
    attempts = 0

    class DownPool:
        def acquire(self) -> Any:
            nonlocal attempts
            attempts += 1
            raise ConnectionRefusedError(111, "Connection refused")

    driver = _PostgresDriver(asyncpg, DownPool(), reconnect_timeout=0.3)
    started = time.monotonic()
    with pytest.raises(StoreError, match=r"unreachable \(retried for 0.3s\): .*refused"):
        await driver.run(partial(get_run_tx, Q, "r1"), write=False)
    assert attempts > 2
    assert 0.3 <= time.monotonic() - started < 3


@pytest.mark.parametrize(("dsn", "reason"), [
    ("postgresql://u:secret@127.0.0.1:1/db", "ConnectionRefusedError"),
    ("postgresql://u:secret@127.0.0.1:port/db", "port"),
])
async def test_an_unreachable_server_is_a_store_error_without_the_password(
    dsn: str, reason: str
) -> None:
    store = PostgresStore(dsn, reconnect_timeout=0.2)
    with pytest.raises(StoreError, match="cannot connect to PostgreSQL at") as err:
        await store.setup()
    assert "secret" not in str(err.value) and "u:***@127.0.0.1" in str(err.value)
    assert reason in str(err.value)
    with pytest.raises(StoreError, match="not set up"):
        await store.get_run("r1")


async def test_a_value_postgresql_cannot_store_is_a_store_error(pg: PostgresStore) -> None:
    with pytest.raises(StoreError, match=r"PostgreSQL failed: .*0x00"):
        await pg.create_run(make_run("nul\x00byte"), [], None)


async def test_a_duplicate_checkpoint_is_refused_and_writes_nothing(
    pg: PostgresStore,
) -> None:
    chain, lease = await start_run(pg, "r1")
    cp = chain.next()
    await pg.commit(Commit(lease, checkpoint=cp))
    with pytest.raises(StoreError, match="head this commit extends has moved"):
        await pg.commit(Commit(lease, checkpoint=cp, run=RunUpdate(RunStatus.FAILED)))
    run = await pg.get_run("r1")
    assert run is not None and run.status is RunStatus.RUNNING


# -- options, schemes, lifecycle, imports -------------------------------------------------------


@pytest.mark.parametrize(("dsn", "options", "message"), [
    (123, {}, "DSN string"),
    ("mysql://u:pw@h/db", {}, "mysql://u:***@h/db"),
    ("/var/run/db.sqlite", {}, "postgresql://user@host/database"),
    ("postgresql://h/db", {"min_size": -1}, "min_size"),
    ("postgresql://h/db", {"max_size": 0}, "max_size"),
    ("postgresql://h/db", {"max_size": 2.5}, "max_size"),
    ("postgresql://h/db", {"min_size": 3, "max_size": 2}, "exceeds"),
    ("postgresql://h/db", {"reconnect_timeout": -1}, "reconnect_timeout"),
    ("postgresql://h/db", {"reconnect_timeout": float("nan")}, "reconnect_timeout"),
    ("postgresql://h/db", {"reconnect_timeout": True}, "reconnect_timeout"),
    ("postgresql://h/db", {"stall_timeout": 0}, "stall_timeout"),
    ("postgresql://h/db", {"stall_timeout": float("inf")}, "stall_timeout"),
    ("postgresql://h/db", {"stall_timeout": "5"}, "stall_timeout"),
])
def test_bad_options_are_refused(dsn: Any, options: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message.replace("*", r"\*")) as err:
        PostgresStore(dsn, **options)
    assert "pw@" not in str(err.value)


@pytest.mark.parametrize("scheme", ["postgres", "postgresql+asyncpg", "PostgreSQL"])
async def test_other_spellings_of_the_scheme_open_the_store(pg_dsn: str, scheme: str) -> None:
    async with PostgresStore(scheme + pg_dsn[pg_dsn.index("://"):]) as store:
        assert await store.get_run("nope") is None


async def test_setup_is_idempotent_and_a_closed_store_opens_again(pg_dsn: str) -> None:
    store = PostgresStore(pg_dsn)
    await asyncio.gather(store.setup(), store.setup())
    driver = store.driver
    await store.setup()
    assert store.driver is driver
    await store.close()
    with pytest.raises(StoreError, match="not set up"):
        await store.list_runs()
    await store.setup()
    await store.list_runs()
    await store.close()
    await store.close()


@pytest.mark.process
def test_asyncpg_is_imported_only_when_a_store_is_created() -> None:
    code = (
        "import sys, durable_flow\n"
        "cls = durable_flow.PostgresStore\n"
        "assert 'asyncpg' not in sys.modules, 'imported by durable_flow'\n"
        "cls('postgresql://h/db')\n"
        "assert 'asyncpg' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
