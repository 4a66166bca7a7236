"""SqliteStore: the embedded, durable ``CheckpointStore`` (one file, many processes).

Every store call is one transaction run by :mod:`durable_flow.store.sql._base` on a
dedicated thread that owns a ``sqlite3`` connection, so a superstep commit
(lease check, checkpoint, values, log chunks, requests, task writes) costs a
single hop from the event loop to that thread. A driver that hops per
statement (aiosqlite's ``execute``) pays a hop for each of the 4-8
statements of a commit: measured, that alone doubled the commit's cost,
while one hop keeps it near 1.5x a raw one-row SQLite transaction.

Writes and reads have a thread and a connection each. Write transactions
take their turns on the writer; read transactions (snapshots, listings,
loading a head) run on the reader, each in one deferred transaction, so all
its SELECTs see one snapshot. In WAL mode a reader never blocks the writer
nor waits for it: listing the 20,000 checkpoints of a long run does not
delay another run's superstep commit, and a commit does not delay an
inspection. A read that starts after a write returned sees that write.
aiosqlite still serves the migrations, through SQLAlchemy's asyncio engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import sqlite3
import sys
import time
from collections.abc import Callable
from functools import partial
from queue import SimpleQueue
from threading import Thread
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ..._logs import get_logger
from ...errors import InvalidInputError, StoreError
from ..sql import _migrate
from ..sql._base import Execute, ExecuteMany, Fetch, FetchEach, Notify, Op, SqlStore, Tx, drive
from ..sql._cache import sql_dialect

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from ..sql._tables import SqlDialect

__all__ = ["SqliteStore"]

T = TypeVar("T")


def __getattr__(name: str) -> SqlDialect:
    # SQLITE, the SQLAlchemy dialect, made when asked for (tests, tools): opening a
    # store reads its statements from the statement cache and imports no SQLAlchemy.
    if name == "SQLITE":
        return sql_dialect("sqlite")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_SYNCHRONOUS = {"full": "FULL", "normal": "NORMAL"}
_PRAGMAS = frozenset({"journal_mode", "synchronous", "busy_timeout"})
# SQLite keeps the busy timeout in milliseconds in a C int; a larger value
# silently becomes 0 (no waiting at all).
_MAX_BUSY_TIMEOUT = (2**31 - 1) // 1000
#: Write transactions between two checkpoints of the log (a superstep commit
#: writes a few pages; SQLite's own threshold is 1,000 pages).
CHECKPOINT_EVERY = 100
_log = get_logger()


def _open(path: str, synchronous: str, busy_timeout: float) -> sqlite3.Connection:
    """Open and configure the writer's connection (runs on the writer's thread)."""
    # isolation_level=None: sqlite3 must not BEGIN on its own; every
    # transaction is explicit (see _SqliteDriver._transact). timeout is
    # SQLite's busy handler, installed before any statement runs: wait for
    # another process's write lock.
    conn = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None,
                           cached_statements=256)
    try:
        _use_wal(conn, path, busy_timeout)
        # FULL: each commit syncs the WAL, so a committed superstep survives
        # power loss. NORMAL syncs only at checkpoints: faster, never corrupt,
        # but the last commits may roll back after a power loss.
        conn.execute(f"PRAGMA synchronous = {_SYNCHRONOUS[synchronous]}")
        # No checkpoint inside a commit: SQLite would copy the log into the file
        # (and sync it) in the commit that crosses its threshold, a superstep
        # many times slower than the others. The reader's thread checkpoints
        # instead, beside the commits (_SqliteDriver._after_write).
        conn.execute("PRAGMA wal_autocheckpoint = 0")
    except BaseException:
        conn.close()
        raise
    return conn


def _open_reader(path: str, busy_timeout: float) -> sqlite3.Connection:
    """Open the readers' connection (runs on the reader's thread, at its first read).

    The file is already in WAL mode (persistent in the file; the writer's
    connection switched it and keeps it open), and ``synchronous`` only
    matters to commits. The busy handler covers the rare moments a WAL
    reader must wait (recovering the log after a crash, a RESTART or
    TRUNCATE checkpoint of another process). ``query_only``: a transaction
    run as a read can never write.
    """
    conn = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None,
                           cached_statements=256)
    try:
        conn.execute("PRAGMA query_only = ON")
    except BaseException:
        conn.close()
        raise
    return conn


def _use_wal(conn: sqlite3.Connection, path: str, busy_timeout: float) -> None:
    """Switch the file to write-ahead logging, retrying while other processes hold it.

    WAL: readers never block the writer nor wait for it, and a commit appends
    to the log instead of rewriting pages. The mode is persistent, stored in
    the file, so only the first opener of a new file changes it; but several
    processes opening one new file at once all try. The switch reads the
    file, then needs it exclusively, and SQLite answers "database is locked"
    at once, without its busy handler, to a reader asking for more while
    another one waits for the same (it would deadlock). So the switch is
    retried here, with jittered backoff, for up to ``busy_timeout`` seconds.
    """
    deadline = time.monotonic() + busy_timeout
    delay = 0.001
    while True:
        try:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            break
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                raise
        time.sleep(random.uniform(delay / 2, delay))
        delay = min(delay * 2, 0.05)
    if str(mode).lower() != "wal":
        raise StoreError(f"cannot use write-ahead logging on {path} (journal mode {mode})")


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
        case Notify():  # no other process can listen: workers on this file poll
            return None
    raise TypeError(f"unknown operation {op!r}")


def transact(conn: sqlite3.Connection, tx: Callable[[], Tx[T]], begin: str | None) -> T:
    """Run ``tx()`` on ``conn`` in one transaction opened by ``begin`` (None: no transaction).

    Rolled back if anything raises; SQLite's errors become ``StoreError``.
    """
    try:
        if begin is None:
            return drive(tx(), partial(_perform, conn))
        conn.execute(begin)
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


def _settle(fut: asyncio.Future[Any], result: object, error: BaseException | None) -> None:
    if fut.cancelled():  # the caller gave up waiting; the work itself is done
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)


class _Worker:
    """One thread that owns a ``sqlite3`` connection and runs jobs in order.

    A plain queue and ``call_soon_threadsafe`` cost about half the hop of a
    ``ThreadPoolExecutor``, and the hop is a third of a commit's cost.
    """

    def __init__(self, name: str = "durable-flow-sqlite") -> None:
        self._jobs: SimpleQueue[tuple[asyncio.Future[Any], Callable[[], object]] | None] = (
            SimpleQueue())
        Thread(target=self._serve, name=name, daemon=True).start()

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
    """Runs write transactions on the writer's thread, reads on the reader's.

    Each thread owns its connection to the file: the writer's is opened by
    the store (it switches the file to WAL), the reader's by the first read.
    One reader is enough. Its job is that reads never wait behind a commit
    nor delay one, and one thread does that. More readers would only let a
    short read pass a long one: they would run in parallel only inside
    SQLite (which releases the GIL), while decoding the rows, a large part
    of a long read, holds the GIL; each would keep a connection and a WAL
    snapshot open; and before this every read already waited its turn
    behind every other call.
    """

    def __init__(self, writer: _Worker, conn: sqlite3.Connection, path: str,
                 busy_timeout: float) -> None:
        self._writer = writer
        self._conn = conn
        self._reader = _Worker("durable-flow-sqlite-read")
        self._reader_conn: sqlite3.Connection | None = None  # only touched on the reader's thread
        self._path = path
        self._busy_timeout = busy_timeout
        self._closed = False
        self._writes = 0
        self._checkpoint: asyncio.Future[None] | None = None

    def _worker(self, write: bool) -> _Worker:
        if self._closed:
            raise StoreError("SqliteStore is closed: call setup() to open it again")
        return self._writer if write else self._reader

    async def run(self, tx: Callable[[], Tx[T]], *, write: bool, idempotent: bool = False) -> T:
        # local connections: a COMMIT either returns or raises, never leaves a doubt
        result = await self._worker(write).run(partial(self._transact, tx, write))
        if write:
            self._after_write()
        return result

    def _after_write(self) -> None:
        """Every ``CHECKPOINT_EVERY`` writes, checkpoint the log beside the commits.

        At most one checkpoint is under way at a time (:meth:`_checkpoint_log`).
        """
        self._writes += 1
        if self._writes % CHECKPOINT_EVERY or self._checkpoint is not None or self._closed:
            return
        task = asyncio.ensure_future(self._checkpoint_log())
        self._checkpoint = task

        def done(t: asyncio.Future[None]) -> None:
            self._checkpoint = None
            if not t.cancelled() and (exc := t.exception()) is not None:
                _log.warning("sqlite_checkpoint_failed", path=self._path, error=str(exc))

        task.add_done_callback(done)

    async def _checkpoint_log(self) -> None:
        """Copy the log into the file, so that it starts over instead of growing.

        The reader's thread copies the bulk with a PASSIVE checkpoint, which
        never takes the write lock: commits go on beside it. SQLite starts the
        log over only at a write that finds every frame copied, which a busy
        writer never lets happen; so the writer's thread then copies the few
        frames committed meanwhile, between two of its transactions.
        """
        await self._reader.run(partial(self._passive, write=False))
        if not self._closed:
            await self._writer.run(partial(self._passive, write=True))

    def _passive(self, *, write: bool) -> None:
        """``PRAGMA wal_checkpoint(PASSIVE)`` on one thread's connection (on that thread)."""
        if not self._closed:
            conn = self._conn if write else self._read_conn()
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def _read_conn(self) -> sqlite3.Connection:
        """The reader's connection, opened by the first read (on the reader's thread)."""
        if self._reader_conn is None:
            self._reader_conn = _open_reader(self._path, self._busy_timeout)
        return self._reader_conn

    def _transact(self, tx: Callable[[], Tx[T]], write: bool) -> T:
        try:
            conn = self._conn if write else self._read_conn()
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite failed: {exc}") from exc
        # BEGIN IMMEDIATE takes the write lock first, waiting (busy timeout)
        # for another process to finish. A deferred transaction would read
        # first and then, if another process committed in between, fail to
        # upgrade with "database is locked" at once: the busy handler cannot
        # help a snapshot that went stale. Reads use a deferred BEGIN: their
        # first SELECT takes a WAL snapshot that all their SELECTs see,
        # without taking or waiting for the write lock.
        return transact(conn, tx, "BEGIN IMMEDIATE" if write else "BEGIN")

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` on the writer's connection and thread, outside any transaction."""
        return await self._worker(True).run(partial(fn, self._conn))

    def _close_reader(self) -> None:
        conn, self._reader_conn = self._reader_conn, None
        if conn is not None:
            conn.close()

    async def close(self) -> None:
        """Close both connections (after the calls already queued), then end both threads.

        Refuses new calls first, so no read can open the reader's connection
        again behind its close; a close that fails does not keep the other
        connection open nor a thread running.
        """
        self._closed = True
        if self._checkpoint is not None:  # under way: let it finish (it stops at once)
            with contextlib.suppress(Exception):
                await self._checkpoint
        try:
            await self._writer.run(self._conn.close)
        finally:
            try:
                await self._reader.run(self._close_reader)
            finally:
                self._writer.stop()
                self._reader.stop()


def _open_errors() -> tuple[type[Exception], ...]:
    """What opening may raise: sqlite3's, the OS's, SQLAlchemy's once imported.

    Only the migrations import SQLAlchemy, so none of its errors is raised before.
    """
    sqlalchemy = sys.modules.get("sqlalchemy.exc")
    extra = () if sqlalchemy is None else (sqlalchemy.SQLAlchemyError,)
    return (sqlite3.Error, OSError, *extra)


def _no_driver_transactions(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None


def _begin_immediate(connection: Connection) -> None:
    # The whole migration is one write transaction: a second process opening
    # the same new file waits here, then finds the schema at head.
    connection.exec_driver_sql("BEGIN IMMEDIATE")


async def _upgrade_file(path: str, busy_timeout: float) -> None:
    """Run the migrations on their own aiosqlite connection, in one transaction."""
    from sqlalchemy import URL, event
    from sqlalchemy.ext.asyncio import create_async_engine
    from sqlalchemy.pool import NullPool

    # timeout: sqlite3 installs the busy handler as it opens the connection,
    # before SQLAlchemy's first statement, so every statement here waits too.
    engine = create_async_engine(URL.create("sqlite+aiosqlite", database=path),
                                 poolclass=NullPool, connect_args={"timeout": busy_timeout})
    event.listen(engine.sync_engine, "connect", _no_driver_transactions)
    event.listen(engine.sync_engine, "begin", _begin_immediate)
    try:
        async with engine.begin() as conn:
            await _migrate.upgrade(conn)
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

    Reads (snapshots, history, listings, loading checkpoints) run on a
    connection and thread of their own, each as one snapshot of the file:
    a long read never waits behind a commit nor delays one, and a read
    started after a write returned sees it.

    ``setup()`` creates or upgrades the schema (raising
    ``SchemaVersionError`` for a database written by a newer durable-flow);
    ``async with SqliteStore(path)`` sets up and closes.

    Every process on one file runs on this machine, so a ``resume`` right after
    a holder was killed (``kill -9``) takes its lease at once instead of waiting
    it out: the holder's host and pid are in its name (``holders_on_this_host``).
    """

    #: every holder of a lease is a process of this machine (a local file)
    holders_on_this_host = True

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Literal["full", "normal"] = "full",
        busy_timeout: float = 30.0,
    ) -> None:
        super().__init__("sqlite")
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
            except _open_errors() as exc:
                raise StoreError(f"cannot open the SQLite store {self._path}: {exc}") from exc

    async def _open(self) -> _SqliteDriver:
        worker = _Worker()
        try:
            conn = await worker.run(partial(_open, self._path, self._synchronous,
                                            self._busy_timeout))
        except BaseException:
            worker.stop()
            raise
        driver = _SqliteDriver(worker, conn, self._path, self._busy_timeout)
        try:
            # Fast path: a database at head never imports alembic.
            if not _migrate.check_versions(await driver.call(_schema_versions)):
                await _upgrade_file(self._path, self._busy_timeout)
        except BaseException:
            await driver.close()
            raise
        return driver

    async def close(self) -> None:
        """Close both connections; ``setup()`` may open them again."""
        driver, self._driver = self._driver, None
        if driver is not None:
            await driver.close()

    async def _pragma(self, name: str) -> object:
        """Read a PRAGMA on the store's own connection (diagnostics and tests)."""
        if name not in _PRAGMAS:
            raise ValueError(f"unsupported pragma {name!r}")
        row = await self.driver.call(lambda conn: conn.execute(f"PRAGMA {name}").fetchone())
        return row[0] if row else None
