"""The SQL implementation of ``CheckpointStore``, shared by every SQL backend.

Each store method is a *transaction function*: a generator that yields the
statements to run (:class:`Fetch`, :class:`Execute`, ...) and receives their
results, without doing any I/O itself. A backend's :class:`Driver` opens the
transaction (``write=True`` must take the write lock up front), feeds the
generator until it returns and commits, or rolls back if it raises. So
SQLite can run a whole superstep commit in one hop to its database thread,
and a PostgreSQL driver can run the same functions with ``await``. Having
no side effects, a transaction function can also be run again from the
start: the store hands drivers a call that makes the generator, so a driver
may retry a transaction that did not commit (a lost connection, a deadlock).

The statements are :class:`durable_flow.store.sql._tables.Queries`, compiled for the
backend's :class:`~durable_flow.store.sql._tables.SqlDialect`. Dialect specifics stay
behind that dialect (SQLAlchemy's, with its ``INSERT ... ON CONFLICT``) and
the driver (PRAGMAs, ``BEGIN IMMEDIATE``, locking).
"""

from __future__ import annotations

import abc
import collections
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any, NoReturn, Protocol, TypeVar, cast

from ...errors import (
    CheckpointCorruptedError,
    CheckpointNotFoundError,
    LeaseLostError,
    RunExistsError,
    RunLockedError,
    RunNotFoundError,
    RunNotResumableError,
    UnknownRequestError,
)
from ...model._clock import utcnow
from ...model._records import RunStatus
from .._protocols import (
    HEAD_MOVED,
    CheckpointMeta,
    CheckpointWrite,
    Claim,
    Commit,
    InboxCursor,
    Lease,
    LoadedCheckpoint,
    RequestRow,
    RunRecord,
    StepRow,
    TaskWrite,
    check_claimable,
    check_respondable,
    claimed_record,
)
from .._retention import Scanned, doomed
from . import _tables as t
from ._tables import Queries, SqlDialect, Statement, queries_for

__all__ = [
    "Driver", "Execute", "ExecuteMany", "Fetch", "FetchEach", "Op", "SqlStore", "Tx", "drive",
    "drive_async",
]

T = TypeVar("T")
Row = tuple[Any, ...]

# -- operations a transaction function yields ---------------------------------------


@dataclass(frozen=True, slots=True)
class Fetch:
    """Run a query; the driver sends back its rows (a list of tuples)."""

    stmt: Statement
    params: tuple[object, ...]


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


Op = Fetch | FetchEach | Execute | ExecuteMany
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

    async def run(self, tx: Callable[[], Tx[T]], *, write: bool) -> T:
        """Run ``tx()`` in one transaction; ``write`` takes the write lock before anything.

        The driver may call ``tx`` again to retry a transaction that did not
        commit; each call makes a fresh generator.
        """
        ...


def fetch(stmt: Statement, **params: object) -> Tx[list[dict[str, Any]]]:
    """Yield a query; return its rows as dicts keyed by column."""
    rows: list[Row] = yield Fetch(stmt, stmt.bind(params))
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


# -- transaction functions: runs and leases ------------------------------------------


def _now() -> int:
    return t.to_us(utcnow())


def _lease_lost(q: Queries, lease: Lease) -> Tx[NoReturn]:
    """Raise the right error for a lease (and head) check that matched no row."""
    rows = yield from fetch(q.run_lease, run_id=lease.run_id)
    if not rows:
        raise RunNotFoundError(lease.run_id)
    held = rows[0]
    if (held["lease_owner"], held["lease_epoch"]) == (lease.owner, lease.epoch):
        raise LeaseLostError(lease.run_id, lease.epoch, HEAD_MOVED)
    raise LeaseLostError(lease.run_id, lease.epoch)


def _check_lease(q: Queries, lease: Lease) -> Tx[None]:
    found = yield from fetch(q.lease_check, run_id=lease.run_id, epoch=lease.epoch,
                             owner=lease.owner)
    if not found:
        yield from _lease_lost(q, lease)


def create_run_tx(
    q: Queries, run: RunRecord, checkpoints: Sequence[CheckpointWrite], lease: Lease | None,
    task_writes: Sequence[TaskWrite] = (), steps: Sequence[StepRow] = (),
    requests: Sequence[RequestRow] = (),
) -> Tx[None]:
    """Insert a run, its first checkpoints, their recorded rows and its lease.

    ``RunExistsError`` if the run exists.
    """
    if (yield from fetch(q.run_lease, run_id=run.run_id)):
        raise RunExistsError(run.run_id)
    params = t.run_params(run)
    if lease is not None:
        params.update(lease_owner=lease.owner, lease_epoch=lease.epoch,
                      lease_expires_at=t.to_us(lease.expires_at))
    yield from execute(q.run_insert, **params)
    for cp in checkpoints:
        yield from insert_checkpoint(q, cp)
    yield from _save_task_writes(q, task_writes)
    yield from execute_many(q.step_upsert, [
        {"run_id": s.run_id, "checkpoint_id": s.checkpoint_id, "node": s.node, "name": s.name,
         "data": s.data, "created_at": t.to_us(s.created_at)} for s in steps])
    yield from execute_many(q.req_insert, [t.request_params(r, run.run_id) for r in requests])


def get_run_tx(q: Queries, run_id: str) -> Tx[RunRecord | None]:
    """The run row, or None."""
    rows = yield from fetch(q.run_get, run_id=run_id)
    return t.run_from_row(rows[0]) if rows else None


def list_runs_tx(q: Queries, status: RunStatus | None, workflow: str | None) -> Tx[list[RunRecord]]:
    """Runs matching the filters, newest first."""
    stmt = q.run_list[(status is not None, workflow is not None)]
    rows = yield from fetch(stmt, status=None if status is None else status.value,
                            workflow_name=workflow)
    return [t.run_from_row(row) for row in rows]


def claim_tx(q: Queries, claim: Claim) -> Tx[Lease]:
    """Check status, lease and head, record answers and take the lease: one transaction."""
    rows = yield from fetch(q.run_get_locked, run_id=claim.run_id)
    if not rows:
        raise RunNotFoundError(claim.run_id)
    run, now = t.run_from_row(rows[0]), utcnow()
    check_claimable(run, claim, now)
    answers = yield from _open_answers(q, claim.run_id, claim.answers)
    status, error = run.status, run.error
    if answers or status is not RunStatus.WAITING:
        status, error = RunStatus.RUNNING, None
    if answers:
        yield from _answer(q, run.run_id, answers, t.to_us(now))
    lease = Lease(run.run_id, claim.owner, run.lease_epoch + 1,
                  now + timedelta(seconds=claim.ttl))
    # conditional on the epoch read above, in case a backend did not lock the row
    if not (yield from execute(q.run_claim, run_id=run.run_id, old_epoch=run.lease_epoch,
                               owner=lease.owner, epoch=lease.epoch,
                               expires=t.to_us(lease.expires_at), new_status=status.value,
                               new_error=t.error_json(error), now=t.to_us(now))):
        raise RunLockedError(run.run_id, "another runtime", claim.ttl)
    return lease


def _open_answers(q: Queries, run_id: str, answers: Mapping[str, bytes]) -> Tx[dict[str, bytes]]:
    """The answers to record: open requests only; identical repeats skipped."""
    ids = list(answers)
    if not ids:
        return {}
    found = yield from fetch_each(q.req_get_answer, [
        {"run_id": run_id, "request_id": rid} for rid in ids])
    out: dict[str, bytes] = {}
    for rid, rows in zip(ids, found, strict=True):
        answer = answers[rid]
        if not rows or (rows[0][0] is not None and bytes(rows[0][0]) != answer):
            raise UnknownRequestError(run_id, rid)
        if rows[0][0] is None:
            out[rid] = answer
    return out


def claim_next_tx(q: Queries, owner: str, ttl: float, workflows: Sequence[tuple[str, str]],
                  limit: int) -> Tx[list[tuple[RunRecord, Lease]]]:
    """Claim up to ``limit`` runs a worker may take, highest priority, then oldest, first."""
    now = utcnow()
    candidates: list[RunRecord] = []
    for name, version in workflows:
        rows = yield from fetch(q.run_claimable, workflow_name=name, workflow_version=version,
                                now=t.to_us(now), n=limit)
        candidates.extend(t.run_from_row(row) for row in rows)
    candidates.sort(key=lambda r: (-r.priority, r.created_at, r.run_id))
    claimed: list[tuple[RunRecord, Lease]] = []
    for run in candidates[:limit]:
        lease = Lease(run.run_id, owner, run.lease_epoch + 1, now + timedelta(seconds=ttl))
        if (yield from execute(q.run_claim, run_id=run.run_id, old_epoch=run.lease_epoch,
                               owner=owner, epoch=lease.epoch, expires=t.to_us(lease.expires_at),
                               new_status=RunStatus.RUNNING.value, new_error=None,
                               now=t.to_us(now))):
            claimed.append((claimed_record(run, lease, now), lease))
    return claimed


def respond_tx(q: Queries, run_id: str, answers: Mapping[str, bytes]) -> Tx[RunRecord]:
    """Record answers; a waiting run with no open request left becomes ``queued``."""
    rows = yield from fetch(q.run_get_locked, run_id=run_id)
    if not rows:
        raise RunNotFoundError(run_id)
    run, now = t.run_from_row(rows[0]), utcnow()
    check_respondable(run, now)
    new = yield from _open_answers(q, run_id, answers)
    if new:
        yield from _answer(q, run_id, new, t.to_us(now))
    still_open = yield from fetch(q.req_list[(True, False)], run_id=run_id, checkpoint_id=None)
    if run.status is RunStatus.WAITING and not still_open:
        yield from execute(q.run_set_status, run_id=run_id, new_status=RunStatus.QUEUED.value,
                           now=t.to_us(now))
    return t.run_from_row((yield from fetch(q.run_get, run_id=run_id))[0])


def renew_lease_tx(q: Queries, lease: Lease, ttl: float) -> Tx[Lease]:
    """Push the expiry of a lease we still hold."""
    renewed = Lease(lease.run_id, lease.owner, lease.epoch, utcnow() + timedelta(seconds=ttl))
    if not (yield from execute(q.lease_renew, run_id=lease.run_id, epoch=lease.epoch,
                               owner=lease.owner, expires=t.to_us(renewed.expires_at))):
        yield from _lease_lost(q, lease)
    return renewed


def release_lease_tx(q: Queries, lease: Lease, requeue: bool = False) -> Tx[None]:
    """Free the lease if it is still ours (``requeue``: a ``running`` run becomes ``queued``)."""
    if requeue:
        yield from execute(q.lease_release_requeue, run_id=lease.run_id, epoch=lease.epoch,
                           owner=lease.owner, now=_now())
    else:
        yield from execute(q.lease_release, run_id=lease.run_id, epoch=lease.epoch,
                           owner=lease.owner)


def cancel_run_tx(q: Queries, run_id: str) -> Tx[RunRecord]:
    """Cancel, fence out the holder (epoch + 1) and close the open requests."""
    rows = yield from fetch(q.run_get_locked, run_id=run_id)
    if not rows:
        raise RunNotFoundError(run_id)
    status = RunStatus(rows[0]["status"])
    if status.is_final:
        raise RunNotResumableError(run_id, status.value)
    yield from execute(q.run_cancel, run_id=run_id, now=_now())
    yield from execute(q.req_drop_open, run_id=run_id)
    rows = yield from fetch(q.run_get, run_id=run_id)
    return t.run_from_row(rows[0])


# -- transaction functions: the superstep commit ---------------------------------------


def commit_tx(q: Queries, commit: Commit) -> Tx[None]:
    """Write a commit; the lease check is the first statement of the transaction."""
    lease, now = commit.lease, _now()
    run_id = lease.run_id
    yield from _update_run(q, commit, now)
    if commit.answers:
        yield from _answer(q, run_id, commit.answers, now)
    if commit.reopen:
        yield from _reopen(q, run_id, commit.reopen)
    if commit.drop_open_requests:
        yield from execute(q.req_drop_open, run_id=run_id)
    yield from execute_many(q.req_insert, [t.request_params(r, run_id) for r in commit.requests])
    yield from _save_task_writes(q, commit.task_writes)
    if commit.mark is not None:
        mark = commit.mark
        if not (yield from execute(q.cp_mark, run_id=run_id, checkpoint_id=mark.checkpoint_id,
                                   new_status=mark.status.value,
                                   new_error=t.error_json(mark.error))):
            raise CheckpointNotFoundError(run_id, mark.checkpoint_id)
    if commit.checkpoint is not None:
        meta = commit.checkpoint.meta
        if meta.thread or commit.extends is None:
            yield from _check_thread_head(q, commit)
        yield from insert_checkpoint(q, commit.checkpoint)


def _check_thread_head(q: Queries, commit: Commit) -> Tx[None]:
    """Refuse a checkpoint whose thread's head is not its parent (top level: see run CAS)."""
    meta = commit.checkpoint.meta if commit.checkpoint is not None else None
    if meta is None:
        return
    rows = yield from fetch(q.cp_head, run_id=meta.run_id, thread=meta.thread)
    if (rows[0]["checkpoint_id"] if rows else None) != meta.parent_id:
        raise LeaseLostError(meta.run_id, commit.lease.epoch, HEAD_MOVED)


def _update_run(q: Queries, commit: Commit, now: int) -> Tx[None]:
    """One UPDATE of the run row that is also the lease check."""
    lease, upd = commit.lease, commit.run
    params: dict[str, object] = {"run_id": lease.run_id, "epoch": lease.epoch,
                                 "owner": lease.owner, "now": now}
    cas = commit.extends is not None
    stmt = q.run_touch_cas if cas else q.run_touch
    if upd is not None:
        if upd.release:
            stmt = q.run_update_release_cas if cas else q.run_update_release
        else:
            stmt = q.run_update_cas if cas else q.run_update
        params.update(new_status=upd.status.value, new_error=t.error_json(upd.error),
                      new_head=upd.head_checkpoint_id or None)
    if cas:
        params["expect_head"] = commit.extends
    if not (yield from execute(stmt, **params)):
        yield from _lease_lost(q, lease)


def _answer(q: Queries, run_id: str, answers: Mapping[str, bytes], now: int) -> Tx[None]:
    changed = yield from execute_many(q.req_answer, [
        {"run_id": run_id, "request_id": rid, "new_answer": data, "now": now}
        for rid, data in answers.items()])
    if changed != len(answers):
        yield from _unknown_request(q, run_id, answers)


def _reopen(q: Queries, run_id: str, request_ids: Sequence[str]) -> Tx[None]:
    """Clear the answers of existing requests (one statement); unknown ids raise."""
    changed = yield from execute_many(q.req_reopen, [
        {"run_id": run_id, "request_id": rid} for rid in request_ids])
    # An UPDATE counts every row it matches, already open or not.
    if changed != len(request_ids):
        yield from _unknown_request(q, run_id, request_ids)


def _unknown_request(q: Queries, run_id: str, request_ids: Iterable[str]) -> Tx[NoReturn]:
    """Raise ``UnknownRequestError`` for the first id the run has no request for."""
    rows = yield from fetch(q.req_list[(False, False)], run_id=run_id, checkpoint_id=None)
    known = {row["request_id"] for row in rows}
    raise UnknownRequestError(run_id, next(rid for rid in request_ids if rid not in known))


def _save_task_writes(q: Queries, writes: Sequence[TaskWrite]) -> Tx[int]:
    return (yield from execute_many(q.tw_upsert, [
        {"run_id": w.run_id, "checkpoint_id": w.checkpoint_id, "node": w.node, "data": w.data,
         "created_at": t.to_us(w.created_at)} for w in writes]))


def insert_checkpoint(q: Queries, cp: CheckpointWrite) -> Tx[None]:
    """Insert a checkpoint's metadata, its new values and its log chunks."""
    meta = cp.meta
    key = {"run_id": meta.run_id, "thread": meta.thread, "seq": meta.seq}
    yield from execute(q.cp_insert, **t.checkpoint_params(meta))
    yield from execute_many(q.value_insert, [
        {**key, "channel": channel, "data": data} for channel, data in cp.values.items()])
    yield from execute_many(q.chunk_insert, [
        {**key, "channel": channel, "data": data} for channel, data in cp.appends.items()])


def put_task_writes_tx(q: Queries, lease: Lease, writes: Sequence[TaskWrite]) -> Tx[None]:
    """Save finished tasks' writes under the lease."""
    yield from _check_lease(q, lease)
    yield from _save_task_writes(q, writes)


def put_step_tx(q: Queries, lease: Lease, step: StepRow) -> Tx[None]:
    """Record a step result under the lease."""
    yield from _check_lease(q, lease)
    yield from execute(q.step_upsert, run_id=step.run_id, checkpoint_id=step.checkpoint_id,
                       node=step.node, name=step.name, data=step.data,
                       created_at=t.to_us(step.created_at))


# -- transaction functions: reads -------------------------------------------------------


def get_checkpoint_tx(q: Queries, run_id: str, checkpoint_id: str) -> Tx[CheckpointMeta | None]:
    """One checkpoint's metadata, or None."""
    rows = yield from fetch(q.cp_get, run_id=run_id, checkpoint_id=checkpoint_id)
    return t.checkpoint_from_row(rows[0]) if rows else None


def thread_head_tx(q: Queries, run_id: str, thread: str) -> Tx[CheckpointMeta | None]:
    """The checkpoint with the highest seq in a thread, or None."""
    rows = yield from fetch(q.cp_head, run_id=run_id, thread=thread)
    return t.checkpoint_from_row(rows[0]) if rows else None


def list_checkpoints_tx(
    q: Queries, run_id: str, namespace: str | None, thread: str | None
) -> Tx[list[CheckpointMeta]]:
    """A run's checkpoints (optionally one namespace/thread), newest first."""
    stmt = q.cp_list[(namespace is not None, thread is not None)]
    rows = yield from fetch(stmt, run_id=run_id, namespace=namespace, thread=thread)
    return [t.checkpoint_from_row(row) for row in rows]


def load_checkpoint_tx(q: Queries, run_id: str, checkpoint_id: str) -> Tx[LoadedCheckpoint]:
    """A checkpoint with every value it references and every log chunk up to it."""
    meta = yield from get_checkpoint_tx(q, run_id, checkpoint_id)
    if meta is None:
        raise CheckpointNotFoundError(run_id, checkpoint_id)
    key = {"run_id": run_id, "thread": meta.thread}
    found = yield from fetch_each(q.value_get, [
        {**key, "channel": ch, "seq": seq} for ch, seq in meta.value_versions.items()])
    values: dict[str, bytes] = {}
    for (channel, seq), rows in zip(meta.value_versions.items(), found, strict=True):
        if not rows:
            raise CheckpointCorruptedError(
                run_id, checkpoint_id, f"value of channel {channel!r} at seq {seq} is missing")
        values[channel] = rows[0][0]
    logs: dict[str, list[bytes]] = {ch: [] for ch in meta.log_lengths}
    # raw (channel, data) tuples: a long run has one chunk per superstep per channel
    chunks: list[Row] = yield Fetch(q.chunk_upto, q.chunk_upto.bind({**key, "upto": meta.seq}))
    for channel, data in chunks:
        if (bucket := logs.get(channel)) is not None:
            bucket.append(data)
    return LoadedCheckpoint(meta=meta, values=values,
                            logs={ch: b for ch, b in logs.items() if b})


def get_task_writes_tx(q: Queries, run_id: str, checkpoint_id: str) -> Tx[list[TaskWrite]]:
    """Task writes against a base checkpoint, in node order."""
    rows = yield from fetch(q.tw_get, run_id=run_id, checkpoint_id=checkpoint_id)
    return sorted((t.task_write_from_row(r) for r in rows), key=lambda w: w.node)


def get_steps_tx(q: Queries, run_id: str, checkpoint_id: str, node: str) -> Tx[dict[str, bytes]]:
    """Step results of one node run."""
    rows = yield from fetch(q.step_get, run_id=run_id, checkpoint_id=checkpoint_id, node=node)
    return {row["name"]: row["data"] for row in rows}


def get_requests_tx(
    q: Queries, run_id: str, open_only: bool, checkpoint_id: str | None
) -> Tx[list[RequestRow]]:
    """Requests of a run, oldest first."""
    stmt = q.req_list[(open_only, checkpoint_id is not None)]
    rows = yield from fetch(stmt, run_id=run_id, checkpoint_id=checkpoint_id)
    return [t.request_from_row(row) for row in rows]


def pending_requests_tx(q: Queries, workflow_name: str | None, limit: int | None,
                        after: InboxCursor | None) -> Tx[list[RequestRow]]:
    """Open requests of every run, oldest first; a page after ``after`` of ``limit`` rows.

    The inbox can hold tens of thousands of rows, so they are built from the
    raw tuples (no dict per row), and a page is a range of the open-requests
    index (a row-value comparison), never an offset.
    """
    stmt = q.req_inbox[(workflow_name is not None, after is not None, limit is not None)]
    created, run_id, request_id = after if after is not None else (None, None, None)
    rows: list[Row] = yield Fetch(stmt, stmt.bind({
        "workflow_name": workflow_name, "limit": limit, "after_run": run_id,
        "after_created": None if created is None else t.to_us(created), "after_id": request_id}))
    return t.requests_from_tuples(stmt.columns, rows)


# -- transaction functions: retention ---------------------------------------------------


def prune_tx(
    q: Queries, run_id: str | None, keep_last: int | None, older_than: datetime | None
) -> Tx[int]:
    """Delete the checkpoints nothing needs (see ``CheckpointStore.prune``)."""
    scope = (run_id is not None,)
    cutoff = None if older_than is None else t.to_us(older_than)
    threads: dict[tuple[str, str], list[Scanned]] = {}
    for row in (yield from fetch(q.cp_scan[scope], run_id=run_id)):
        threads.setdefault((row["run_id"], row["thread"]), []).append(Scanned(
            row["run_id"], row["thread"], row["checkpoint_id"],
            old=cutoff is None or row["created_at"] < cutoff,
            completed=row["status"] == RunStatus.COMPLETED.value))
    open_at = {(r["run_id"], r["checkpoint_id"])
               for r in (yield from fetch(q.req_anchors[scope], run_id=run_id))}
    gone = doomed(threads, open_at, keep_last)
    keys = [{"run_id": c.run_id, "checkpoint_id": c.id} for c in gone]
    for stmt in (q.cp_delete, q.tw_delete, q.step_delete, q.req_delete):
        yield from execute_many(stmt, keys)
    left = collections.Counter((c.run_id, c.thread) for c in gone)
    for run, thread in sorted(left):
        if left[(run, thread)] == len(threads[(run, thread)]):
            # A whole sub-workflow went with its anchor: its log chunks too.
            yield from execute(q.chunk_delete_thread, run_id=run, thread=thread)
        yield from _drop_unreferenced_values(q, run, thread)
    return len(gone)


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


# -- the store --------------------------------------------------------------------------


class SqlStore(abc.ABC):
    """``CheckpointStore`` over SQL: every method is one transaction on the driver.

    Subclasses open the backend in ``setup`` and provide :attr:`driver`.
    """

    def __init__(self, dialect: SqlDialect) -> None:
        self._q = queries_for(dialect)

    @property
    @abc.abstractmethod
    def driver(self) -> Driver:
        """The backend's driver; raises ``StoreError`` before ``setup``."""

    @abc.abstractmethod
    async def setup(self) -> None:
        """Create or upgrade the schema; idempotent."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release connections."""

    async def create_run(
        self, run: RunRecord, checkpoints: Sequence[CheckpointWrite], lease: Lease | None,
        *, task_writes: Sequence[TaskWrite] = (), steps: Sequence[StepRow] = (),
        requests: Sequence[RequestRow] = (),
    ) -> None:
        """Insert a run with its first checkpoint(s), their recorded rows and lease atomically."""
        await self.driver.run(partial(create_run_tx, self._q, run, checkpoints, lease, task_writes,
                                            steps, requests), write=True)

    async def get_run(self, run_id: str) -> RunRecord | None:
        """Return the run row, or None."""
        return await self.driver.run(partial(get_run_tx, self._q, run_id), write=False)

    async def list_runs(
        self, *, status: RunStatus | None = None, workflow_name: str | None = None
    ) -> list[RunRecord]:
        """Runs matching the filters, newest first."""
        return await self.driver.run(partial(list_runs_tx, self._q, status, workflow_name),
                                     write=False)

    async def claim(self, claim: Claim) -> Lease:
        """Take ownership of a run in one transaction (see ``RunStore.claim``)."""
        return await self.driver.run(partial(claim_tx, self._q, claim), write=True)

    async def renew_lease(self, lease: Lease, ttl: float) -> Lease:
        """Extend a held lease; ``LeaseLostError`` if it was taken over."""
        return await self.driver.run(partial(renew_lease_tx, self._q, lease, ttl), write=True)

    async def release_lease(self, lease: Lease, *, requeue: bool = False) -> None:
        """Give the lease up; does nothing if it is no longer ours."""
        await self.driver.run(partial(release_lease_tx, self._q, lease, requeue), write=True)

    async def claim_next(self, owner: str, ttl: float, workflows: Sequence[tuple[str, str]],
                         *, limit: int) -> list[tuple[RunRecord, Lease]]:
        """Claim up to ``limit`` runs for a worker (see ``RunStore.claim_next``)."""
        return await self.driver.run(partial(claim_next_tx, self._q, owner, ttl, workflows, limit),
                                     write=True)

    async def respond(self, run_id: str, answers: Mapping[str, bytes]) -> RunRecord:
        """Record answers without executing (see ``RunStore.respond``)."""
        return await self.driver.run(partial(respond_tx, self._q, run_id, answers), write=True)

    async def cancel_run(self, run_id: str) -> RunRecord:
        """Mark the run cancelled, fence out any holder, close its requests."""
        return await self.driver.run(partial(cancel_run_tx, self._q, run_id), write=True)

    async def commit(self, commit: Commit) -> None:
        """Write a commit in one transaction; ``LeaseLostError`` writes nothing."""
        await self.driver.run(partial(commit_tx, self._q, commit), write=True)

    async def put_task_writes(self, lease: Lease, writes: Sequence[TaskWrite]) -> None:
        """Save finished tasks' writes in one transaction."""
        await self.driver.run(partial(put_task_writes_tx, self._q, lease, writes), write=True)

    async def put_step(self, lease: Lease, step: StepRow) -> None:
        """Record a durable step result."""
        await self.driver.run(partial(put_step_tx, self._q, lease, step), write=True)

    async def get_task_writes(self, run_id: str, checkpoint_id: str) -> list[TaskWrite]:
        """Task writes saved against a base checkpoint, in node order."""
        return await self.driver.run(partial(get_task_writes_tx, self._q, run_id, checkpoint_id),
                                     write=False)

    async def get_steps(self, run_id: str, checkpoint_id: str, node: str) -> dict[str, bytes]:
        """Recorded ``ctx.step`` results of one node run from a base checkpoint."""
        return await self.driver.run(partial(get_steps_tx, self._q, run_id, checkpoint_id, node),
                                     write=False)

    async def load_checkpoint(self, run_id: str, checkpoint_id: str) -> LoadedCheckpoint:
        """Read one checkpoint back exactly."""
        return await self.driver.run(partial(load_checkpoint_tx, self._q, run_id, checkpoint_id),
                                     write=False)

    async def get_checkpoint(self, run_id: str, checkpoint_id: str) -> CheckpointMeta | None:
        """Metadata of one checkpoint, or None."""
        return await self.driver.run(partial(get_checkpoint_tx, self._q, run_id, checkpoint_id),
                                     write=False)

    async def thread_head(self, run_id: str, thread: str) -> CheckpointMeta | None:
        """The newest checkpoint of a thread, or None."""
        return await self.driver.run(partial(thread_head_tx, self._q, run_id, thread), write=False)

    async def list_checkpoints(
        self, run_id: str, *, namespace: str | None = None, thread: str | None = None
    ) -> list[CheckpointMeta]:
        """Checkpoint metadata of a run, newest first."""
        return await self.driver.run(
            partial(list_checkpoints_tx, self._q, run_id, namespace, thread), write=False)

    async def get_requests(
        self, run_id: str, *, open_only: bool = False, checkpoint_id: str | None = None
    ) -> list[RequestRow]:
        """Requests of a run, oldest first."""
        return await self.driver.run(
            partial(get_requests_tx, self._q, run_id, open_only, checkpoint_id), write=False)

    async def pending_requests(self, *, workflow_name: str | None = None, limit: int | None = None,
                               after: InboxCursor | None = None) -> list[RequestRow]:
        """Every open request across all runs, oldest first (the inbox); ``limit``/``after`` page it."""
        return await self.driver.run(
            partial(pending_requests_tx, self._q, workflow_name, limit, after), write=False)

    async def prune(
        self,
        *,
        run_id: str | None = None,
        keep_last: int | None = None,
        older_than: datetime | None = None,
    ) -> int:
        """Delete old checkpoints nothing needs; return how many."""
        return await self.driver.run(partial(prune_tx, self._q, run_id, keep_last, older_than),
                                     write=True)
