"""Log chunks merged into segments: loading any checkpoint reads O(log n) rows.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26

From this revision on, a commit merges the log chunks of each completed
block of checkpoints into one segment per channel (``durable_flow/store/
_segments.py``). This revision brings the threads written before it to the
same shape: every thread's chunks are grouped into the aligned blocks its
head has completed and each group becomes one row, keyed by its first
``seq``. No column changes: a segment is read exactly like a chunk (the rows
whose ``seq`` is at most a checkpoint's, cut to its ``log_lengths``), so
downgrading keeps the merged rows, which the older code reads the same way.
A group holding a damaged row (not a JSON array) is left as it is, so reading
it still reports the damage.
"""

from __future__ import annotations

import bisect
from functools import partial
from itertools import groupby

import sqlalchemy as sa
from alembic import op

from durable_flow.store._segments import FANOUT, merge_rows

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_checkpoints = sa.table("checkpoints", sa.column("run_id", sa.String()),
                        sa.column("thread", sa.String()), sa.column("seq", sa.Integer()))
_chunks = sa.table("log_chunks", sa.column("run_id", sa.String()),
                   sa.column("thread", sa.String()), sa.column("seq", sa.Integer()),
                   sa.column("channel", sa.String()), sa.column("data", sa.LargeBinary()))


def block_starts(head: int) -> list[int]:
    """The first seqs of the segments of a thread whose head has ``head`` as seq."""
    n, size, first, starts = head + 1, 1, 0, []
    while size * FANOUT <= n:
        size *= FANOUT
    while first < n:
        while first + size > n:
            size //= FANOUT
        starts.append(first)
        first += size
    return starts


def _block(starts: list[int], row: sa.Row[tuple[str, int, bytes]]) -> tuple[str, int]:
    """The channel of a chunk row and the first seq of the segment it belongs in."""
    return row[0], starts[bisect.bisect_right(starts, row[1]) - 1]


def upgrade() -> None:
    bind = op.get_bind()
    threads = bind.execute(
        sa.select(_checkpoints.c.run_id, _checkpoints.c.thread, sa.func.max(_checkpoints.c.seq))
        .group_by(_checkpoints.c.run_id, _checkpoints.c.thread)).all()
    for run_id, thread, head in threads:
        where = (_chunks.c.run_id == run_id, _chunks.c.thread == thread)
        rows = bind.execute(sa.select(_chunks.c.channel, _chunks.c.seq, _chunks.c.data)
                            .where(*where, _chunks.c.seq <= head)
                            .order_by(_chunks.c.channel, _chunks.c.seq)).all()
        starts = block_starts(head)
        for (channel, _), group in groupby(rows, key=partial(_block, starts)):
            members = [(r[0], r[1], bytes(r[2])) for r in group]
            merged = merge_rows(members) if len(members) > 1 else None
            if merged is None:
                continue
            bind.execute(sa.delete(_chunks).where(
                *where, _chunks.c.channel == channel,
                _chunks.c.seq.in_([seq for _, seq, _ in members])))
            bind.execute(sa.insert(_chunks), [
                {"run_id": run_id, "thread": thread, "channel": ch, "seq": seq, "data": data}
                for ch, seq, data in merged])


def downgrade() -> None:
    pass  # merged rows read back the same way in the older code
