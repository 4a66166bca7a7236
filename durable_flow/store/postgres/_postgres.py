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
the run and reports it as SQLite would. Prune works one run at a time
(one transaction per run with checkpoints to remove, which locks that
run's row first); the reads that find those runs lock nothing.
Read transactions run at REPEATABLE READ, READ ONLY: their statements share
one snapshot, like a deferred SQLite transaction, and never wait nor fail.
SERIALIZABLE would need none of this discipline, but it aborts transactions
that merely read neighbouring index entries, and a commit racing its own
lease renewal would fail and retry where a row lock makes it wait.

Round trips: BEGIN, one per statement (a batch of rows is one pipelined
``fetchmany``; DML ends in ``RETURNING 1`` so a batch still counts its rows)
and COMMIT, so a superstep commit that writes a checkpoint costs six. The
pool skips asyncpg's reset query on release (the store leaves no session
state behind), which would cost one more per transaction. The common calls
are one round trip instead: a plain superstep commit (``_advance``), a
plain start (``_start``), a read of one statement (``_reads``), and a limit's
grant, renewal and release (``_grants``: idempotent writes of one statement,
``run(..., alone=True)``, sent without BEGIN and COMMIT).

Failures: a transaction that did not commit runs again, from a fresh
generator, after a lost connection, a server restarting or shutting down, a
deadlock, a serialization failure or a schema change that invalidated its
prepared statements, with exponential backoff for up to
``reconnect_timeout`` seconds. So does one whose connection the server
dropped after its last statement (asyncpg then sends no COMMIT). A
connection lost during COMMIT leaves the outcome unknown: an idempotent
transaction (renewing or releasing a lease, saving task writes or a step
result: running it twice leaves what running it once does) runs again;
any other raises ``StoreError``, as does every other driver error.

Wake-ups: a transaction that makes a run claimable (``Notify``) sends
``NOTIFY durable_flow_runs`` with it, delivered only if it commits. ``listen``
(a ``Worker`` calls it when it starts serving) opens one more connection of
its own that ``LISTEN``s and calls back on every notification, so workers in
every process wake at once; lost (a server restart), it connects again with
backoff and calls back once, for what it may have missed.

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
from types import ModuleType
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit, urlunsplit

import structlog
from sqlalchemy.exc import SQLAlchemyError
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    retry_if_exception_type,
    stop_after_delay,
    wait_exponential,
    wait_random,
)

from ...errors import InvalidInputError, RunLockedError, StoreError
from .._protocols import Commit, Lease
from ..sql import _migrate
from ..sql._base import (
    RUNS_CHANNEL,
    Execute,
    ExecuteMany,
    Fetch,
    FetchEach,
    Notify,
    Op,
    SqlStore,
    Tx,
    drive_async,
    renew_lease_tx,
)
from ..sql._cache import sql_dialect
from ._advance import commit_advancing
from ._grants import OneStatementGrants, write_alone
from ._reads import read_alone
from ._session import OwnConnection, SessionLimits
from ._start import OneStatementStart

__all__ = ["POSTGRES", "PostgresStore"]

T = TypeVar("T")

_log = structlog.get_logger("durable_flow")

# asyncpg's dialect: ``$1`` parameters, ``RETURNING 1`` on writes (see SqlDialect).
POSTGRES = sql_dialect("postgresql")

_SCHEMES = ("postgresql", "postgres")
# admin_shutdown, crash_shutdown, cannot_connect_now (starting up or shutting
# down), too_many_connections: the server is going away or not there yet.
_UNAVAILABLE_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "53300"})
# serialization_failure, deadlock_detected: the transaction was rolled back;
# lock_not_available: a lock wait reached lock_timeout (see _session).
_CONFLICT_SQLSTATES = frozenset({"40001", "40P01", "55P03"})
# idle_in_transaction_session_timeout: the server ended the session (and the
# transaction, uncommitted) of a client that stalled inside it.
_IDLE_IN_TRANSACTION = "25P03"
_UNIQUE_VIOLATION = "23505"
# 50 ms, doubling up to 2 s, plus jitter so that reconnecting processes spread out.
_BACKOFF = wait_exponential(multiplier=0.05, max=2.0) + wait_random(0, 0.05)
# How often an idle listening connection is checked: a peer that vanished
# without closing the socket is noticed within this (plus the check's timeout).
_LISTEN_CHECK = 15.0


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
        case Notify(run_id):  # sent by the server when (and only if) the transaction commits
            return await conn.execute("SELECT pg_notify($1, $2)", RUNS_CHANNEL, run_id)
    raise TypeError(f"unknown operation {op!r}")


async def _keep_session(_conn: Any) -> None:
    """Pool reset: nothing to undo (asyncpg rolls back an open transaction first)."""


class _ConnectionLost(Exception):
    """The connection closed under a transaction that therefore did not commit."""


class _PostgresDriver:
    """Runs transaction functions on a pool, running again those that did not commit."""

    def __init__(self, asyncpg: ModuleType, pool: Any, reconnect_timeout: float) -> None:
        self._pg = asyncpg
        self.pool = self._pool = pool
        self._reconnect_timeout = reconnect_timeout

    async def run(self, tx: Callable[[], Tx[T]], *, write: bool, idempotent: bool = False,
                  alone: bool = False) -> T:
        """Run ``tx()`` in one transaction, again while it did not commit (``Driver.run``).

        ``alone``: ``tx`` is one idempotent write, sent without BEGIN and
        COMMIT (the statement is its own transaction; see ``_grants.py``).
        """
        if alone and not (write and idempotent):
            raise ValueError("only an idempotent write is sent alone")
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
            result: T = await retrying(self._attempt, tx, write, idempotent, alone)
        except (_ConnectionLost, OSError, self._pg.PostgresError, self._pg.InterfaceError,
                self._pg.InternalClientError) as exc:
            raise self._store_error(exc) from exc
        return result

    def _lost(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the connection (or the server) going away."""
        pg = self._pg
        return (isinstance(exc, _ConnectionLost | OSError | pg.PostgresConnectionError
                           | pg.ConnectionDoesNotExistError)
                or getattr(exc, "sqlstate", None) in _UNAVAILABLE_SQLSTATES)

    lost = _lost

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
            return StoreError.lost(f"PostgreSQL is unreachable (retried for "
                              f"{self._reconnect_timeout:g}s): {detail}")
        return StoreError(f"PostgreSQL failed: {type(exc).__name__}: {detail}")

    async def _attempt(self, tx: Callable[[], Tx[T]], write: bool, idempotent: bool,
                       alone: bool) -> T:
        async with self._pool.acquire() as conn:
            if alone:
                return cast(T, await self._alone(conn, tx))
            if not write:  # a read of one statement needs no BEGIN/COMMIT (_reads.py)
                read, value = await read_alone(conn, tx, partial(self._perform, conn),
                                               self._closed, _ConnectionLost)
                if read:
                    return cast(T, value)
            xact = conn.transaction(isolation="read_committed" if write else "repeatable_read",
                                    readonly=not write)
            try:
                await xact.start()
                result = await drive_async(tx(), partial(self._perform, conn))
            except BaseException as exc:
                await self._abandon(conn, xact, exc)
                if isinstance(exc, Exception) and self._closed(conn):
                    raise _ConnectionLost() from exc
                raise
            await self._commit(conn, xact, idempotent)
            return result

    async def _alone(self, conn: Any, tx: Callable[[], Tx[T]]) -> T:
        """One write statement on its own; a lost connection raises ``_ConnectionLost``."""
        try:
            return cast(T, await write_alone(tx(), partial(self._perform, conn)))
        except BaseException as exc:
            if isinstance(exc, TimeoutError | asyncio.CancelledError):
                conn.terminate()  # the reply may never come: see _abandon
            if isinstance(exc, Exception) and self._closed(conn):
                raise _ConnectionLost() from exc
            raise

    async def _perform(self, conn: Any, op: Op) -> object:
        try:
            return await _perform(conn, op)
        except self._pg.LockNotAvailableError as exc:
            if isinstance(op, Fetch) and op.locks is not None:
                # another transaction held the run's row for all of lock_timeout:
                # a holder that stalled inside a transaction (or a long one)
                raise RunLockedError(op.locks, "a transaction that holds its row", 0.0) from exc
            raise

    async def _abandon(self, conn: Any, xact: Any, exc: BaseException) -> None:
        """Roll back after ``exc``; a stalled or cancelled statement closes the connection.

        Asking the server to cancel (or to roll back) over a network that may
        be stalled would wait again: closing the socket instead ends the
        server's session as soon as packets flow, and the pool connects anew.
        """
        if isinstance(exc, TimeoutError | asyncio.CancelledError):
            conn.terminate()
            return
        try:
            await xact.rollback()
        except TimeoutError:
            conn.terminate()
        except Exception:  # noqa: S110  # a closed connection rolled back already
            pass

    async def _commit(self, conn: Any, xact: Any, idempotent: bool) -> None:
        # The server may drop the connection between our last statement and
        # COMMIT (a restart ends idle sessions): then asyncpg sends nothing, on
        # a closed connection or one whose protocol broke (InternalClientError),
        # and the transaction surely did not commit.
        if self._closed(conn):
            raise _ConnectionLost()
        try:
            await xact.commit()
        except self._pg.InternalClientError as exc:
            raise _ConnectionLost() from exc
        except BaseException as exc:
            if isinstance(exc, TimeoutError | asyncio.CancelledError):
                conn.terminate()  # the reply may never come: see _abandon
            if not isinstance(exc, Exception):
                raise
            if getattr(exc, "sqlstate", None) == _IDLE_IN_TRANSACTION:
                raise _ConnectionLost() from exc  # ended by the server before our COMMIT
            if not (self._lost(exc) or self._closed(conn)):
                raise  # the server refused to commit: nothing was written
            if idempotent:  # committed or not, running it again leaves the same rows
                raise _ConnectionLost() from exc
            raise StoreError.lost("the connection to PostgreSQL was lost during COMMIT: the "
                             f"transaction may or may not have committed ({exc})") from exc

    async def fetch(self, sql: str, *params: object) -> list[Any]:
        """Run one query outside the store's transactions (schema checks, diagnostics)."""
        async with self._pool.acquire() as conn:
            return list(await conn.fetch(sql, *params))

    async def close(self) -> None:
        await self._pool.close()


class _Listener:
    """One connection of its own that ``LISTEN``s on the runs channel and calls back.

    It connects on the first :meth:`add`; when the connection is lost (a
    server restart) or stops answering, it connects again with backoff,
    for as long as the store is open, and calls back once it listens again.
    """

    def __init__(self, asyncpg: ModuleType, dsn: str, limits: SessionLimits) -> None:
        self._pg = asyncpg
        self._dsn = dsn
        self._limits = limits
        self._failures = (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError)
        self._callbacks: dict[Callable[[], None], None] = {}  # insertion-ordered set
        self._task: asyncio.Task[None] | None = None
        self._listening = asyncio.Event()
        self._conn: Any = None

    async def add(self, callback: Callable[[], None], first_wait: float) -> None:
        """Call ``callback`` on every notification; wait up to ``first_wait`` s to listen."""
        self._callbacks[callback] = None
        if self._task is None:
            self._task = asyncio.create_task(self._serve(), name="durable-flow-listen")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(first_wait):
                await self._listening.wait()

    def _notify(self, *_notification: object) -> None:
        for callback in list(self._callbacks):
            callback()

    async def _serve(self) -> None:
        while True:
            conn = self._conn = await self._connect()
            self._listening.set()
            self._notify()  # runs announced while nobody listened are claimable too
            await self._until_lost(conn)
            self._listening.clear()
            _log.warning("listen_connection_lost", channel=RUNS_CHANNEL)
            conn.terminate()

    async def _connect(self) -> Any:
        """A connection that listens, tried with backoff until one does."""
        retrying = AsyncRetrying(
            retry=retry_if_exception_type(self._failures), wait=_BACKOFF,
            before_sleep=lambda s: _log.warning(
                "listen_connect_failed", attempt=s.attempt_number,
                error=repr(s.outcome.exception() if s.outcome else None)))
        return await retrying(self._listening_connection)

    async def _listening_connection(self) -> Any:
        conn = await self._pg.connect(self._dsn, timeout=10,
                                      server_settings=self._limits.server_settings())
        try:
            await self._limits.keep_alive(conn)
            await conn.add_listener(RUNS_CHANNEL, self._notify)
        except BaseException:
            conn.terminate()
            raise
        return conn

    async def _until_lost(self, conn: Any) -> None:
        """Return once ``conn`` closed or failed a periodic check."""
        lost = asyncio.Event()
        conn.add_termination_listener(lambda _conn: lost.set())
        while not conn.is_closed():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_LISTEN_CHECK):
                    await lost.wait()
                    return
            try:
                await conn.fetchval("SELECT 1", timeout=_LISTEN_CHECK)
            except self._failures:
                return

    async def close(self) -> None:
        """Stop listening and close the connection."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        if self._conn is not None:
            self._conn.terminate()
            self._conn = None
        self._listening.clear()


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


def _check_options(min_size: object, max_size: object, reconnect_timeout: object,
                   stall_timeout: object) -> None:
    for name, size in (("min_size", min_size), ("max_size", max_size)):
        if isinstance(size, bool) or not isinstance(size, int) or size < (name == "max_size"):
            raise InvalidInputError(f"PostgresStore {name} must be a whole number of "
                                    f"connections, got {size!r}")
    if min_size > max_size:  # type: ignore[operator]  # both checked to be int above
        raise InvalidInputError(f"PostgresStore min_size {min_size} exceeds max_size {max_size}")
    for name, seconds, least in (("reconnect_timeout", reconnect_timeout, 0.0),
                                 ("stall_timeout", stall_timeout, 0.005)):
        if (isinstance(seconds, bool) or not isinstance(seconds, int | float)
                or not least <= seconds < float("inf")):  # also refuses NaN
            raise InvalidInputError(f"PostgresStore {name} must be a number of seconds "
                                    f">= {least:g}, got {seconds!r}")


class PostgresStore(OneStatementGrants, OneStatementStart, SqlStore):
    """Checkpoints in a PostgreSQL database, shared by every process that opens it.

    ``dsn`` is a ``postgresql://user:password@host:port/database`` URL
    (``postgres://`` and SQLAlchemy's ``postgresql+asyncpg://`` work too).
    The store keeps a pool of ``min_size`` to ``max_size`` connections; each
    store call is one transaction on one of them. A call whose connection
    is lost before it commits runs again on a new connection, with backoff,
    for up to ``reconnect_timeout`` seconds (a server restart), then raises
    ``StoreError``; so does ``setup()`` while the server is down, refusing
    or starting up.

    ``stall_timeout`` (seconds, default 5; keep it well under ``lease_ttl``)
    bounds how long a connection that stopped answering can hold anything:
    the server ends a session idle inside a transaction after it (its locks
    go), a statement waits at most a fifth of it for a row lock, and TCP
    keepalives on both ends give up a silent peer within about twice it.
    A claim (``resume``), ``respond``, ``cancel_run`` or ``send_event`` on a
    run whose row another transaction holds that long raises
    ``RunLockedError`` instead of waiting; other calls run again. The client
    waits at most six times ``stall_timeout`` for a statement's reply
    before it closes the connection (a call cancelled mid-statement closes
    it too), so a cut-off client leaves no session behind once the network
    heals. Lease renewals use a connection of their own, outside the pool,
    with ``stall_timeout`` as their statement timeout: a pool busy with the
    run's own work never delays them. The session settings go in the
    startup packet (a pooler in front of PostgreSQL must let them through).

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
        stall_timeout: float = 5.0,
    ) -> None:
        super().__init__("postgresql")
        self._dsn = _asyncpg_dsn(dsn)
        _check_options(min_size, max_size, reconnect_timeout, stall_timeout)
        self._min_size, self._max_size = min_size, max_size
        self._reconnect_timeout = float(reconnect_timeout)
        self._limits = SessionLimits(float(stall_timeout))
        self._asyncpg = _import_asyncpg()
        self._driver: _PostgresDriver | None = None
        self._renewals: _PostgresDriver | None = None
        self._opening = asyncio.Lock()  # two tasks calling setup() open one pool
        self._listener: _Listener | None = None

    @property
    def driver(self) -> _PostgresDriver:
        """The open pool's driver; raises ``StoreError`` before ``setup``."""
        if self._driver is None:
            raise StoreError("PostgresStore is not set up: call setup() or use 'async with'")
        return self._driver

    async def setup(self) -> None:
        """Connect, then create or upgrade the schema unless it is at head.

        Retried with backoff for up to ``reconnect_timeout`` seconds while the
        server cannot be reached or is not accepting connections yet.
        """
        async with self._opening:
            if self._driver is None:
                self._driver = await self._open()
                self._renewals = _PostgresDriver(self._asyncpg, OwnConnection(
                    self._renewal_connection), self._reconnect_timeout)

    async def _open(self) -> _PostgresDriver:
        pg = self._asyncpg
        failures = (OSError, TimeoutError, pg.PostgresError, pg.InterfaceError, SQLAlchemyError)
        retrying = AsyncRetrying(retry=retry_if_exception(self._unavailable), reraise=True,
                                 wait=_BACKOFF, stop=stop_after_delay(self._reconnect_timeout))
        try:
            return await retrying(self._open_once)
        except (*failures, ValueError) as exc:  # ValueError: asyncpg cannot parse the DSN
            retried = (f" (retried for {self._reconnect_timeout:g}s)"
                       if self._unavailable(exc) else "")
            raise StoreError(f"cannot connect to PostgreSQL at {_display(self._dsn)}{retried}: "
                             f"{type(exc).__name__}: {exc}") from exc

    def _unavailable(self, exc: BaseException) -> bool:
        """Whether connecting failed because the server is not there (yet)."""
        pg = self._asyncpg
        return (isinstance(exc, OSError | pg.PostgresConnectionError | pg.ConnectionDoesNotExistError)
                or getattr(exc, "sqlstate", None) in _UNAVAILABLE_SQLSTATES)

    async def _open_once(self) -> _PostgresDriver:
        pg, limits = self._asyncpg, self._limits
        pool = await pg.create_pool(
            self._dsn, min_size=self._min_size, max_size=self._max_size, reset=_keep_session,
            init=limits.keep_alive, server_settings=limits.server_settings(),
            command_timeout=limits.statement_timeout, timeout=limits.connect_timeout)
        driver = _PostgresDriver(pg, pool, self._reconnect_timeout)
        try:
            # Fast path: a database at head never imports alembic.
            if not _migrate.check_versions(await _schema_versions(driver)):
                await _upgrade(pg, self._dsn)
        except BaseException:
            await driver.close()
            raise
        return driver

    async def _renewal_connection(self) -> Any:
        limits = self._limits
        conn = await self._asyncpg.connect(
            self._dsn, server_settings=limits.server_settings(),
            command_timeout=limits.connect_timeout, timeout=limits.connect_timeout)
        await limits.keep_alive(conn)
        return conn

    async def commit(self, commit: Commit) -> None:
        """Write a commit; the common superstep commit in one round trip (``_advance``)."""
        await commit_advancing(self, self.driver, self._q, commit, super().commit)

    async def renew_lease(self, lease: Lease, ttl: float) -> Lease:
        """Extend a held lease on the store's renewal connection (never behind the pool)."""
        if self._renewals is None:
            raise StoreError("PostgresStore is not set up: call setup() or use 'async with'")
        return await self._renewals.run(partial(renew_lease_tx, self._q, lease, ttl),
                                        write=True, idempotent=True)

    async def listen(self, wake: Callable[[], None]) -> None:
        """Call ``wake`` whenever another process (or this one) makes a run claimable.

        Opens a connection of its own on the first call (later calls add
        callbacks) and returns once it listens, or after a few seconds if the
        server cannot be reached yet: it keeps trying in the background. Each
        reconnect calls ``wake`` once. Stops at ``close()``.
        """
        if self._listener is None:
            self._listener = _Listener(self._asyncpg, self._dsn, self._limits)
        await self._listener.add(wake, first_wait=5.0)

    async def close(self) -> None:
        """Stop listening, close the pool (waiting for calls in flight); ``setup()`` reopens."""
        listener, self._listener = self._listener, None
        if listener is not None:
            await listener.close()
        renewals, self._renewals = self._renewals, None
        if renewals is not None:
            await renewals.close()
        driver, self._driver = self._driver, None
        if driver is not None:
            await driver.close()
