"""Log segments: how a thread's log chunks are merged as it grows.

A checkpoint stores only the items it appended to each log channel (an
``append`` field or a node's history), as one JSON array: its *chunk*. A run
of n supersteps would leave n chunks per channel, and loading any checkpoint
would read all of them. So chunks are merged into *segments*, aligned blocks
of checkpoints whose sizes are powers of :data:`FANOUT`, like the digits of
a counter: when the checkpoint with ``seq`` s commits and ``s + 1`` is a
multiple of ``FANOUT ** k`` (the largest such k), the rows of the block
``[s + 1 - FANOUT ** k, s]`` (at most ``FANOUT - 1`` segments of each lower
level, and the new chunk) become one row per channel, in the same
transaction.

What follows:

* a thread whose head has ``seq`` h holds, per channel, at most
  ``(FANOUT - 1)`` rows per base-``FANOUT`` digit of ``h + 1``: O(log n) rows,
  and so does every read of one of its checkpoints (the rows whose first
  ``seq`` is at most the checkpoint's);
* every item is stored once (O(n) bytes in all) and rewritten once per
  level, ``log_FANOUT(n)`` times over the run; a commit merges only when
  ``s + 1`` is a multiple of ``FANOUT`` (one commit in ``FANOUT``), reading
  nothing otherwise;
* any checkpoint, old or head, reads back exactly: a segment holds the items
  of consecutive checkpoints in append order and is keyed by its first
  ``seq``, so the rows whose key is at most the checkpoint's ``seq`` hold
  every item it sees, first; the checkpoint's ``log_lengths`` says how many
  of them it keeps.

Every store applies :func:`merge_block` and :func:`merge_rows`; a migration
brings older databases to the same shape.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["FANOUT", "join_arrays", "merge_block", "merge_rows"]

#: How many segments of one level merge into one of the next.
FANOUT = 8


def merge_block(seq: int) -> int | None:
    """The first ``seq`` of the block to merge when checkpoint ``seq`` commits, or None."""
    n = seq + 1
    if n % FANOUT:
        return None
    size = FANOUT
    while n % (size * FANOUT) == 0:
        size *= FANOUT
    return n - size


def merge_rows(rows: Iterable[tuple[str, int, bytes]]) -> list[tuple[str, int, bytes]] | None:
    """One segment per channel from ``(channel, seq, data)`` rows of one block.

    Rows are taken in ``seq`` order; each segment is keyed by the first
    ``seq`` of its channel's rows. None when a row is not a JSON array
    (damaged): the block is then left as it is, so a read still reports it.
    """
    by_channel: dict[str, tuple[int, list[bytes]]] = {}
    for channel, seq, data in sorted(rows, key=lambda r: (r[0], r[1])):
        data = bytes(data)
        if data[:1] != b"[" or data[-1:] != b"]":
            return None
        first = by_channel.setdefault(channel, (seq, []))
        first[1].append(data)
    return [(channel, first, join_arrays(parts))
            for channel, (first, parts) in sorted(by_channel.items())]


def join_arrays(chunks: list[bytes]) -> bytes:
    """Concatenate JSON arrays given as bytes without decoding them."""
    if len(chunks) == 1:
        return bytes(chunks[0])
    inner = [bytes(c)[1:-1] for c in chunks if len(c) > 2]
    return b"[" + b",".join(inner) + b"]"
