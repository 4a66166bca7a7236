"""Throwaway PostgreSQL databases for the tests.

The server is the one ``DURABLE_FLOW_TEST_PG_DSN`` names (``make test`` and
``.ci/run`` set it). Unset or unreachable, the PostgreSQL tests fail: they
are never skipped. Each database is named
``durable_flow_test_<worker>_<pid>_<random>_<n>`` (``<worker>`` is the
pytest-xdist worker, ``gw0``, ``gw1``, ..., or ``main`` without xdist), so the
workers of one session, and sessions run side by side on one server, never
share one; each is dropped afterwards, even with connections still open.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import secrets
import time
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from durable_flow.store.sql._tables import METADATA

ENV = "DURABLE_FLOW_TEST_PG_DSN"
#: the pytest-xdist worker (gw0, gw1, ...), only [a-z0-9] kept: part of a database name
WORKER = re.sub(r"[^a-z0-9]", "", os.environ.get("PYTEST_XDIST_WORKER", "main").lower())
PREFIX = f"durable_flow_test_{WORKER}_{os.getpid()}_{secrets.token_hex(3)}"
_numbers = itertools.count()

T = TypeVar("T")


def server_dsn() -> str:
    """The DSN of the test server; fails the test when it is not configured."""
    dsn = os.environ.get(ENV, "")
    if not dsn:
        pytest.fail(f"{ENV} is not set: the PostgreSQL tests need a server "
                    "(`make test` points them at this machine's)", pytrace=False)
    return dsn


def on_database(dsn: str, name: str) -> str:
    """``dsn`` pointed at database ``name``."""
    return urlunsplit(urlsplit(dsn)._replace(path=f"/{name}"))


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync or async code (on a thread of its own)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


#: How long to wait for a server that is restarting (the fleet tests restart it).
RESTART_WAIT = 20.0


async def _connect(dsn: str) -> Any:
    """A connection, waiting out a server restart (refused, starting up, shutting down)."""
    deadline = time.monotonic() + RESTART_WAIT
    while True:
        try:
            return await asyncpg.connect(dsn, timeout=10)
        except (ConnectionRefusedError, asyncpg.CannotConnectNowError):
            if time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.2)


async def execute(dsn: str, *statements: str) -> None:
    """Run statements on a connection of their own."""
    try:
        conn = await _connect(dsn)
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        raise RuntimeError(f"cannot reach the test PostgreSQL server ({ENV}): {exc}") from exc
    try:
        for sql in statements:
            await conn.execute(sql)
    finally:
        await conn.close()


@contextmanager
def fresh_database(server: str | None = None) -> Iterator[str]:
    """A new, empty database on ``server`` (the test server); yields its DSN, then drops it."""
    server = server or server_dsn()
    name = f"{PREFIX}_{next(_numbers)}"  # only [a-z0-9_]: safe to quote as an identifier
    try:
        run_async(execute(server, f'CREATE DATABASE "{name}"'))
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield on_database(server, name)
    finally:
        run_async(execute(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def empty_tables(dsn: str) -> None:
    """Empty every store table (the schema and its version stay).

    DELETE, not TRUNCATE: on tables this small it takes a few milliseconds,
    where TRUNCATE (new files for every table and index) takes 100-200.
    """
    await execute(dsn, "; ".join(f"DELETE FROM {table}" for table in sorted(METADATA.tables)))
