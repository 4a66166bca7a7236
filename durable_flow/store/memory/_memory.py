"""MemoryStore: the SQL store over an in-memory SQLite database, one per object.

It runs the transaction functions of :mod:`durable_flow.store.sql._base`, the
ones ``SqliteStore`` and ``PostgresStore`` run, on SQLite's statements (from
the statement cache): one set of rules decides every transition for every
store, and the conformance suite checks them once more on each.

Each transaction runs to its end in the calling thread, under a lock, with
no hop to another thread: an in-memory database does no I/O, so nothing
would run beside it while it waited, and the hop alone (measured: about
20 us) would add a third to a superstep commit (about 60 us). The lock
lets several threads (an event loop each) share one store. The schema is
the DDL of the store's tables (``Queries.schema``), the tables the
migrations create; the first store of a process runs it, the others start
from a copy of that empty database (``deserialize``: 20 times faster than
running the DDL again). Nothing survives the object; use ``SqliteStore``
for durability.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from functools import cache
from typing import TypeVar

from ..sql._base import SqlStore, Tx
from ..sqlite._sqlite import transact

__all__ = ["MemoryStore"]

T = TypeVar("T")


@cache
def _empty_database(schema: tuple[str, ...]) -> bytes:
    """An empty database with the schema, serialized (made once per process)."""
    conn = sqlite3.connect(":memory:")
    try:
        _create(conn, schema)
        return conn.serialize()
    finally:
        conn.close()


def _create(conn: sqlite3.Connection, schema: tuple[str, ...]) -> None:
    for ddl in schema:
        conn.execute(ddl)


class _MemoryDriver:
    """Runs each transaction function at once, in the caller's thread, under a lock."""

    def __init__(self, schema: tuple[str, ...]) -> None:
        # check_same_thread=False: the lock, not the thread, keeps calls apart.
        # isolation_level=None: every transaction is explicit (BEGIN ... COMMIT).
        self._conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None,
                                     cached_statements=256)
        if hasattr(self._conn, "deserialize"):
            self._conn.deserialize(_empty_database(schema))
        else:  # an SQLite built without serialization
            _create(self._conn, schema)
        self._lock = threading.Lock()

    async def run(self, tx: Callable[[], Tx[T]], *, write: bool, idempotent: bool = False) -> T:
        """Run ``tx()`` at once, alone: no other transaction of this store runs meanwhile."""
        return self.transact(tx, write=write)

    def transact(self, tx: Callable[[], Tx[T]], *, write: bool = True) -> T:
        """Run ``tx()`` synchronously; a write is one transaction, rolled back if it raises.

        A read needs no BEGIN: under the lock nothing writes between its
        SELECTs, so they all see one state (and two statements fewer).
        """
        with self._lock:
            return transact(self._conn, tx, "BEGIN" if write else None)

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` on the database, outside any transaction (tests, tools)."""
        with self._lock:
            return fn(self._conn)


class MemoryStore(SqlStore):
    """Checkpoints in memory: isolated, gone when the object is dropped.

    Runs the same transactions as ``SqliteStore`` and ``PostgresStore``, on a
    database of its own. ``setup()`` and ``close()`` do nothing: the data
    lives as long as the object, so it may be closed and set up again.
    Nothing notifies other processes (there are none): workers in this
    process are woken by the runtime itself.
    """

    def __init__(self) -> None:
        super().__init__("sqlite")
        self._driver = _MemoryDriver(self._q.schema)

    @property
    def driver(self) -> _MemoryDriver:
        """The database's driver (always open)."""
        return self._driver

    async def setup(self) -> None:
        """Nothing to create: the schema is made with the object."""

    async def close(self) -> None:
        """Nothing to release; the data stays until the object is dropped."""
