"""Transaction functions that write a superstep: the commit, task writes, steps, retention."""

from __future__ import annotations

import collections
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from ...errors import (
    CheckpointNotFoundError,
    LeaseLostError,
)
from ...model._clock import utcnow
from ...model._records import RunStatus
from .._machine import keeps_paused
from .._protocols import (
    HEAD_MOVED,
    CheckpointMeta,
    Commit,
    Lease,
    StepRow,
    TaskWrite,
)
from .._retention import Key, Scanned, doomed, stream_floors
from . import _codec as t
from ._decisions import record_decisions_tx
from ._ops import Tx, execute, execute_many, fetch
from ._outbox import opened_tx, withdraw_tx
from ._shared import (
    check_lease,
    insert_checkpoint,
    lease_lost,
    now_us,
    record_answers,
    save_task_writes,
    unknown_request,
)
from ._streams import trim_stream_tx
from ._waits import carry_tx, set_version_tx, waiting_tx

if TYPE_CHECKING:
    from ._tables import Queries

# -- transaction functions: the superstep commit ---------------------------------------


def commit_tx(q: Queries, commit: Commit) -> Tx[None]:
    """Write a commit; the lease check is the first statement of the transaction."""
    lease, now = commit.lease, now_us()
    run_id = lease.run_id
    yield from _update_run(q, commit, now)
    if commit.answers:
        yield from record_answers(q, run_id, commit.answers, now)
    if commit.reopen:
        yield from _reopen(q, run_id, commit.reopen)
    if commit.drop_open_requests:
        yield from execute(q.req_drop_open, run_id=run_id)
    yield from execute_many(q.req_insert, [t.request_params(r, run_id) for r in commit.requests])
    yield from opened_tx(q, commit.requests, t.from_us(now))  # approvals: the outbox
    if commit.withdraw:
        yield from withdraw_tx(q, run_id, commit.withdraw, t.from_us(now))
    yield from save_task_writes(q, commit.task_writes)
    if commit.mark is not None:
        mark = commit.mark
        error = t.error_json(mark.error)
        if not (yield from execute(
                q.cp_mark, run_id=run_id, checkpoint_id=mark.checkpoint_id,
                new_status=mark.status.value, new_error=error,
                new_status_digest=t.status_digest(run_id, mark.checkpoint_id,
                                                  mark.status.value, error))):
            raise CheckpointNotFoundError(run_id, mark.checkpoint_id)
    if commit.checkpoint is not None:
        meta = commit.checkpoint.meta
        if meta.thread or commit.extends is None:
            yield from _check_thread_head(q, commit)
        yield from insert_checkpoint(q, commit.checkpoint)
        if commit.carry is not None:
            yield from carry_tx(q, run_id, commit.carry, meta.id)
    for write, carry in commit.nested:
        yield from _check_thread_head(q, commit, write.meta, first=True)
        yield from insert_checkpoint(q, write)
        yield from carry_tx(q, run_id, carry, write.meta.id)
    yield from record_decisions_tx(q, run_id, commit.decisions)
    yield from _after_run_update(q, commit)


def _after_run_update(q: Queries, commit: Commit) -> Tx[None]:
    """A migration's new version; a run left waiting gets its wake time or its events."""
    upd, run_id = commit.run, commit.lease.run_id
    if upd is None:
        return
    if upd.workflow_version is not None and upd.signature is not None:
        yield from set_version_tx(q, run_id, upd.workflow_version, upd.signature)
    if upd.status is RunStatus.WAITING:
        yield from waiting_tx(q, run_id, utcnow(), commit.parked_on)


def _check_thread_head(q: Queries, commit: Commit, meta: CheckpointMeta | None = None, *,
                       first: bool = False) -> Tx[None]:
    """Refuse a checkpoint whose thread's head is not its parent (top level: see run CAS).

    A ``first`` checkpoint (a nested copy) needs an empty thread: its parent
    is the checkpoint of another thread whose history it continues.
    """
    if meta is None and commit.checkpoint is not None:
        meta = commit.checkpoint.meta
    if meta is None:
        return
    rows = yield from fetch(q.cp_head, run_id=meta.run_id, thread=meta.thread)
    if (rows[0]["checkpoint_id"] if rows else None) != (None if first else meta.parent_id):
        raise LeaseLostError(meta.run_id, commit.lease.epoch, HEAD_MOVED)


def _update_run(q: Queries, commit: Commit, now: int) -> Tx[None]:
    """One UPDATE of the run row that is also the lease check."""
    lease, upd = commit.lease, commit.run
    params: dict[str, object] = {"run_id": lease.run_id, "epoch": lease.epoch,
                                 "owner": lease.owner, "now": now}
    cas = commit.extends is not None
    # a running run moving its head: the row is running without an error already,
    # unless something changed it (then the full UPDATE below decides)
    if (cas and upd is not None and upd.head_checkpoint_id and not upd.release
            and upd.status is RunStatus.RUNNING and upd.error is None
            and (yield from execute(q.run_advance_cas, **params, expect_head=commit.extends,
                                    new_head=upd.head_checkpoint_id))):
        return
    stmt = q.run_touch_cas if cas else q.run_touch
    if upd is not None:
        if upd.release:
            stmt = q.run_update_release_cas if cas else q.run_update_release
        else:
            stmt = q.run_update_cas if cas else q.run_update
        params.update(new_status=upd.status.value, new_error=t.error_json(upd.error),
                      new_head=upd.head_checkpoint_id or None, from_status=upd.status.value,
                      keep_paused=int(keeps_paused(upd.status)))
    if cas:
        params["expect_head"] = commit.extends
    if not (yield from execute(stmt, **params)):
        yield from lease_lost(q, lease)




def _reopen(q: Queries, run_id: str, request_ids: Sequence[str]) -> Tx[None]:
    """Clear the answers of existing requests (one statement); unknown ids raise."""
    changed = yield from execute_many(q.req_reopen, [
        {"run_id": run_id, "request_id": rid} for rid in request_ids])
    # An UPDATE counts every row it matches, already open or not.
    if changed != len(request_ids):
        yield from unknown_request(q, run_id, request_ids)








def put_task_writes_tx(q: Queries, lease: Lease, writes: Sequence[TaskWrite]) -> Tx[None]:
    """Save finished tasks' writes under the lease."""
    yield from check_lease(q, lease)
    yield from save_task_writes(q, writes)


def put_step_tx(q: Queries, lease: Lease, step: StepRow) -> Tx[None]:
    """Record a step result under the lease."""
    yield from check_lease(q, lease)
    yield from execute(q.step_upsert, run_id=step.run_id, checkpoint_id=step.checkpoint_id,
                       node=step.node, name=step.name, data=step.data,
                       created_at=t.to_us(step.created_at))



# -- transaction functions: retention ---------------------------------------------------


def prune_tx(
    q: Queries, run_id: str, keep_last: int | None, older_than: datetime | None
) -> Tx[int]:
    """Delete the checkpoints of one run nothing needs (see ``CheckpointStore.prune``).

    Its first statement locks the run's row (PostgreSQL), as every writer of
    the run does, so no commit of the run lands between the scan and the deletes.
    """
    if not (yield from fetch(q.run_lease, run_id=run_id)):
        return 0
    threads, gone, top = yield from _plan(q, run_id, keep_last, older_than)
    keys = [{"run_id": c.run_id, "checkpoint_id": c.id} for c in gone]
    for stmt in (q.cp_delete, q.tw_delete, q.step_delete, q.req_delete):
        yield from execute_many(stmt, keys)
    left = collections.Counter(c.thread for c in gone)
    for thread in sorted(left):
        if left[thread] == len(threads[(run_id, thread)]):
            # A whole sub-workflow went with its anchor: its log chunks too.
            yield from execute(q.chunk_delete_thread, run_id=run_id, thread=thread)
        yield from _drop_unreferenced_values(q, run_id, thread)
    floors = stream_floors(top, gone)
    if run_id in floors:
        yield from trim_stream_tx(q, run_id, floors[run_id])
    return len(gone)


def prune_page_tx(
    q: Queries, after: str, limit: int, keep_last: int | None, older_than: datetime | None
) -> Tx[tuple[list[str], str | None]]:
    """Read the next ``limit`` runs after run id ``after``: those with checkpoints to remove.

    Returns them and the last run id of the page (None past the last page).
    A read: it locks nothing, and holds one run's checkpoints at a time.
    """
    page = [r["run_id"] for r in (yield from fetch(q.run_ids_after, after=after, n=limit))]
    doomed_runs = []
    for run_id in page:
        _threads, gone, _top = yield from _plan(q, run_id, keep_last, older_than)
        if gone:
            doomed_runs.append(run_id)
    return doomed_runs, (page[-1] if len(page) == limit else None)


def _plan(q: Queries, run_id: str, keep_last: int | None, older_than: datetime | None
          ) -> Tx[tuple[dict[tuple[str, str], list[Scanned]], list[Scanned], dict[Key, int]]]:
    """One run's checkpoints by thread, those prune removes, top-level creation times."""
    cutoff = None if older_than is None else t.to_us(older_than)
    threads: dict[tuple[str, str], list[Scanned]] = {}
    top: dict[Key, int] = {}  # where the stream log is trimmed: see ``stream_floors``
    for row in (yield from fetch(q.cp_scan, run_id=run_id)):
        if row["thread"] == "":
            top[(run_id, row["checkpoint_id"])] = row["created_at"]
        threads.setdefault((run_id, row["thread"]), []).append(Scanned(
            run_id, row["thread"], row["checkpoint_id"],
            old=cutoff is None or row["created_at"] < cutoff,
            completed=row["status"] == RunStatus.COMPLETED.value,
            parked=tuple(p.anchor for p in t.parked_rows(row["parked"]))))
    open_at = {(r["run_id"], r["checkpoint_id"])
               for r in (yield from fetch(q.req_anchors[(True,)], run_id=run_id))}
    return threads, doomed(threads, open_at, keep_last), top


def _drop_unreferenced_values(q: Queries, run_id: str, thread: str) -> Tx[None]:
    """Delete a thread's value rows that no remaining checkpoint references.

    Log chunks stay while the thread has a checkpoint: its head needs every
    chunk of the thread.
    """
    used: set[tuple[str, int]] = set()
    for row in (yield from fetch(q.cp_versions, run_id=run_id, thread=thread)):
        try:
            used.update(t.decode_versions(row["value_versions"]).items())
        except (ValueError, TypeError):
            return  # an unreadable checkpoint may reference anything: keep all
    stored = yield from fetch(q.value_keys, run_id=run_id, thread=thread)
    yield from execute_many(q.value_delete, [
        {"run_id": run_id, "thread": thread, "channel": r["channel"], "seq": r["seq"]}
        for r in stored if (r["channel"], r["seq"]) not in used])
