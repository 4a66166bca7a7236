"""The operations a transaction function yields, and the drivers' contract.

A transaction function is a generator of :class:`Fetch`, :class:`FetchEach`,
:class:`Execute` and :class:`ExecuteMany` operations that receives their results
and does no I/O itself; :func:`drive` and :func:`drive_async` run one to the end.

A transaction that makes a run claimable (created ``queued``, answered into
``queued``, given back to the queue) also yields :class:`Notify`: a driver
that can tell other processes once the transaction commits (PostgreSQL
``NOTIFY``) does, so their workers wake at once; others (SQLite) ignore it
and those workers find the run on their next poll.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast

from ._statement import Statement

T = TypeVar("T")
Row = tuple[Any, ...]

# -- operations a transaction function yields ---------------------------------------


@dataclass(frozen=True, slots=True)
class Fetch:
    """Run a query; the driver sends back its rows (a list of tuples).

    ``locks``: the query locks this run's row for a caller outside the run's
    lease (a claim, an answer, a cancel, an event). A driver whose locks can
    time out (PostgreSQL's ``lock_timeout``) raises ``RunLockedError`` when
    another transaction holds the row that long, instead of running again.
    """

    stmt: Statement
    params: tuple[object, ...]
    locks: str | None = None


@dataclass(frozen=True, slots=True)
class FetchEach:
    """Run one query per parameter set; the driver sends back a list of row lists."""

    stmt: Statement
    rows: list[tuple[object, ...]]


@dataclass(frozen=True, slots=True)
class Execute:
    """Run one statement; the driver sends back the number of rows it changed."""

    stmt: Statement
    params: tuple[object, ...]


@dataclass(frozen=True, slots=True)
class ExecuteMany:
    """Run one statement per parameter set (batched); the driver sends back the total."""

    stmt: Statement
    rows: list[tuple[object, ...]]


# The notification channel of runs becoming claimable (one per database).
RUNS_CHANNEL = "durable_flow_runs"


@dataclass(frozen=True, slots=True)
class Notify:
    """Announce, once the transaction commits, that a run may be claimed now.

    Sent on :data:`RUNS_CHANNEL` with the run id as payload; nothing is sent
    if the transaction rolls back. A driver that cannot notify sends back None.
    """

    run_id: str


Op = Fetch | FetchEach | Execute | ExecuteMany | Notify
Tx = Generator[Op, Any, T]


def drive(tx: Tx[T], perform: Callable[[Op], object]) -> T:
    """Run a transaction function to completion with a synchronous ``perform``."""
    try:
        op = next(tx)
        while True:
            op = tx.send(perform(op))
    except StopIteration as stop:
        return cast(T, stop.value)
    finally:
        tx.close()


async def drive_async(tx: Tx[T], perform: Callable[[Op], Awaitable[object]]) -> T:
    """Run a transaction function with an asynchronous ``perform`` (e.g. asyncpg)."""
    try:
        op = next(tx)
        while True:
            op = tx.send(await perform(op))
    except StopIteration as stop:
        return cast(T, stop.value)
    finally:
        tx.close()


class Driver(Protocol):
    """Runs transaction functions on one backend."""

    async def run(self, tx: Callable[[], Tx[T]], *, write: bool, idempotent: bool = False) -> T:
        """Run ``tx()`` in one transaction; ``write`` takes the write lock before anything.

        The driver may call ``tx`` again to retry a transaction that did not
        commit; each call makes a fresh generator. ``idempotent`` says that
        running it twice leaves what running it once does, so it may also
        run again when the driver cannot tell whether it committed.
        """
        ...


def fetch(stmt: Statement, **params: object) -> Tx[list[dict[str, Any]]]:
    """Yield a query; return its rows as dicts keyed by column."""
    rows: list[Row] = yield Fetch(stmt, stmt.bind(params))
    return [dict(zip(stmt.columns, row, strict=True)) for row in rows]


def lock_run(stmt: Statement, run_id: str) -> Tx[list[dict[str, Any]]]:
    """Yield ``stmt`` (a ``SELECT ... FOR UPDATE`` of run ``run_id``) as a :class:`Fetch` that locks it."""
    rows: list[Row] = yield Fetch(stmt, stmt.bind({"run_id": run_id}), locks=run_id)
    return [dict(zip(stmt.columns, row, strict=True)) for row in rows]


def fetch_each(stmt: Statement, params: Iterable[Mapping[str, object]]) -> Tx[list[list[Row]]]:
    """Yield one query per parameter set; return the row lists in order."""
    results: list[list[Row]] = yield FetchEach(stmt, [stmt.bind(p) for p in params])
    return results


def execute(stmt: Statement, **params: object) -> Tx[int]:
    """Yield one statement; return the changed row count."""
    count: int = yield Execute(stmt, stmt.bind(params))
    return count


def execute_many(stmt: Statement, params: Iterable[Mapping[str, object]]) -> Tx[int]:
    """Yield a batch (nothing when empty); return the total changed row count."""
    rows = [stmt.bind(p) for p in params]
    if not rows:
        return 0
    count: int = yield ExecuteMany(stmt, rows)
    return count
