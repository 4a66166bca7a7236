"""Statement groups several transaction functions share: lease checks, answers, rows."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, NoReturn

from ...errors import (
    LeaseLostError,
    RunNotFoundError,
    UnknownRequestError,
)
from ...model._clock import utcnow
from .._protocols import (
    HEAD_MOVED,
    CheckpointWrite,
    Lease,
    TaskWrite,
)
from .._segments import merge_block, merge_rows
from . import _codec as t
from ._ops import Tx, execute, execute_many, fetch

if TYPE_CHECKING:
    from ._tables import Queries

# -- transaction functions: runs and leases ------------------------------------------


def now_us() -> int:
    return t.to_us(utcnow())


def lease_lost(q: Queries, lease: Lease) -> Tx[NoReturn]:
    """Raise the right error for a lease (and head) check that matched no row."""
    rows = yield from fetch(q.run_lease, run_id=lease.run_id)
    if not rows:
        raise RunNotFoundError(lease.run_id)
    held = rows[0]
    if (held["lease_owner"], held["lease_epoch"]) == (lease.owner, lease.epoch):
        raise LeaseLostError(lease.run_id, lease.epoch, HEAD_MOVED)
    raise LeaseLostError(lease.run_id, lease.epoch)


def check_lease(q: Queries, lease: Lease) -> Tx[None]:
    found = yield from fetch(q.lease_check, run_id=lease.run_id, epoch=lease.epoch,
                             owner=lease.owner)
    if not found:
        yield from lease_lost(q, lease)


def record_answers(q: Queries, run_id: str, answers: Mapping[str, bytes], now: int) -> Tx[None]:
    changed = yield from execute_many(q.req_answer, [
        {"run_id": run_id, "request_id": rid, "new_answer": data, "now": now}
        for rid, data in answers.items()])
    if changed != len(answers):
        yield from unknown_request(q, run_id, answers)


def unknown_request(q: Queries, run_id: str, request_ids: Iterable[str]) -> Tx[NoReturn]:
    """Raise ``UnknownRequestError`` for the first id the run has no request for."""
    rows = yield from fetch(q.req_list[(False, False)], run_id=run_id, checkpoint_id=None)
    known = {row["request_id"] for row in rows}
    raise UnknownRequestError(run_id, next(rid for rid in request_ids if rid not in known))


def save_task_writes(q: Queries, writes: Sequence[TaskWrite]) -> Tx[int]:
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
    chunks = [(channel, meta.seq, data) for channel, data in cp.appends.items()]
    first = merge_block(meta.seq)
    if first is not None:  # the block this checkpoint completes becomes one segment a channel
        thread = {"run_id": meta.run_id, "thread": meta.thread}
        rows = yield from fetch(q.chunk_from, **thread, first=first)
        merged = merge_rows([*((r["channel"], r["seq"], r["data"]) for r in rows), *chunks])
        if merged is not None:
            if rows:
                yield from execute(q.chunk_delete_from, **thread, first=first)
            chunks = merged
    yield from execute_many(q.chunk_insert, [
        {"run_id": meta.run_id, "thread": meta.thread, "seq": seq, "channel": channel,
         "data": data} for channel, seq, data in chunks])
