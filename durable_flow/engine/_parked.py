"""Parked tasks (``waits="branch"``): a task that waits lets the other branches go on.

A task that stops on ``ctx.request``, ``ctx.sleep`` or ``ctx.wait_event`` in
a thread that parks is not a reason to stop the barrier: its siblings' writes
merge and route on, and the task is recorded in the new checkpoint's
``parked`` list (a ``ParkedRow``) and in every later one until it finishes.
Each parked task keeps its *anchor*, the checkpoint it first ran from: its
request rows, step results and sub-workflow thread stay recorded there and
its request ids name the superstep it first ran in, so a re-run on a later
base still finds its earlier answers and records the next wait afresh.

At the start of every superstep (:func:`take`) the executor reads the run's
open waits: due deadlines and timers, and events kept while the run ran, are
settled under the lease (what a claim does), and a parked task none of whose
waits is open any more runs again in this superstep, from the top, on this
superstep's snapshot; its update merges at this barrier. A fan-in fed by a
node with a parked task waits for it (``route(..., held=...)``). The
thread is ``waiting`` only when nothing but parked tasks is left
(:class:`Barrier`): then the commit names the requests it saw open
(``Commit.parked_on``) so an answer recorded in between queues the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ..model._clock import utcnow
from ..model._ids import new_checkpoint_id
from ..model._records import RunStatus
from ..model._task_id import TaskId
from ..store._protocols import (
    Carry,
    CheckpointMeta,
    CheckpointWrite,
    CommitParts,
    ParkedRow,
    RequestRow,
    RunUpdate,
    StatusMark,
)
from ._resume import Copies, carry_parked, copy_threads
from ._task import TaskResult

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from ..model._routing import Routed
    from ._loop import ThreadOutcome, ThreadRunner
    from ._state import ThreadState

__all__ = ["Barrier", "Parking", "barrier", "idle", "inner_ready", "parked_meta",
           "parked_open_ids",
           "parked_row", "ready_parked", "stopped_at", "take"]


@dataclass
class Parking:
    """The parked tasks of a superstep's base: which run again now, which wait on."""

    ready: dict[TaskId, ParkedRow] = field(default_factory=dict)
    answered: dict[TaskId, dict[int, RequestRow]] = field(default_factory=dict)
    waiting: list[ParkedRow] = field(default_factory=list)
    open_ids: tuple[str, ...] = ()
    # routed tasks of a node whose task of the same id is parked: they wait their turn
    deferred: tuple[TaskId, ...] = ()
    # the new checkpoint the superstep runs from when parked sub-workflows moved onto it
    base: ThreadState | None = None

    def due(self, tasks: Sequence[TaskId]) -> list[TaskId]:
        """What this superstep runs: the routed tasks, then the parked tasks taken again.

        A routed task whose id is parked (waiting, or taken again now) waits
        until that parked task finished: it stays a next task (``deferred``,
        carried by the barrier) and runs in a superstep after it.
        """
        parked = {*self.ready, *(TaskId.parse(p.task) for p in self.waiting)}
        self.deferred = tuple(t for t in tasks if t in parked)
        return [*(t for t in tasks if t not in parked), *self.ready]


@dataclass
class Barrier:
    """What a parking thread's commit adds: the parked list, new waits, the status rule."""

    parked: tuple[ParkedRow, ...] = ()
    requests: Sequence[RequestRow] = ()
    reopen: Sequence[str] = ()
    open_ids: tuple[str, ...] = ()
    # the tasks parked before this barrier, and where to look for their answers
    before: tuple[ParkedRow, ...] = ()
    runner: ThreadRunner | None = None
    base: ThreadState | None = None
    deferred: tuple[TaskId, ...] = ()
    # the run reached an exit: these open waits of the parked tasks are withdrawn
    withdraw: tuple[str, ...] = ()

    def carried(self, routed: Routed, workflow: str) -> Routed:
        """``routed`` with the deferred tasks kept as next tasks (with their ``Send`` args).

        A node routed to again while its task waits runs after it. New
        ``Send`` instances of a node with instances parked or deferred start
        beside them: they are numbered after the indexes those hold, so no
        two tasks of the run share an id (``workflow`` names the workflow).
        """
        taken: dict[str, set[int]] = {}
        for t in (*self.deferred, *(TaskId.parse(p.task) for p in self.parked)):
            if t.index is not None:
                taken.setdefault(t.node, set()).add(t.index)
        tasks: list[TaskId] = []
        args: dict[TaskId, bytes] = {}
        for t in routed.next_tasks:
            new = t
            if t.index is not None and t.node in taken:
                used = taken[t.node]
                new = TaskId(t.node, max(used) + 1)
                used.add(max(used) + 1)
            if t in routed.args:
                args[new] = routed.args[t]
            tasks.append(new)
        routed = replace(routed, next_tasks=tuple(tasks), args=args)
        if not self.deferred:
            return routed
        stored = self.base.meta.task_args if self.base is not None else {}
        for t in self.deferred:
            if str(t) in stored:
                args[t] = stored[str(t)]
        tasks = [*self.deferred, *(t for t in routed.next_tasks if t not in self.deferred)]
        return replace(routed, next_tasks=tuple(tasks), args=args)

    @property
    def held(self) -> frozenset[str]:
        """Nodes with a parked task: a fan-in they feed waits for them."""
        return frozenset(TaskId.parse(p.task).node for p in self.parked)

    def commit_parts(self) -> CommitParts:
        """What the barrier's commit writes besides the checkpoint."""
        return CommitParts(requests=self.requests, reopen=self.reopen, parked_on=self.open_ids,
                           withdraw=self.withdraw)

    async def status(self, has_next: bool) -> RunStatus:
        """``running`` while anything can run, ``waiting`` when only parked tasks are left.

        With nothing else due, the tasks parked before this barrier are looked
        at again: an answer that came while it ran keeps the run going. The
        tasks parking now have just opened their waits: none is answered yet.
        """
        if has_next:
            return RunStatus.RUNNING
        if not self.parked:
            return RunStatus.COMPLETED
        if self.before and self.runner is not None and self.base is not None:
            again = await take(self.runner, _with_parked(self.base, self.before), fresh=True)
            if again.ready:
                return RunStatus.RUNNING
            self.open_ids = again.open_ids + self.open_ids
        return RunStatus.WAITING


def stopped_at(meta: CheckpointMeta, resumed: bool) -> RunStatus | None:
    """Where a thread stands at ``meta`` when no superstep follows: completed, or waiting.

    A thread with only parked tasks left that was just saved ``waiting`` stops;
    resumed from such a checkpoint, it looks for answers first.
    """
    if meta.next_tasks:
        return None
    if not meta.parked:
        return RunStatus.COMPLETED
    return RunStatus.WAITING if meta.status is RunStatus.WAITING and not resumed else None


async def take(runner: ThreadRunner, st: ThreadState, *, fresh: bool = False) -> Parking:
    """Settle the parked tasks' due waits and kept events; split them into ready and waiting.

    A parked task is ready once none of its waits is open. While other tasks
    are due, it is taken only if its last wait closed before ``st`` was
    committed (the superstep *after* its answer came): a superstep run again
    after a crash then takes exactly the parked tasks it took the first time.
    ``fresh``: any closed wait counts (is there work at all?).
    """
    if not st.meta.parked:
        return Parking()
    rc = runner.rc
    open_rows = await rc.store.get_requests(rc.run_id, open_only=True)
    if await _settle(runner, open_rows):
        open_rows = await rc.store.get_requests(rc.run_id, open_only=True)
    out = Parking()
    candidates = [p for p in st.meta.parked if not _open_of(runner, p, open_rows)
                  or await inner_ready(runner, TaskId.parse(p.task), p.anchor, p.superstep,
                                       open_rows)]
    closed = await _closed_rows(runner, candidates)
    ids = {p.task for p in st.meta.parked}  # a routed task of a parked one's id waits for it
    cutoff = None if fresh or all(str(t) in ids for t in st.tasks) else st.meta.created_at
    for p in st.meta.parked:
        rows = closed.get(p.task)
        last = max((r.answered_at for r in rows or () if r.answered_at is not None), default=None)
        if rows is None or (cutoff is not None and last is not None and last > cutoff):
            out.waiting.append(p)
        else:
            out.ready[TaskId.parse(p.task)] = p
    out.open_ids = tuple(r.id for p in out.waiting for r in _open_of(runner, p, open_rows)
                         if r.kind == "request")
    for task, p in out.ready.items():
        if runner.wf.nodes[task.node].subworkflow is None:
            out.answered[task] = {r.index: r for r in closed[p.task]}
    if not fresh:
        out.base = await _reanchor(runner, st, out.ready)
    return out


async def _reanchor(runner: ThreadRunner, st: ThreadState,
                    ready: dict[TaskId, ParkedRow]) -> ThreadState | None:
    """Move the parked sub-workflows taken again onto a new checkpoint of this thread.

    Every checkpoint id stands for the whole run as it was: a parked
    sub-workflow's thread under its old anchor is what the checkpoints since
    then show (``get_state``, ``fork``), so it must not change. Like
    ``resume_point``, one commit writes a new checkpoint (same superstep,
    values and next tasks; the moved tasks anchored at it), copies each moved
    thread's head under it (nested threads too, with what its superstep in
    progress recorded: ``Carry``) and moves the head; the superstep runs
    from it. A superstep run again after a crash starts from that head.
    """
    rc, base = runner.rc, st.meta
    new_id = new_checkpoint_id()
    copies: Copies = []
    moved: set[str] = set()
    for task, p in ready.items():
        if runner.wf.nodes[task.node].subworkflow is None or p.anchor == base.id:
            continue
        before = len(copies)
        await copy_threads(rc.store, runner.wf, replace(base, id=p.anchor), (task,), new_id,
                           copies)
        if len(copies) > before:
            moved.add(p.task)
    if not moved:
        return None
    parked = await carry_parked(rc.store, runner.wf, base, new_id, copies)  # anchored at base
    parked = tuple(replace(p, anchor=new_id) if p.task in moved else p for p in parked)
    for task, p in ready.items():
        ready[task] = next(q for q in parked if q.task == p.task)
    meta = replace(
        base, id=new_id, parent_id=base.id, seq=base.seq + 1, created_at=utcnow(),
        status=RunStatus.RUNNING, source="resume", nodes=(), error=None, size=0, parked=parked)
    run = RunUpdate(RunStatus.RUNNING, head_checkpoint_id=new_id) if runner.top else None
    await rc.commit(CommitParts(checkpoint=CheckpointWrite(meta, {}, {}), carry=Carry(base.id),
                                extends=base.id if runner.top else None, nested=copies, run=run))
    rc.preloaded.clear()  # the copies are read by the tasks that continue them
    rc.emit("checkpoint_saved", runner.namespace, meta.superstep, checkpoint_id=new_id,
            nodes=[], size=0)
    return _with_parked(st, meta.parked, meta)


async def _closed_rows(runner: ThreadRunner,
                       parked: Sequence[ParkedRow]) -> dict[str, list[RequestRow]]:
    """The recorded waits of parked tasks none of whose waits is open, by task."""
    rc = runner.rc
    out: dict[str, list[RequestRow]] = {p.task: [] for p in parked}
    plain = [p for p in parked if runner.wf.nodes[TaskId.parse(p.task).node].subworkflow is None]
    for anchor in sorted({p.anchor for p in plain}):
        rows = await rc.store.get_requests(rc.run_id, checkpoint_id=anchor)
        for p in plain:
            if p.anchor == anchor:
                out[p.task] += _of(runner, p, rows)
    if len(plain) < len(parked):  # sub-workflows: the waits inside them, anywhere in the run
        rows = await rc.store.get_requests(rc.run_id)
        for p in parked:
            if p not in plain:
                out[p.task] += _of(runner, p, rows)
    return out


async def _settle(runner: ThreadRunner, open_rows: Sequence[RequestRow]) -> bool:
    """Close due waits and deliver kept events (only when there is something to do)."""
    rc, now = runner.rc, utcnow()
    due = any(r.expires_at is not None and r.expires_at <= now for r in open_rows)
    if not due and any(r.kind == "event" for r in open_rows):
        due = any(m.request_id is None for m in await rc.store.get_mail(rc.run_id))
    if not due:
        return False
    rc.guard()
    return await rc.store.settle(rc.lease)


async def inner_ready(runner: ThreadRunner, task: TaskId, anchor: str, superstep: int,
                      open_rows: Sequence[RequestRow]) -> bool:
    """Whether sub-workflow task ``task`` (run from ``anchor``) can go on although waits are open.

    It can when a task parked inside it (at any depth) has no open wait left:
    that inner branch runs again while the others go on waiting. ``superstep``
    is the one the task's request ids name.
    """
    spec = runner.wf.nodes.get(task.node)
    sub = spec.subworkflow if spec is not None else None
    if sub is None:
        return False
    rc = runner.rc
    head = await rc.store.thread_head(rc.run_id, f"{anchor}/{task}")
    if head is None:
        return False
    child = type(runner)(rc, sub.workflow, thread=f"{anchor}/{task}",
                         namespace=runner.qualify(str(task)),
                         request_prefix=f"{runner.prefix}{task}@{superstep}/")
    for q in head.parked:
        if not _of(child, q, open_rows) or await inner_ready(
                child, TaskId.parse(q.task), q.anchor, q.superstep, open_rows):
            return True
    parked = {q.task for q in head.parked}
    for name in head.next_tasks:
        if name not in parked and await inner_ready(child, TaskId.parse(name), head.id,
                                                    head.superstep + 1, open_rows):
            return True
    return False


def _open_of(runner: ThreadRunner, p: ParkedRow, rows: Iterable[RequestRow]) -> list[RequestRow]:
    """The open waits of parked task ``p`` among the open ``rows``."""
    return _of(runner, p, rows)


def _of(runner: ThreadRunner, p: ParkedRow, rows: Iterable[RequestRow]) -> list[RequestRow]:
    """The waits of parked task ``p`` among ``rows`` (inside it, for a sub-workflow node)."""
    task = TaskId.parse(p.task)
    spec = runner.wf.nodes.get(task.node)
    if spec is not None and spec.subworkflow is not None:
        inside = f"{runner.prefix}{task}@{p.superstep}/"
        return [r for r in rows if r.id.startswith(inside)]
    quals = {runner.qualify(name) for name in p.names}
    return [r for r in rows if r.checkpoint_id == p.anchor and r.node in quals]


async def parked_open_ids(runner: ThreadRunner, meta: CheckpointMeta) -> tuple[str, ...]:
    """The ids of the open requests ``meta``'s parked tasks wait for (people's, not timers)."""
    if not meta.parked:
        return ()
    rows = await runner.rc.store.get_requests(runner.rc.run_id, open_only=True)
    return tuple(r.id for p in meta.parked for r in _of(runner, p, rows) if r.kind == "request")


async def ready_parked(runner: ThreadRunner, meta: CheckpointMeta) -> list[str]:
    """``meta``'s parked tasks none of whose waits is open any more (they can run again)."""
    if not meta.parked:
        return []
    rows = await runner.rc.store.get_requests(runner.rc.run_id, open_only=True)
    return [p.task for p in meta.parked if not _of(runner, p, rows)]


def parked_row(st: ThreadState, step: int, task: TaskId,
               ready: dict[TaskId, ParkedRow]) -> ParkedRow:
    """The record of ``task`` parking now: its anchor kept if it was parked before."""
    before = ready.get(task)
    if before is not None:
        return before
    return ParkedRow(task=str(task), anchor=st.meta.id, superstep=step,
                     arg=st.args.get(task))


async def barrier(
    runner: ThreadRunner, st: ThreadState, step: int, writes: list[TaskResult],
    stopped: Sequence[TaskResult], blocked: Iterable[TaskId], parking: Parking,
) -> ThreadState | ThreadOutcome:
    """A parking thread's barrier: merge what finished, park what waits, commit.

    A finished task that is an exit ends the thread: nothing is parked, and
    every open wait of the tasks that were or would be parked is withdrawn.
    """
    newly = [parked_row(st, step, r.node, parking.ready) for r in stopped]
    newly += [parked_row(st, step, t, parking.ready) for t in blocked]
    parked = tuple(sorted([*parking.waiting, *newly], key=lambda p: TaskId.parse(p.task)))
    requests = [replace(q, parked=True) for r in stopped for q in r.requests]
    reopen = [rid for r in stopped for rid in r.reopen]
    if any(w.node.node in runner.wf.exits for w in writes):
        rc = runner.rc
        open_rows = await rc.store.get_requests(rc.run_id, open_only=True)
        gone = [r.id for p in parked for r in _of(runner, p, open_rows)]
        gone += [q.id for q in requests] + reopen
        park = Barrier(requests=requests, withdraw=tuple(dict.fromkeys(gone)), base=st)
        return await runner.merge(st, step, writes, park)
    if parking.waiting:  # events kept and times come while this superstep ran: settled now,
        # before this barrier's checkpoint, so the next superstep takes those tasks
        rc = runner.rc
        await _settle(runner, await rc.store.get_requests(rc.run_id, open_only=True))
    park = Barrier(parked=parked, requests=requests, reopen=reopen,
                   open_ids=tuple(q.id for q in requests), before=tuple(parking.waiting),
                   runner=runner, base=st, deferred=parking.deferred)
    return await runner.merge(st, step, writes, park)


def parked_meta(meta: CheckpointMeta, p: ParkedRow) -> CheckpointMeta:
    """``meta`` with the parked task's ``Send`` argument, as its first base held it."""
    return replace(meta, task_args={p.task: p.arg} if p.arg is not None else {})


def _with_parked(st: ThreadState, parked: tuple[ParkedRow, ...],
                 meta: CheckpointMeta | None = None) -> ThreadState:
    from ._state import ThreadState

    return ThreadState(meta=replace(meta or st.meta, parked=parked), values=st.values,
                       histories=st.histories, value_bytes=st.value_bytes)


async def idle(runner: ThreadRunner, st: ThreadState, parking: Parking) -> ThreadOutcome:
    """Nothing can run: only parked tasks are left; the thread waits (the top frees its lease)."""
    from ._loop import ThreadOutcome

    if runner.top:
        await runner.rc.commit(CommitParts(
            extends=st.meta.id, mark=StatusMark(st.meta.id, RunStatus.WAITING),
            run=RunUpdate(status=RunStatus.WAITING, release=True), parked_on=parking.open_ids))
    elif st.meta.status is not RunStatus.WAITING:
        await runner.rc.commit(CommitParts(mark=StatusMark(st.meta.id, RunStatus.WAITING)))
    return ThreadOutcome(RunStatus.WAITING, st)
