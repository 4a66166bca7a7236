"""Shared fixtures: every behaviour test runs on memory, SQLite and PostgreSQL.

``store_factory`` makes store objects that all see one database: one
MemoryStore, one SQLite file, or the test session's PostgreSQL database
(on the server ``DURABLE_FLOW_TEST_PG_DSN`` names, emptied before each
test; unreachable, the PostgreSQL cases fail, they are never skipped).
``store`` is one of them, ``rt`` a ``Runtime`` on it. ``example_stores``
serves property-based tests: a fresh database of one kind per generated
example, its store objects made inside the example's own event loop.
"""

from __future__ import annotations

import atexit
import functools
import itertools
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer.testing
from argon2 import PasswordHasher
from pgdb import empty_tables, fresh_database, run_async
from plainlogs import use_plain_tracebacks

from durable_flow import MemoryStore, PostgresStore, Runtime, SqliteStore
from durable_flow.runtime.people import _passwords
from durable_flow.store.sql._cache import CACHE_ENV, load_or_compile, statements_for

# The process markers and the guard that fails a test starting a process without one.
pytest_plugins = ["childguard"]

STORES = ["memory", "sqlite", "postgres"]
#: Connections of each PostgresStore the fixtures make (a test may hold several stores).
PG_POOL = 4

# The statement cache (store/sql/_cache.py) of a test session lives in a temporary
# directory, never in the developer's home; subprocesses of the tests inherit it.
os.environ[CACHE_ENV] = tempfile.mkdtemp(prefix="durable-flow-statements-")
atexit.register(shutil.rmtree, os.environ[CACHE_ENV], ignore_errors=True)

use_plain_tracebacks()  # rich's tracebacks of logged errors were a third of the tests' CPU

# Passwords hashed in the test processes are argon2id at a low cost (one pass over
# 8 MiB instead of three over 64 MiB: a quarter of a second of CPU per hash and per
# login). Verifying reads the cost from the stored hash, so a UI server the tests
# start checks these quickly too; CLI processes (`durable-flow users add`) hash at
# the product's cost, and tests/ui/test_people.py checks that cost.
_passwords._HASHER = PasswordHasher(time_cost=1, memory_cost=8192, parallelism=1)

# typer's CliRunner turns the Typer app into its click command at every invoke, evaluating
# the annotations of every command (about 35 ms of CPU each time, a sixth of the CLI
# tests'). The console script does that once per process; the tests now do too. The click
# command is a definition: each invoke still parses its arguments in a new context.
typer.testing._get_command = functools.cache(typer.testing._get_command)


@pytest.fixture(scope="session", autouse=True)
def _statements_from_the_cache() -> None:
    """SQL stores in the tests run on statements read back from the cache, as a CLI does."""
    for dialect in ("sqlite", "postgresql"):
        load_or_compile(dialect)  # compiles, and writes the file
    statements_for.cache_clear()  # the stores made from now on read it


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    """A database of this test session on the test server, migrated to head."""
    with fresh_database() as dsn:
        run_async(_migrate(dsn))
        yield dsn


async def _migrate(dsn: str) -> None:
    store = PostgresStore(dsn, max_size=1)
    try:
        await store.setup()
    finally:
        await store.close()


@pytest.fixture(scope="session")
def sqlite_at_head(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated to head once a session; each test's store starts on a copy.

    Migrating a new file runs alembic (about 60 ms of CPU); a copy at head opens on
    the stores' fast path. Creating and upgrading files has tests of its own.
    """
    path = tmp_path_factory.mktemp("sqlite-at-head") / "runs.db"
    run_async(_setup_and_close(SqliteStore(path)))
    return path


async def _setup_and_close(store: Any) -> None:
    try:
        await store.setup()
    finally:
        await store.close()


@pytest.fixture(params=STORES)
async def store_factory(request: pytest.FixtureRequest,
                        tmp_path: Path) -> AsyncIterator[Callable[[], Any]]:
    """Make store objects that all see the same data; the SQL ones are closed afterwards."""
    one = await _stores_of(request, tmp_path).fresh()
    if request.param == "memory":
        yield one
        return
    made: list[Any] = []

    def make() -> Any:
        made.append(one())
        return made[-1]
    try:
        yield make
    finally:
        for store in made:
            await store.close()


@dataclass
class ExampleStores:
    """Fresh databases of one store kind: one per test (``store_factory``) or per example."""

    kind: str
    sqlite_at_head: Path | None = None
    pg_dsn: str | None = None
    folder: Path | None = None
    made: int = 0

    async def fresh(self) -> Callable[[], Any]:
        """An empty database at head; returns what makes store objects that all see it.

        Memory: one MemoryStore (every call returns it). SQLite: a new copy of
        the session's file at head (the last example's copy is removed).
        PostgreSQL: the session's database, emptied. Call it inside the example's
        event loop; whoever uses a store object closes it (``Runtime`` does on exit).
        """
        if self.kind == "memory":
            shared = MemoryStore()
            return lambda: shared
        if self.kind == "sqlite":
            assert self.sqlite_at_head is not None and self.folder is not None
            for old in self.folder.glob(f"example-{self.made}.db*"):  # the last example's
                old.unlink()
            self.made += 1
            path = self.folder / f"example-{self.made}.db"
            shutil.copyfile(self.sqlite_at_head, path)
            return lambda: SqliteStore(path)
        assert self.pg_dsn is not None
        await empty_tables(self.pg_dsn)
        dsn = self.pg_dsn
        return lambda: PostgresStore(dsn, max_size=PG_POOL)


@pytest.fixture(scope="module", params=STORES)
def example_stores(request: pytest.FixtureRequest,
                   tmp_path_factory: pytest.TempPathFactory) -> ExampleStores:
    """Memory, SQLite and PostgreSQL for a hypothesis test: ``await example_stores.fresh()``.

    ``store_factory`` gives one database per test, made in the test's event
    loop; a ``@given`` test runs many examples, each in an event loop of its
    own (``asyncio.run``), and each needs an empty database.
    """
    return _stores_of(request, tmp_path_factory.mktemp("examples"))


def _stores_of(request: pytest.FixtureRequest, folder: Path) -> ExampleStores:
    """Fresh databases of the kind the test is parametrised with (SQLite files in ``folder``)."""
    if request.param == "memory":
        return ExampleStores("memory")
    if request.param == "sqlite":
        return ExampleStores("sqlite", sqlite_at_head=request.getfixturevalue("sqlite_at_head"),
                             folder=folder)
    return ExampleStores("postgres", pg_dsn=request.getfixturevalue("pg_dsn"))


@pytest.fixture
def store(store_factory: Callable[[], Any]) -> Any:
    return store_factory()


@pytest.fixture
async def rt(store: Any) -> AsyncIterator[Runtime]:
    async with Runtime(store) as runtime:
        yield runtime


# -- spreading the slow tests over the test workers --------------------------------------------

#: The markers of tests that take seconds (child processes), heaviest kinds first.
_HEAVY = ("fleet", "crash", "browser", "process")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``-n N --dist worksteal``: each worker's share starts with its part of the slow tests.

    worksteal hands worker ``i`` of ``N`` the ``i``-th of ``N`` consecutive
    slices of this list (sizes as it computes them) and later steals queued
    tests from the busiest one. In file order the process tests (fleets, crash
    matrices, browsers) bunch up in the last slices, so one worker ran them in
    a row while the others sat idle at the end. Here they are dealt out in
    turn, heaviest kinds first, at the head of every slice; the quick tests
    fill the rest in their order. Every worker sorts its collection the same
    way, as xdist requires.
    """
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers < 2:  # (a worker's own config does not say how tests are distributed)
        return

    def weight(item: pytest.Item) -> int:
        for rank, marker in enumerate(_HEAVY):
            if item.get_closest_marker(marker) is not None:
                return rank
        return len(_HEAVY)

    heavy = sorted((i for i in items if weight(i) < len(_HEAVY)), key=weight)  # stable
    light = [i for i in items if weight(i) == len(_HEAVY)]
    # a browser test module's tests stay together: they share one Chromium (module fixture)
    groups: dict[tuple[str, ...], list[pytest.Item]] = {}
    for item in heavy:
        together = item.get_closest_marker("browser") is not None
        groups.setdefault((item.path.name,) if together else (item.nodeid,), []).append(item)
    shares: list[list[pytest.Item]] = [[] for _ in range(workers)]
    for group in groups.values():  # each to the share with the fewest slow tests so far
        min(shares, key=len).extend(group)
    left, rest = len(items), iter(light)
    for n, share in enumerate(shares):
        size = left // (workers - n)  # what worksteal sends worker n first
        left -= size
        share.extend(itertools.islice(rest, max(0, size - len(share))))
    shares[-1].extend(rest)
    items[:] = [item for share in shares for item in share]
