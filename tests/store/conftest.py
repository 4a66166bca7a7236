"""The store under test: every conformance test runs once per store kind.

To add a backend, add its name to STORE_KINDS and a branch to ``_make``.
PostgreSQL tests share one database per session (``pg_dsn``, from the
tests' root ``conftest.py``), emptied before each test.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from pgdb import empty_tables, fresh_database

from durable_flow.store._protocols import CheckpointStore
from durable_flow.store.memory._memory import MemoryStore
from durable_flow.store.postgres._postgres import PostgresStore
from durable_flow.store.sqlite._sqlite import SqliteStore

STORE_KINDS = ["memory", "sqlite", "postgres"]


@pytest.fixture
def fresh_pg() -> Iterator[str]:
    """A database of this test alone (for the migration tests)."""
    with fresh_database() as dsn:
        yield dsn


async def _make(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> CheckpointStore:
    if kind == "memory":
        return MemoryStore()
    if kind == "sqlite":  # a copy of the session's file at head (creating one: test_sqlite_creation)
        path = tmp_path / "store.db"
        shutil.copyfile(request.getfixturevalue("sqlite_at_head"), path)
        return SqliteStore(path)
    if kind == "postgres":
        dsn = request.getfixturevalue("pg_dsn")
        store = PostgresStore(dsn, max_size=4)
        await store.setup()  # migrates the session's database once
        await empty_tables(dsn)
        return store
    raise ValueError(kind)


@pytest.fixture(params=STORE_KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[CheckpointStore]:
    s = await _make(request.param, request, tmp_path)
    await s.setup()
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
async def pg(pg_dsn: str) -> AsyncIterator[PostgresStore]:
    """A PostgresStore on the session's database, emptied first (the PostgreSQL-only tests)."""
    store = PostgresStore(pg_dsn, max_size=4)
    await store.setup()
    await empty_tables(pg_dsn)
    try:
        yield store
    finally:
        await store.close()
