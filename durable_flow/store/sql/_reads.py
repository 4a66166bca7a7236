"""Transaction functions that read: checkpoints, task writes, steps, requests."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import (
    CheckpointCorruptedError,
    CheckpointNotFoundError,
)
from ...model._clock import utcnow
from .._protocols import (
    CheckpointMeta,
    InboxCursor,
    LoadedCheckpoint,
    RequestRow,
    TaskWrite,
)
from .._rows import answerable_now
from . import _codec as t
from ._ops import Fetch, Row, Tx, fetch, fetch_each

if TYPE_CHECKING:
    from ._tables import Queries

# -- transaction functions: reads -------------------------------------------------------


def get_checkpoint_tx(q: Queries, run_id: str, checkpoint_id: str) -> Tx[CheckpointMeta | None]:
    """One checkpoint's metadata, or None."""
    rows = yield from fetch(q.cp_get, run_id=run_id, checkpoint_id=checkpoint_id)
    return t.checkpoint_from_row(rows[0]) if rows else None


def thread_head_tx(q: Queries, run_id: str, thread: str) -> Tx[CheckpointMeta | None]:
    """The checkpoint with the highest seq in a thread, or None."""
    rows = yield from fetch(q.cp_head, run_id=run_id, thread=thread)
    return t.checkpoint_from_row(rows[0]) if rows else None


def first_checkpoint_tx(q: Queries, run_id: str, thread: str) -> Tx[CheckpointMeta | None]:
    """The checkpoint with the lowest seq in a thread, or None."""
    rows = yield from fetch(q.cp_first, run_id=run_id, thread=thread)
    return t.checkpoint_from_row(rows[0]) if rows else None


def checkpoint_ids_tx(q: Queries, run_id: str, part: str, limit: int) -> Tx[list[str]]:
    """At most ``limit`` ids of a run's checkpoints ending with ``part``, else starting with it."""
    escaped = part.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    for pattern, match in (("%" + escaped, str.endswith), (escaped + "%", str.startswith)):
        rows = yield from fetch(q.cp_ids_like, run_id=run_id, pattern=pattern, limit=limit)
        ids = [row["checkpoint_id"] for row in rows if match(row["checkpoint_id"], part)]
        if ids:
            return ids
    return []


def list_checkpoints_tx(
    q: Queries, run_id: str, namespace: str | None, thread: str | None,
    before: str | None = None, limit: int | None = None,
) -> Tx[list[CheckpointMeta]]:
    """A run's checkpoints (optionally one namespace/thread), newest first; a page of them."""
    stmt = q.cp_list[(namespace is not None, thread is not None, before is not None,
                      limit is not None)]
    rows = yield from fetch(stmt, run_id=run_id, namespace=namespace, thread=thread,
                            before=before, limit=limit)
    return [t.checkpoint_from_row(row) for row in rows]


def child_checkpoints_tx(q: Queries, run_id: str, parent_id: str) -> Tx[list[CheckpointMeta]]:
    """The checkpoints written on ``parent_id``, oldest first (a few index rows).

    The next checkpoint of its thread, and the copies a run went on from
    (``source = "resume"``, in any thread).
    """
    meta = yield from get_checkpoint_tx(q, run_id, parent_id)
    if meta is None:
        return []
    after = yield from fetch(q.cp_at_seq, run_id=run_id, thread=meta.thread, seq=meta.seq + 1)
    copies = yield from fetch(q.cp_resumed, run_id=run_id, parent_id=parent_id)
    found = {m.id: m for m in map(t.checkpoint_from_row, [*after, *copies])
             if m.parent_id == parent_id}
    return [found[k] for k in sorted(found)]


def namespace_heads_tx(q: Queries, run_id: str) -> Tx[list[CheckpointMeta]]:
    """The newest checkpoint of each sub-workflow namespace of a run, by namespace."""
    rows = yield from fetch(q.cp_namespace_heads, run_id=run_id)
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
    """Open requests a person can answer now, oldest first; a page of them.

    Those are the requests whose deadline (if any) is ahead, and those past it
    that escalate and were not escalated yet: until the escalation is
    recorded their first people may still answer. A page holds at most
    ``limit`` rows ordered after the cursor ``after``.

    The inbox can hold tens of thousands of rows, so they are built from the
    raw tuples (no dict per row), and a page is a range of the open-requests
    index (a row-value comparison), never an offset. The statement tells an
    escalating approval by its bytes; each late row is checked again here
    (``answerable_now``), and should one be dropped the next rows fill the page.
    """
    now = utcnow()
    kept: list[RequestRow] = []
    while True:
        stmt = q.req_inbox[(workflow_name is not None, after is not None, limit is not None)]
        created, run_id, request_id = after if after is not None else (None, None, None)
        rows: list[Row] = yield Fetch(stmt, stmt.bind({
            "workflow_name": workflow_name, "limit": limit, "after_run": run_id,
            "after_created": None if created is None else t.to_us(created),
            "after_id": request_id, "now": t.to_us(now)}))
        found = t.requests_from_tuples(stmt.columns, rows)
        kept.extend(r for r in found if answerable_now(r, now))
        if limit is None or len(found) < limit or len(kept) >= limit:
            return kept[:limit] if limit is not None else kept
        last = found[-1]
        after = (last.created_at, last.run_id, last.id)
