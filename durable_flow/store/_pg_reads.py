"""PostgreSQL reads of one statement in one round trip: no BEGIN, no COMMIT.

A read transaction (``BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY``,
the statements, ``COMMIT``) costs two round trips more than its statements.
Most reads are one statement (a run, a checkpoint's task writes, a node's
steps, a run's requests), and one statement alone already reads one
snapshot: sent on its own it is its own transaction, one request and one
reply, and it sees exactly what it would see inside one.

:func:`read_alone` sends a read's first statement that way. A read that
then asks for a second statement is not one: its generator is dropped and
the read runs again in its transaction (the first answer is not used, so
the two statements still share one snapshot), and its function is
remembered to go straight to the transaction from then on. Only a plain
query (``Fetch``) goes alone; a read that starts otherwise uses its
transaction.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from .sql._ops import Fetch, Op, Tx

__all__ = ["read_alone"]

# the code of the read functions seen asking for a second statement
_SEVERAL: set[object] = set()


def _code(tx: Callable[[], Tx[Any]]) -> object | None:
    """What identifies a read function across calls (a partial's function's code)."""
    func = getattr(tx, "func", tx)
    func = getattr(func, "__func__", func)
    return getattr(func, "__code__", None)


async def read_alone(conn: Any, tx: Callable[[], Tx[Any]],
                     perform: Callable[[Op], Awaitable[object]], closed: Callable[[Any], bool],
                     lost: type[Exception]) -> tuple[bool, Any]:
    """Run ``tx()`` on ``conn`` if it is one plain statement: ``(True, its value)``.

    ``(False, None)`` asks the caller to run it in its transaction. A
    statement that failed on a connection that closed raises ``lost`` (the
    caller runs it again); one that timed out or was cancelled closes the
    connection, as an abandoned transaction does (the reply may never come).
    """
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
    code = _code(tx)
    if code is not None and code in _SEVERAL:
        return False, None
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
        if code is not None:
            _SEVERAL.add(code)
        return False, None
    finally:
        gen.close()
