"""PostgresStore: the ``CheckpointStore`` that many processes on many machines share.

Every store call is one transaction function of :mod:`durable_flow.store.sql._base`,
run in one transaction on one connection of an asyncpg pool.

Isolation. SQLite makes every write transaction exclusive (``BEGIN
IMMEDIATE``). Here write transactions run at READ COMMITTED and take turns
per run instead: the first statement of each locks the row of the run it
writes (the UPDATE of a commit, renewal, release or cancel; ``SELECT ... FOR
UPDATE`` of the lease before task writes, steps or taking the lease), and
every other row it writes belongs to that run. Two writers of one run
therefore queue as on SQLite, writers of different runs proceed in
parallel, and once the lock is held each statement sees the latest committed
rows, so a check-then-write (is the lease still ours?) cannot be raced.
Creating a run has no row to lock yet: the primary key makes a second
creator fail with a unique violation, and the transaction runs again, sees
the run and reports it as SQLite would. Prune spans runs: its first
statement locks the rows of every run it scans, in run id order.
Read transactions run at REPEATABLE READ, READ ONLY: their statements share
one snapshot, like a deferred SQLite transaction, and never wait nor fail.
SERIALIZABLE would need none of this discipline, but it aborts transactions
that merely read neighbouring index entries, and a commit racing its own
lease renewal would fail and retry where a row lock makes it wait.

Round trips: BEGIN, one per statement (a batch of rows is one pipelined
``fetchmany``; DML ends in ``RETURNING 1`` so a batch still counts its rows)
and COMMIT, so a superstep commit that writes a checkpoint costs six. The
pool skips asyncpg's reset query on release (the store leaves no session
state behind), which would cost one more per transaction.

Failures: a transaction that did not commit runs again, from a fresh
generator, after a lost connection, a server restarting or shutting down, a
deadlock, a serialization failure or a schema change that invalidated its
prepared statements, with exponential backoff for up to
``reconnect_timeout`` seconds. A connection lost during COMMIT is not
retried (the commit may have happened) and raises ``StoreError``, as does
every other driver error.

asyncpg is imported when a ``PostgresStore`` is created, never by
``import durable_flow``. SQLAlchemy (over asyncpg) and alembic run the
migrations, under an advisory lock (see :mod:`durable_flow.store.sql._migrate`).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from collections.abc import Callable
from functools import partial
from types import ModuleType, TracebackType
from typing import Any, Self, TypeVar
from urllib.parse import urlsplit, urlunsplit

from sqlalchemy.exc import SQLAlchemyError
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    stop_after_delay,
    wait_exponential,
    wait_random,
)

from ..errors import InvalidInputError, StoreError
from .sql import _migrate
from .sql._base import Execute, ExecuteMany, Fetch, FetchEach, Op, SqlStore, Tx, drive_async
from .sql._queries import SqlDialect

__all__ = ["POSTGRES", "PostgresStore"]

T = TypeVar("T")

# asyncpg's ``$1`` parameters; batches count their rows through ``RETURNING 1``
POSTGRES = SqlDialect("postgresql", returning=True)

_SCHEMES = ("postgresql", "postgres")
# admin_shutdown, crash_shutdown, cannot_connect_now (starting up or shutting
# down), too_many_connections: the server is going away or not there yet.
_UNAVAILABLE_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "53300"})
# serialization_failure, deadlock_detected: the transaction was rolled back.
_CONFLICT_SQLSTATES = frozenset({"40001", "40P01"})
_UNIQUE_VIOLATION = "23505"
# 50 ms, doubling up to 2 s, plus jitter so that reconnecting processes spread out.
_BACKOFF = wait_exponential(multiplier=0.05, max=2.0) + wait_random(0, 0.05)


def _display(dsn: str) -> str:
    """The DSN for messages, its password hidden."""
    parts = urlsplit(dsn)
    if parts.password is None:
        return dsn
    return urlunsplit(parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@", 1)))


def _asyncpg_dsn(dsn: object) -> str:
    """The DSN as asyncpg takes it (SQLAlchemy's ``+asyncpg`` suffix dropped); checks the scheme."""
    if not isinstance(dsn, str):
        raise InvalidInputError(f"PostgresStore needs a postgresql:// DSN string, got {dsn!r}")
    scheme, sep, rest = dsn.partition("://")
    if not sep or scheme.lower().split("+", 1)[0] not in _SCHEMES:
        raise InvalidInputError(
            f"PostgresStore needs a postgresql://user@host/database DSN, got {_display(dsn)!r}")
    return f"postgresql://{rest}"


def _import_asyncpg() -> ModuleType:
    try:
        return importlib.import_module("asyncpg")
    except ImportError as exc:
        raise StoreError("PostgresStore needs asyncpg: pip install 'durable-flow[postgres]'") from exc


async def _perform(conn: Any, op: Op) -> object:
    """One operation on an asyncpg connection: one round trip (``FetchEach``: one per set)."""
    match op:
        case Fetch(stmt, params):
            return await conn.fetch(stmt.sql, *params)
        case Execute(stmt, params):  # RETURNING 1: a row per changed row
            return len(await conn.fetch(stmt.sql, *params))
        case ExecuteMany(stmt, rows):
            return len(await conn.fetchmany(stmt.sql, rows))
        case FetchEach(stmt, rows):
            return [await conn.fetch(stmt.sql, *params) for params in rows]
    raise TypeError(f"unknown operation {op!r}")


async def _keep_session(_conn: Any) -> None:
    """Pool reset: nothing to undo (asyncpg rolls back an open transaction first)."""


class _ConnectionLost(Exception):
    """The connection closed under a transaction that therefore did not commit."""


class _PostgresDriver:
    """Runs transaction functions on a pool, running again those that did not commit."""

    def __init__(self, asyncpg: ModuleType, pool: Any, reconnect_timeout: float) -> None:
        self._pg = asyncpg
        self._pool = pool
        self._reconnect_timeout = reconnect_timeout

    async def run(self, tx: Callable[[], Tx[T]], *, write: bool) -> T:
        unique_violations = 0

        def again(state: RetryCallState) -> bool:
            nonlocal unique_violations
            exc = state.outcome.exception() if state.outcome else None
            if getattr(exc, "sqlstate", None) == _UNIQUE_VIOLATION:
                # A concurrent transaction committed the same key after we read:
                # run once more, to decide on the rows as they are now.
                unique_violations += 1
                return unique_violations == 1
            return exc is not None and self._transient(exc)

        retrying = AsyncRetrying(retry=again, reraise=True, wait=_BACKOFF,
                                 stop=stop_after_delay(self._reconnect_timeout))
        try:
            result: T = await retrying(self._attempt, tx, write)
        except (_ConnectionLost, OSError, self._pg.PostgresError, self._pg.InterfaceError) as exc:
            raise self._store_error(exc) from exc
        return result

    def _lost(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the connection (or the server) going away."""
        pg = self._pg
        return (isinstance(exc, _ConnectionLost | OSError | pg.PostgresConnectionError
                           | pg.ConnectionDoesNotExistError)
                or getattr(exc, "sqlstate", None) in _UNAVAILABLE_SQLSTATES)

    def _transient(self, exc: BaseException) -> bool:
        """Whether a transaction that failed with ``exc`` may succeed if run again."""
        # A schema change (another process migrating) invalidates prepared
        # statements; asyncpg drops them as it raises, so the next run prepares anew.
        stale = (self._pg.InvalidCachedStatementError, self._pg.OutdatedSchemaCacheError)
        return (self._lost(exc) or isinstance(exc, stale)
                or getattr(exc, "sqlstate", None) in _CONFLICT_SQLSTATES)

    def _closed(self, conn: Any) -> bool:
        try:
            return bool(conn.is_closed())
        except self._pg.InterfaceError:  # the pool took back a connection that closed
            return True

    def _store_error(self, exc: BaseException) -> StoreError:
        detail = str(exc.__cause__ if isinstance(exc, _ConnectionLost) else exc)
        if self._lost(exc):
            return StoreError(f"PostgreSQL is unreachable (retried for "
                              f"{self._reconnect_timeout:g}s): {detail}")
        return StoreError(f"PostgreSQL failed: {type(exc).__name__}: {detail}")

    async def _attempt(self, tx: Callable[[], Tx[T]], write: bool) -> T:
        async with self._pool.acquire() as conn:
            xact = conn.transaction(isolation="read_committed" if write else "repeatable_read",
                                    readonly=not write)
            try:
                await xact.start()
                result = await drive_async(tx(), partial(_perform, conn))
            except BaseException as exc:
                with contextlib.suppress(Exception):  # a closed connection rolled back already
                    await xact.rollback()
                if isinstance(exc, Exception) and self._closed(conn):
                    raise _ConnectionLost() from exc
                raise
            try:
                await xact.commit()
            except Exception as exc:
                if self._lost(exc) or self._closed(conn):
                    raise StoreError("the connection to PostgreSQL was lost during COMMIT: the "
                                     f"transaction may or may not have committed ({exc})") from exc
                raise  # the server refused to commit: nothing was written
            return result

    async def fetch(self, sql: str, *params: object) -> list[Any]:
        """Run one query outside the store's transactions (schema checks, diagnostics)."""
        async with self._pool.acquire() as conn:
            return list(await conn.fetch(sql, *params))

    async def close(self) -> None:
        await self._pool.close()


async def _schema_versions(driver: _PostgresDriver) -> list[str]:
    """The rows of ``alembic_version`` (empty for a new database)."""
    [(exists,)] = await driver.fetch("SELECT to_regclass($1) IS NOT NULL", _migrate.VERSION_TABLE)
    if not exists:
        return []
    return [row[0] for row in await driver.fetch("SELECT version_num FROM alembic_version")]


async def _upgrade(asyncpg: ModuleType, dsn: str) -> None:
    """Run the migrations on their own connection, in one transaction."""
    from sqlalchemy.ext.asyncio import create_async_engine
    from sqlalchemy.pool import NullPool

    engine = create_async_engine("postgresql+asyncpg://", poolclass=NullPool,
                                 async_creator=partial(asyncpg.connect, dsn))
    try:
        async with engine.begin() as conn:
            await _migrate.upgrade(conn)
    finally:
        await engine.dispose()


def _check_options(min_size: object, max_size: object, reconnect_timeout: object) -> None:
    for name, size in (("min_size", min_size), ("max_size", max_size)):
        if isinstance(size, bool) or not isinstance(size, int) or size < (name == "max_size"):
            raise InvalidInputError(f"PostgresStore {name} must be a whole number of "
                                    f"connections, got {size!r}")
    if min_size > max_size:  # type: ignore[operator]  # both checked to be int above
        raise InvalidInputError(f"PostgresStore min_size {min_size} exceeds max_size {max_size}")
    if (isinstance(reconnect_timeout, bool) or not isinstance(reconnect_timeout, int | float)
            or not reconnect_timeout >= 0):  # also refuses NaN
        raise InvalidInputError(f"PostgresStore reconnect_timeout must be a number of seconds "
                                f">= 0, got {reconnect_timeout!r}")


class PostgresStore(SqlStore):
    """Checkpoints in a PostgreSQL database, shared by every process that opens it.

    ``dsn`` is a ``postgresql://user:password@host:port/database`` URL
    (``postgres://`` and SQLAlchemy's ``postgresql+asyncpg://`` work too).
    The store keeps a pool of ``min_size`` to ``max_size`` connections; each
    store call is one transaction on one of them. A call whose connection
    is lost before it commits runs again on a new connection, with backoff,
    for up to ``reconnect_timeout`` seconds (a server restart), then raises
    ``StoreError``.

    ``setup()`` connects and creates or upgrades the schema (processes
    setting up one database at once take turns), raising
    ``SchemaVersionError`` for a database written by a newer durable-flow;
    ``async with PostgresStore(dsn)`` sets up and closes. Needs asyncpg
    (``pip install 'durable-flow[postgres]'``).
    """

    def __init__(
        self,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        reconnect_timeout: float = 30.0,
    ) -> None:
        super().__init__(POSTGRES)
        self._dsn = _asyncpg_dsn(dsn)
        _check_options(min_size, max_size, reconnect_timeout)
        self._min_size, self._max_size = min_size, max_size
        self._reconnect_timeout = float(reconnect_timeout)
        self._asyncpg = _import_asyncpg()
        self._driver: _PostgresDriver | None = None
        self._opening = asyncio.Lock()  # two tasks calling setup() open one pool

    @property
    def driver(self) -> _PostgresDriver:
        """The open pool's driver; raises ``StoreError`` before ``setup``."""
        if self._driver is None:
            raise StoreError("PostgresStore is not set up: call setup() or use 'async with'")
        return self._driver

    async def setup(self) -> None:
        """Connect, then create or upgrade the schema unless it is at head."""
        async with self._opening:
            if self._driver is None:
                self._driver = await self._open()

    async def _open(self) -> _PostgresDriver:
        pg = self._asyncpg
        failures = (OSError, TimeoutError, pg.PostgresError, pg.InterfaceError, SQLAlchemyError)
        try:
            pool = await pg.create_pool(self._dsn, min_size=self._min_size,
                                        max_size=self._max_size, reset=_keep_session)
        except (*failures, ValueError) as exc:  # ValueError: asyncpg cannot parse the DSN
            raise StoreError(f"cannot connect to PostgreSQL at {_display(self._dsn)}: "
                             f"{type(exc).__name__}: {exc}") from exc
        driver = _PostgresDriver(pg, pool, self._reconnect_timeout)
        try:
            # Fast path: a database at head never imports alembic.
            if not _migrate.check_versions(await _schema_versions(driver)):
                await _upgrade(pg, self._dsn)
        except BaseException as exc:
            await driver.close()
            if isinstance(exc, failures):
                raise StoreError(f"cannot set up the PostgreSQL store at {_display(self._dsn)}: "
                                 f"{type(exc).__name__}: {exc}") from exc
            raise
        return driver

    async def close(self) -> None:
        """Close the pool (waiting for calls in flight); ``setup()`` may open it again."""
        driver, self._driver = self._driver, None
        if driver is not None:
            await driver.close()

    async def __aenter__(self) -> Self:
        await self.setup()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
