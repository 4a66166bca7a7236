"""PostgreSQL reads of one statement in one round trip: no BEGIN, no COMMIT.

A read transaction (``BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY``,
the statements, ``COMMIT``) costs two round trips more than its statements.
Many reads are one statement (a run, a checkpoint's task writes, a node's
steps, a run's requests, the inbox), and one statement alone already reads
one snapshot: sent on its own it is its own transaction, one request and
one reply, and it sees exactly what it would see inside one.

:data:`ONE_STATEMENT` names the read functions that are one query;
:func:`read_alone` sends theirs that way. Should one of them ask for a
second statement after all, its generator is dropped and the read runs
again in its transaction (the first answer is not used, so the statements
still share one snapshot). Any other read keeps its transaction.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from ..sql._inbox import pending_views_tx
from ..sql._ops import Fetch, Op, Tx
from ..sql._reads import get_requests_tx, get_steps_tx, get_task_writes_tx, pending_requests_tx
from ..sql._runs import get_run_tx, list_runs_tx

__all__ = ["ONE_STATEMENT", "read_alone"]

#: The read functions (called through ``functools.partial``) that send one query.
ONE_STATEMENT: set[object] = {get_run_tx, list_runs_tx, get_task_writes_tx, get_steps_tx,
                              get_requests_tx, pending_requests_tx, pending_views_tx}


async def read_alone(conn: Any, tx: Callable[[], Tx[Any]],
                     perform: Callable[[Op], Awaitable[object]], closed: Callable[[Any], bool],
                     lost: type[Exception]) -> tuple[bool, Any]:
    """Run ``tx()`` on ``conn`` if it is a read of one statement: ``(True, its value)``.

    ``(False, None)`` asks the caller to run it in its transaction. A
    statement that failed on a connection that closed raises ``lost`` (the
    caller runs it again); one that timed out or was cancelled closes the
    connection, as an abandoned transaction does (the reply may never come).
    """
    if getattr(tx, "func", None) not in ONE_STATEMENT:
        return False, None
    try:
        return await _alone(tx, perform)
    except BaseException as exc:
        if isinstance(exc, TimeoutError | asyncio.CancelledError):
            conn.terminate()
        if isinstance(exc, Exception) and closed(conn):
            raise lost() from exc
        raise


async def _alone(tx: Callable[[], Tx[Any]], perform: Callable[[Op], Awaitable[object]]
                 ) -> tuple[bool, Any]:
    gen = tx()
    try:
        try:
            op = next(gen)
        except StopIteration as stop:
            return True, stop.value  # nothing to read
        if type(op) is not Fetch:
            return False, None
        try:
            gen.send(await perform(op))
        except StopIteration as stop:
            return True, stop.value
        return False, None  # a second statement: the transaction reads them both
    finally:
        gen.close()
