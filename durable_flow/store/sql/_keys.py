"""Per-key run concurrency on SQL: whether a worker's claim may start a run with a key.

A run submitted with ``concurrency_key`` (``runs.concurrency_key``) whose
workflow sets ``max_runs_per_key`` (``runs.max_per_key``) is started by a
claim only while fewer than that many runs of its key are ``running``, and
only when no queued run of the key comes before it (priority, then
submission). The claim queries leave out the runs of a full key
(``_tables.key_free``) so they never fill a claim's ``LIMIT``; these checks
decide, inside the claim's transaction: on PostgreSQL under a
transaction-level advisory lock per key (``Queries.key_lock``), so two
workers claiming at once take turns on a key and the second counts the
first's run; SQLite's claims hold the database write lock. Waiting and paused
runs do not count: they hold nothing while they wait.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from ...model._records import RunStatus
from .._protocols import RunRecord
from . import _codec as t
from ._ops import Tx, fetch

if TYPE_CHECKING:
    from ._tables import Queries

__all__ = ["key_allows_tx", "limited", "lock_keys_tx"]


def limited(run: RunRecord) -> bool:
    """Whether starting ``run`` must respect its key's limit (a reclaim never does: it runs)."""
    return (run.concurrency_key is not None and run.max_per_key is not None
            and run.status is not RunStatus.RUNNING)


def lock_keys_tx(q: Queries, runs: Sequence[RunRecord]) -> Tx[None]:
    """Take the keys of the limited runs among ``runs`` for this transaction (PostgreSQL)."""
    keys = sorted({r.concurrency_key for r in runs if limited(r) and r.concurrency_key})
    if keys and q.key_lock is not None:
        yield from fetch(q.key_lock, keys=keys)


def key_allows_tx(q: Queries, run: RunRecord, now: datetime) -> Tx[bool]:
    """Whether a claim may start ``run`` now: its key has room, and none of its runs is ahead.

    Counted in the claim's transaction, so the runs it claimed before this one count.
    """
    if not limited(run):
        return True
    assert run.max_per_key is not None
    [row] = yield from fetch(q.key_running, key=run.concurrency_key)
    if int(row["n"]) >= run.max_per_key:
        return False
    ahead = yield from fetch(q.key_ahead, key=run.concurrency_key, now=t.to_us(now),
                             priority=run.priority, created=t.to_us(run.created_at),
                             run_id=run.run_id)
    return not ahead
