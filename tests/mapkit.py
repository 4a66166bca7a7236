"""Fixtures of the map tests: a runtime on every store, PostgreSQL included.

Import them into a test module (``from mapkit import every_store, pg_database``);
its tests that take ``rt`` then run on memory, SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from stores.pgdb import fresh_database, truncate_all

from durable_flow import Event, MemoryStore, Runtime, SqliteStore
from durable_flow.store._postgres import PostgresStore


@pytest.fixture(name="map_pg_dsn", scope="module")
def pg_database() -> Iterator[str]:
    """One PostgreSQL database for the module, emptied before each test."""
    with fresh_database() as dsn:
        yield dsn


@pytest.fixture(name="rt", params=["memory", "sqlite", "postgres"])
async def every_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Runtime]:
    """A runtime on each store kind."""
    store: Any
    if request.param == "memory":
        store = MemoryStore()
    elif request.param == "sqlite":
        store = SqliteStore(tmp_path / "runs.db")
    else:
        dsn = request.getfixturevalue("map_pg_dsn")
        store = PostgresStore(dsn, max_size=4)
        await store.setup()
        await truncate_all(dsn)
    async with Runtime(store) as runtime:
        yield runtime


async def collect(events: Any) -> list[Event]:
    """Every event of a stream."""
    return [e async for e in events]
