"""Shared pieces of the tests of durable time, events, deadlines and versions.

``any_store`` makes stores of one kind that all see the same data, for
memory, SQLite and PostgreSQL (one database per test session, emptied before
each test); ``rt`` is a ``Runtime`` on one of them. Test modules import the
fixtures (``any_store_fixture``, ``rt_fixture``, ``wait_pg_dsn_fixture``) from here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from stores.pgdb import fresh_database, truncate_all

from durable_flow import MemoryStore, PostgresStore, Runtime, SqliteStore, Worker
from durable_flow.store._protocols import CheckpointStore

KINDS = ["memory", "sqlite", "postgres"]


@pytest.fixture(name="wait_pg_dsn", scope="session")
def wait_pg_dsn_fixture() -> Iterator[str]:
    """A PostgreSQL database for this session's runtime tests."""
    with fresh_database() as dsn:
        yield dsn


@pytest.fixture(name="any_store", params=KINDS)
async def any_store_fixture(request: pytest.FixtureRequest,
                    tmp_path: Path) -> AsyncIterator[Callable[[], CheckpointStore]]:
    """A factory of store objects sharing one database (one MemoryStore for memory)."""
    made: list[CheckpointStore] = []
    if request.param == "memory":
        shared = MemoryStore()

        def make() -> CheckpointStore:
            return shared
    elif request.param == "sqlite":
        def make() -> CheckpointStore:
            made.append(SqliteStore(tmp_path / "runs.db"))
            return made[-1]
    else:
        dsn = request.getfixturevalue("wait_pg_dsn")
        first = PostgresStore(dsn, max_size=4)
        await first.setup()  # migrates the session's database once
        await truncate_all(dsn)
        await first.close()

        def make() -> CheckpointStore:
            made.append(PostgresStore(dsn, max_size=4))
            return made[-1]
    yield make
    for store in made:
        await store.close()


@pytest.fixture(name="rt")
async def rt_fixture(any_store: Callable[[], CheckpointStore]) -> AsyncIterator[Runtime]:
    async with Runtime(any_store()) as runtime:
        yield runtime


@asynccontextmanager
async def serving(worker: Worker) -> AsyncIterator[Worker]:
    """Run ``worker.serve()`` in a task for the block; stop it after."""
    task = asyncio.create_task(worker.serve())
    try:
        yield worker
    finally:
        await worker.stop()
        await asyncio.wait_for(task, 10)


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    """Poll ``check`` until it holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            pytest.fail("the condition never held")
        await asyncio.sleep(0.02)


async def store_dump(store: CheckpointStore, run_id: str) -> Any:
    """Everything a resume could write for one run."""
    run = await store.get_run(run_id)
    cps = await store.list_checkpoints(run_id)
    return (run, cps, await store.get_requests(run_id), await store.get_mail(run_id),
            [await store.get_task_writes(run_id, m.id) for m in cps])
