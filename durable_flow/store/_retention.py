"""Which checkpoints ``prune`` removes: the rule of ``CheckpointStore.prune``, for every store.

Stores scan their checkpoints into :class:`Scanned` rows and delete what
:func:`doomed` returns, so the memory and SQL stores cannot drift apart.

The run's stream log goes with them (:func:`stream_floors`): an entry is
written by a superstep running from some checkpoint, after that checkpoint
was created and before the next. So a run that lost checkpoints keeps only
the entries written since its oldest kept top-level checkpoint was created:
the streams of supersteps still running or that a kept checkpoint follows
from stay; those whose starting checkpoint prune removed go (for a finished
run whose history is pruned down to its head, all but its last entry, which
always stays so that the numbering goes on after it). Cancelling a run
removes no rows, its stream log included.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["Scanned", "anchor_of", "doomed", "stream_floors"]

T = TypeVar("T")  # a creation time: a datetime, or microseconds in SQL
Key = tuple[str, str]  # (run_id, checkpoint_id) or (run_id, thread)


@dataclass(frozen=True, slots=True)
class Scanned:
    """One checkpoint as prune sees it."""

    run_id: str
    thread: str
    id: str
    old: bool
    """Created before ``older_than`` (always true without it)."""
    completed: bool
    """Its status is ``completed``."""
    parked: tuple[str, ...] = ()
    """The anchors of the tasks parked at it: their rows are recorded there."""


def stream_floors(top: Mapping[Key, T], gone: Iterable[Scanned]) -> dict[str, T]:
    """For each run that lost checkpoints, the time its stream log is trimmed before.

    ``top`` maps ``(run_id, checkpoint_id)`` of every scanned top-level
    checkpoint to its creation time; the floor is the oldest kept one's.
    """
    removed = {(c.run_id, c.id) for c in gone}
    runs = {run for run, _ in removed}
    floors: dict[str, T] = {}
    for (run, cid), created in top.items():
        if run in runs and (run, cid) not in removed and (
                run not in floors or created < floors[run]):  # type: ignore[operator]
            floors[run] = created
    return floors


def anchor_of(thread: str) -> str:
    """The anchor checkpoint id of a sub-thread ``"<anchor>/<node>"``.

    Checkpoint ids hold no ``/``; node ids may.
    """
    return thread.partition("/")[0]


def doomed(threads: Mapping[Key, Sequence[Scanned]], open_at: Iterable[Key],
           keep_last: int | None) -> list[Scanned]:
    """The checkpoints to remove.

    ``threads`` maps ``(run_id, thread)`` to the thread's checkpoints, oldest
    first; ``open_at`` names the checkpoints of open requests.
    """
    where = {(c.run_id, c.id): c.thread for chain in threads.values() for c in chain}
    needed = _needed(threads, open_at, where)
    removed: set[Key] = set()
    for (run, _thread), chain in threads.items():
        older = chain[:-keep_last] if keep_last else chain[:-1]
        removed |= {(run, c.id) for c in older if c.old and (run, c.id) not in needed}
    # a kept checkpoint's parked tasks find their requests and steps at their anchors
    needed |= {(c.run_id, a) for chain in threads.values() for c in chain
               if (c.run_id, c.id) not in removed for a in c.parked}
    removed -= needed
    # A sub-workflow's checkpoints hang from their anchor and go with it: without
    # it they could be neither forked nor inspected from the parent.
    hanging = [(run, thread, chain) for (run, thread), chain in threads.items() if thread]
    grew = True
    while grew:  # one pass per nesting level
        grew = False
        for run, thread, chain in hanging:
            anchor = (run, anchor_of(thread))
            if anchor in removed or anchor not in where:
                more = {(run, c.id) for c in chain} - removed - needed
                removed |= more
                grew = grew or bool(more)
    return [c for chain in threads.values() for c in chain if (c.run_id, c.id) in removed]


def _needed(threads: Mapping[Key, Sequence[Scanned]], open_at: Iterable[Key],
            where: Mapping[Key, str]) -> set[Key]:
    """What prune must keep, and every anchor above it.

    Run heads, open requests' checkpoints and the heads of sub-workflows not
    completed.
    """
    todo = [key for key in open_at if key in where]
    for (run, thread), chain in threads.items():
        if chain and (thread == "" or not chain[-1].completed):
            todo.append((run, chain[-1].id))
    needed: set[Key] = set()
    while todo:
        key = todo.pop()
        if key in needed:
            continue
        needed.add(key)
        if thread := where.get(key, ""):
            todo.append((key[0], anchor_of(thread)))
    return needed
