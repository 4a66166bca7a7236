"""Where a resumed run continues: its head, or a new head when sub-workflows are in flight.

Every checkpoint id a run reports stands for the whole run at that moment,
nested state included. A superstep that pauses inside a sub-workflow keeps
its top-level checkpoint while the sub-workflow's own thread (anchored at
that checkpoint's id) records its progress, so continuing it in place would
change what the reported id shows. A resumed superstep that continues
sub-workflows in flight therefore first moves onto a new top-level
checkpoint: same superstep, values and next tasks; each nested thread
(at any depth) copied whole under it; and, in the same commit, what every
paused superstep recorded (requests and their answers, task writes, step
results) moved onto the copies (``Carry``). The old id keeps the nested
state as it was when it was reported; the run goes on under the new one.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ..model._clock import utcnow
from ..model._graph import Workflow
from ..model._ids import new_checkpoint_id
from ..model._records import RunStatus
from ..model._task_id import TaskId
from ..store._protocols import (
    Carry,
    CheckpointMeta,
    CheckpointWrite,
    CommitParts,
    ParkedRow,
    RunUpdate,
)
from ._preflight import preflight
from ._state import ThreadState, self_contained

if TYPE_CHECKING:
    from ..store._protocols import CheckpointStore
    from ._loop import ThreadRunner

__all__ = ["Copies", "carry_parked", "copy_threads", "resume_point"]

Copies = list[tuple[CheckpointWrite, Carry]]


async def resume_point(runner: ThreadRunner, st: ThreadState, *, checked: bool) -> ThreadState:
    """The state a resumed top-level thread continues from (``st``, or its continuation).

    Unless ``checked`` (the caller already did), everything the superstep
    will read is decoded first, so damage stops the run before this writes.
    """
    if not checked:
        await preflight(runner, st)
    new_id = new_checkpoint_id()
    copies: Copies = []
    await copy_threads(runner.rc.store, runner.wf, st.meta, st.tasks, new_id, copies)
    if not copies:
        return st
    parked = await carry_parked(runner.rc.store, runner.wf, st.meta, new_id, copies)
    meta = dataclasses.replace(
        st.meta, id=new_id, parent_id=st.meta.id, seq=st.meta.seq + 1, created_at=utcnow(),
        status=RunStatus.RUNNING, source="resume", nodes=(), error=None, size=0, parked=parked)
    await runner.rc.commit(CommitParts(
        checkpoint=CheckpointWrite(meta, {}, {}), extends=st.meta.id, carry=Carry(st.meta.id),
        nested=copies, run=RunUpdate(RunStatus.RUNNING, head_checkpoint_id=new_id)))
    runner.rc.preloaded.clear()  # the copies are read by the tasks that continue them
    runner.rc.emit("checkpoint_saved", runner.namespace, meta.superstep, checkpoint_id=new_id,
                   nodes=[], size=0)
    return ThreadState(meta=meta, values=st.values, histories=st.histories,
                       value_bytes=st.value_bytes)


async def carry_parked(store: CheckpointStore, wf: Workflow, meta: CheckpointMeta, anchor: str,
                       out: Copies) -> tuple[ParkedRow, ...]:
    """``meta``'s parked list once what is recorded at ``meta`` moves onto ``anchor``.

    A parked task anchored at ``meta`` itself (a fork's first checkpoint
    anchors the tasks it brings along) has its rows there: the ``Carry``
    moves them, so the task is anchored at ``anchor`` too, and a parked
    sub-workflow's thread is copied under it (added to ``out``).
    """
    moved = tuple(TaskId.parse(p.task) for p in meta.parked if p.anchor == meta.id)
    if not moved:
        return meta.parked
    await copy_threads(store, wf, meta, moved, anchor, out)
    return tuple(dataclasses.replace(p, anchor=anchor) if p.anchor == meta.id else p
                 for p in meta.parked)


async def copy_threads(store: CheckpointStore, wf: Workflow, meta: CheckpointMeta,
                        tasks: tuple[TaskId, ...], anchor: str, out: Copies) -> None:
    """Copy the heads of the sub-workflow threads ``meta``'s tasks run in under ``anchor``.

    Each copy takes over what its original's superstep in progress recorded,
    and the threads nested in it are copied under the copy, at any depth.
    """
    for task in tasks:
        spec = wf.nodes.get(task.node)
        if spec is None or spec.subworkflow is None:
            continue
        head = await store.thread_head(meta.run_id, f"{meta.id}/{task}")
        if head is None:
            continue
        loaded = await store.load_checkpoint(meta.run_id, head.id)
        write = self_contained(loaded, meta.run_id, f"{anchor}/{task}", carried=True,
                               source="resume")
        # the copy continues its namespace's history: its parent is the head it copies
        write = dataclasses.replace(write, meta=dataclasses.replace(write.meta, nodes=(),
                                                                    parent_id=head.id))
        at = len(out)
        out.append((write, Carry(head.id)))
        inner = tuple(map(TaskId.parse, head.next_tasks))
        await copy_threads(store, spec.subworkflow.workflow, head, inner, write.meta.id, out)
        # tasks parked at the head itself (a fork's copy anchors them there) move with
        # its rows, which the Carry takes onto the copy
        parked = await carry_parked(store, spec.subworkflow.workflow, head, write.meta.id, out)
        if parked != head.parked:
            meta = dataclasses.replace(write.meta, parked=parked)
            out[at] = (dataclasses.replace(write, meta=meta), out[at][1])
