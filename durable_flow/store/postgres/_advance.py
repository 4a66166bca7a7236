"""PostgreSQL's common superstep commit in one round trip.

A running run's top-level superstep that only moves its head (no answers,
requests, task writes, marks, carries, nested threads, status change) is
written by one statement, ``commit_advance`` (``sql/_tables.py``: the lease-
and head-checked UPDATE of the run, then the checkpoint, its values and its
chunks, inserted only when the UPDATE matched; ``commit_advance_merge`` when
the checkpoint completes a block of log chunks, merging it as
``insert_checkpoint`` does), sent on its own: no BEGIN, no COMMIT, one
request and one reply. So is the commit that completes a run with its last
top-level checkpoint and releases its lease (``commit_finish``, the same
statement over ``run_update_release_cas``).

Anything else, and a statement that moved no run (a lost lease, a moved
head, a run whose row changed), goes the usual way (``commit_tx`` in one
transaction), which decides as it always did. When the connection is lost
with the statement in flight its outcome is unknown: the usual transaction
then runs, waiting on the run's row for the statement if it is still
running; if the run's head is by then this very checkpoint (only this
commit can set it), the statement committed and the commit succeeded.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Literal

from ...errors import LeaseLostError
from ...model._records import RunStatus
from .._rows import extra_parts
from .._segments import merge_block
from ..sql import _codec as t
from ..sql._shared import now_us

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from .._rows import CheckpointWrite, Commit
    from ..sql._base import SqlStore
    from ..sql._statement import Statement
    from ..sql._tables import Queries

__all__ = ["UNKNOWN", "advance", "checkpoint_params", "commit_advancing", "plain_advance",
           "plain_finish", "send"]

#: ``advance``'s answer when the connection was lost with the statement in flight.
UNKNOWN: Literal["unknown"] = "unknown"


def plain_advance(commit: Commit) -> bool:
    """Whether ``commit`` only moves a running run's head by one top-level checkpoint."""
    upd = commit.run
    return (_only_head(commit) and upd is not None and upd.status is RunStatus.RUNNING
            and upd.error is None and not upd.release)


def plain_finish(commit: Commit) -> bool:
    """Whether ``commit`` completes a run with one top-level checkpoint, releasing its lease."""
    upd = commit.run
    return (_only_head(commit) and upd is not None and upd.status is RunStatus.COMPLETED
            and upd.error is None and upd.release)


def _only_head(commit: Commit) -> bool:
    """A commit of one top-level checkpoint that becomes the head, and nothing more.

    "Nothing more" is ``extra_parts`` (``store/_rows.py``), derived from the
    fields of ``Commit`` that ``commit_tx`` writes: a new part of a commit
    goes the usual way until this statement learns it.
    """
    upd, cp = commit.run, commit.checkpoint
    return (commit.extends is not None and cp is not None and cp.meta.thread == ""
            and upd is not None and upd.workflow_version is None
            and upd.head_checkpoint_id == cp.meta.id and not extra_parts(commit))


def checkpoint_params(cp: CheckpointWrite) -> dict[str, object]:
    """The parameters of a one-statement write's checkpoint: its row, values and chunks."""
    return {**t.checkpoint_params(cp.meta), "first": merge_block(cp.meta.seq),
            "value_channels": list(cp.values), "value_data": list(cp.values.values()),
            "log_channels": list(cp.appends), "log_data": list(cp.appends.values())}


def _params(commit: Commit) -> dict[str, object]:
    assert commit.checkpoint is not None
    lease, cp = commit.lease, commit.checkpoint
    return {**checkpoint_params(cp), "now": now_us(), "epoch": lease.epoch,
            "owner": lease.owner, "expect_head": commit.extends, "new_head": cp.meta.id,
            "new_status": RunStatus.COMPLETED.value, "new_error": None}  # commit_finish's


async def advance(pool: Any, lost: Any, stmt: Statement,
                  commit: Commit) -> bool | Literal["unknown"]:
    """Send the one statement: True when it wrote the commit, False when it wrote nothing.

    ``lost(exc)`` says whether an error is the connection going away: then
    the outcome is ``UNKNOWN``. An error the server replied with rolled the
    statement back (False). A cancelled or timed-out statement closes its
    connection, as the store's transactions do. No connection to be had
    (nothing sent) is False too: the usual transaction retries, or raises.
    """
    return await send(pool, lost, stmt, _params(commit))


async def send(pool: Any, lost: Any, stmt: Statement,
               params: dict[str, object]) -> bool | Literal["unknown"]:
    """``advance`` for any one-statement write: whether the statement counted a row."""
    moved: object = None
    try:
        async with pool.acquire() as conn:
            try:
                moved = await conn.fetchval(stmt.sql, *stmt.bind(params))
            except (TimeoutError, asyncio.CancelledError):
                conn.terminate()
                raise
            except Exception as exc:
                return UNKNOWN if lost(exc) or conn.is_closed() else False
    except TimeoutError:
        return UNKNOWN
    except Exception:  # acquiring or giving back the connection failed
        if moved is None:
            return False  # nothing was sent
    return bool(moved)


async def commit_advancing(store: SqlStore, driver: Any, q: Queries, commit: Commit,
                           usual: Callable[[Commit], Awaitable[None]]) -> None:
    """Write ``commit``: in one statement when it is a plain advance, else ``usual``ly.

    ``driver`` has the store's ``pool`` and its ``lost`` test of errors.
    """
    finish = plain_finish(commit)
    if not finish and not plain_advance(commit):
        return await usual(commit)
    assert commit.checkpoint is not None
    merging = merge_block(commit.checkpoint.meta.seq) is not None
    if finish:
        stmt = q.commit_finish_merge if merging else q.commit_finish
    else:
        stmt = q.commit_advance_merge if merging else q.commit_advance
    if stmt is None:
        return await usual(commit)
    done = await advance(driver.pool, driver.lost, stmt, commit)
    if done is True:
        return None
    try:
        return await usual(commit)
    except LeaseLostError:
        if done != UNKNOWN or not await _landed(store, commit):
            raise
    return None


async def _landed(store: SqlStore, commit: Commit) -> bool:
    """Whether the run's head is the commit's checkpoint: its statement committed."""
    assert commit.checkpoint is not None
    record = await store.get_run(commit.lease.run_id)
    return record is not None and record.head_checkpoint_id == commit.checkpoint.meta.id
