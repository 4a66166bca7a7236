"""SqliteStore: the embedded, durable ``CheckpointStore`` (one file, many processes).

Every store call is one transaction run by :mod:`durable_flow.store.sql._base` on a
dedicated thread that owns the ``sqlite3`` connection, so a superstep commit
(lease check, checkpoint, values, log chunks, requests, task writes) costs a
single hop from the event loop to that thread. A driver that hops per
statement (aiosqlite's ``execute``) pays a hop for each of the 4-8
statements of a commit: measured, that alone doubled the commit's cost,
while one hop keeps it near 1.5x a raw one-row SQLite transaction.
aiosqlite still serves the migrations, through SQLAlchemy's asyncio engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
from collections.abc import Callable
from functools import partial
from queue import SimpleQueue
from threading import Thread
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Self, TypeVar

from ..errors import InvalidInputError, StoreError
from .sql import _migrate
from .sql._base import Execute, ExecuteMany, Fetch, FetchEach, Op, SqlStore, Tx, drive
from .sql._queries import SqlDialect

if TYPE_CHECKING:
    from sqlalchemy import Connection

__all__ = ["SqliteStore"]

T = TypeVar("T")

SQLITE = SqlDialect("sqlite")

_SYNCHRONOUS = {"full": "FULL", "normal": "NORMAL"}
_PRAGMAS = frozenset({"journal_mode", "synchronous", "busy_timeout"})
# SQLite keeps the busy timeout in milliseconds in a C int; a larger value
# silently becomes 0 (no waiting at all).
_MAX_BUSY_TIMEOUT = (2**31 - 1) // 1000


def _open(path: str, synchronous: str, busy_timeout: float) -> sqlite3.Connection:
    """Open and configure the store's connection (runs on the store's thread)."""
    # isolation_level=None: sqlite3 must not BEGIN on its own; every
    # transaction is explicit (see _SqliteDriver._transact). timeout is
    # SQLite's busy handler: wait for another process's write lock.
    conn = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None,
                           cached_statements=256)
    try:
        # WAL: readers never block the writer nor wait for it, and a commit
        # appends to the log instead of rewriting pages. The mode is
        # persistent, stored in the file.
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreError(f"cannot use write-ahead logging on {path} (journal mode {mode})")
        # FULL: each commit syncs the WAL, so a committed superstep survives
        # power loss. NORMAL syncs only at checkpoints: faster, never corrupt,
        # but the last commits may roll back after a power loss.
        conn.execute(f"PRAGMA synchronous = {_SYNCHRONOUS[synchronous]}")
    except BaseException:
        conn.close()
        raise
    return conn


def _schema_versions(conn: sqlite3.Connection) -> list[str]:
    """The rows of ``alembic_version`` (empty for a new database)."""
    exists = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                          (_migrate.VERSION_TABLE,)).fetchone()
    if exists is None:
        return []
    return [row[0] for row in conn.execute("SELECT version_num FROM alembic_version")]


def _perform(conn: sqlite3.Connection, op: Op) -> object:
    match op:
        case Execute(stmt, params):
            return conn.execute(stmt.sql, params).rowcount
        case ExecuteMany(stmt, rows):
            return conn.executemany(stmt.sql, rows).rowcount
        case Fetch(stmt, params):
            return conn.execute(stmt.sql, params).fetchall()
        case FetchEach(stmt, rows):
            return [conn.execute(stmt.sql, params).fetchall() for params in rows]
    raise TypeError(f"unknown operation {op!r}")


def _settle(fut: asyncio.Future[Any], result: object, error: BaseException | None) -> None:
    if fut.cancelled():  # the caller gave up waiting; the work itself is done
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)


class _Worker:
    """One thread that owns the ``sqlite3`` connection and runs jobs in order.

    A plain queue and ``call_soon_threadsafe`` cost about half the hop of a
    ``ThreadPoolExecutor``, and the hop is a third of a commit's cost.
    """

    def __init__(self) -> None:
        self._jobs: SimpleQueue[tuple[asyncio.Future[Any], Callable[[], object]] | None] = (
            SimpleQueue())
        Thread(target=self._serve, name="durable-flow-sqlite", daemon=True).start()

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            fut, fn = job
            result: object = None
            error: BaseException | None = None
            try:
                result = fn()
            except BaseException as exc:  # handed to the awaiting coroutine
                error = exc
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting
                fut.get_loop().call_soon_threadsafe(_settle, fut, result, error)

    async def run(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the worker thread and wait for its result."""
        fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._jobs.put((fut, fn))
        return await fut

    def stop(self) -> None:
        """Let the thread end once the jobs already queued are done."""
        self._jobs.put(None)


class _SqliteDriver:
    """Runs transaction functions on the thread that owns the connection."""

    def __init__(self, worker: _Worker, conn: sqlite3.Connection) -> None:
        self._worker = worker
        self._conn = conn

    async def run(self, tx: Callable[[], Tx[T]], *, write: bool) -> T:
        return await self._worker.run(partial(self._transact, tx, write))

    def _transact(self, tx: Callable[[], Tx[T]], write: bool) -> T:
        conn = self._conn
        try:
            # BEGIN IMMEDIATE takes the write lock first, waiting (busy
            # timeout) for another process to finish. A deferred transaction
            # would read first and then, if another process committed in
            # between, fail to upgrade with "database is locked" at once: the
            # busy handler cannot help a snapshot that went stale. Reads use a
            # deferred BEGIN so all their SELECTs see one snapshot.
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                result = drive(tx(), partial(_perform, conn))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite failed: {exc}") from exc
        return result

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` on the connection's thread, outside any transaction."""
        return await self._worker.run(partial(fn, self._conn))

    async def close(self) -> None:
        try:
            await self.call(sqlite3.Connection.close)
        finally:
            self._worker.stop()


def _no_driver_transactions(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None


def _begin_immediate(connection: Connection) -> None:
    # The whole migration is one write transaction: a second process opening
    # the same new file waits here, then finds the schema at head.
    connection.exec_driver_sql("BEGIN IMMEDIATE")


async def _upgrade_file(path: str, busy_timeout: float) -> None:
    """Run the migrations on their own aiosqlite connection, in one transaction.

    SQLAlchemy is imported here only: a database already at head never needs it.
    """
    from sqlalchemy import URL, event
    from sqlalchemy.exc import SQLAlchemyError
    from sqlalchemy.ext.asyncio import create_async_engine
    from sqlalchemy.pool import NullPool

    engine = create_async_engine(URL.create("sqlite+aiosqlite", database=path),
                                 poolclass=NullPool, connect_args={"timeout": busy_timeout})
    event.listen(engine.sync_engine, "connect", _no_driver_transactions)
    event.listen(engine.sync_engine, "begin", _begin_immediate)
    try:
        async with engine.begin() as conn:
            await _migrate.upgrade(conn)
    except SQLAlchemyError as exc:
        raise StoreError(f"cannot open the SQLite store {path}: {exc}") from exc
    finally:
        await engine.dispose()


class SqliteStore(SqlStore):
    """Checkpoints in one SQLite file, shared safely by several processes.

    ``synchronous="full"`` (the default) syncs every commit to disk: a
    committed superstep survives a crash or power loss. ``"normal"`` skips
    that sync (faster commits); after a power loss (not a process crash) the
    last commits may roll back, but the file is never corrupted.

    Writers take SQLite's write lock up front and wait up to
    ``busy_timeout`` seconds for other processes, so concurrent runtimes on
    one file queue instead of failing with "database is locked".

    ``setup()`` creates or upgrades the schema (raising
    ``SchemaVersionError`` for a database written by a newer durable-flow);
    ``async with SqliteStore(path)`` sets up and closes.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Literal["full", "normal"] = "full",
        busy_timeout: float = 30.0,
    ) -> None:
        super().__init__(SQLITE)
        fspath = os.fspath(path) if isinstance(path, str | os.PathLike) else None
        if not isinstance(fspath, str):
            raise InvalidInputError(
                f"SqliteStore needs a file path (a str or os.PathLike), got {path!r}")
        if fspath == ":memory:" or not fspath.strip():
            raise InvalidInputError(
                f"SqliteStore needs a file path, got {fspath!r}; use MemoryStore for memory only")
        if not isinstance(synchronous, str) or synchronous not in _SYNCHRONOUS:
            raise InvalidInputError(
                f"SqliteStore synchronous must be 'full' or 'normal', not {synchronous!r}")
        if (isinstance(busy_timeout, bool) or not isinstance(busy_timeout, int | float)
                or not 0 <= busy_timeout <= _MAX_BUSY_TIMEOUT):  # also refuses NaN
            raise InvalidInputError(
                f"SqliteStore busy_timeout must be a number of seconds from 0 to "
                f"{_MAX_BUSY_TIMEOUT}, got {busy_timeout!r}")
        self._path = fspath
        self._synchronous = synchronous
        self._busy_timeout = float(busy_timeout)
        self._driver: _SqliteDriver | None = None
        self._opening = asyncio.Lock()  # two tasks calling setup() open one connection

    @property
    def path(self) -> str:
        """The database file."""
        return self._path

    @property
    def driver(self) -> _SqliteDriver:
        """The open connection's driver; raises ``StoreError`` before ``setup``."""
        if self._driver is None:
            raise StoreError("SqliteStore is not set up: call setup() or use 'async with'")
        return self._driver

    async def setup(self) -> None:
        """Open the file, then create or upgrade the schema unless it is at head."""
        async with self._opening:
            if self._driver is not None:
                return
            try:
                self._driver = await self._open()
            except (sqlite3.Error, OSError) as exc:
                raise StoreError(f"cannot open the SQLite store {self._path}: {exc}") from exc

    async def _open(self) -> _SqliteDriver:
        worker = _Worker()
        try:
            conn = await worker.run(partial(_open, self._path, self._synchronous,
                                            self._busy_timeout))
        except BaseException:
            worker.stop()
            raise
        driver = _SqliteDriver(worker, conn)
        try:
            # Fast path: a database at head never imports alembic.
            if not _migrate.check_versions(await driver.call(_schema_versions)):
                await _upgrade_file(self._path, self._busy_timeout)
        except BaseException:
            await driver.close()
            raise
        return driver

    async def close(self) -> None:
        """Close the connection; ``setup()`` may open it again."""
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

    async def _pragma(self, name: str) -> object:
        """Read a PRAGMA on the store's own connection (diagnostics and tests)."""
        if name not in _PRAGMAS:
            raise ValueError(f"unsupported pragma {name!r}")
        row = await self.driver.call(lambda conn: conn.execute(f"PRAGMA {name}").fetchone())
        return row[0] if row else None
