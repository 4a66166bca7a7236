"""The superstep loop: runs one thread of checkpoints until it stops.

One superstep: the due tasks run concurrently on one frozen snapshot
(``_runner.py``); a task that finishes while siblings still run has its
write saved at once; when all are done their updates merge through the
reducers in node-id order and routing picks the next tasks (``_algo.py``,
pure); one ``Commit`` writes the new checkpoint (``_checkpoints.py``: changed
value channels, appended log items, node histories, next tasks, join
buffers) and moves the head. A task that pauses for input or fails stops
the merge: the finished siblings' writes and the new requests are committed
instead, and the thread is ``waiting`` or ``failed``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import (
    CheckpointCorruptedError,
    CheckpointNotFoundError,
    LeaseLostError,
    StoreError,
    SubworkflowError,
    SuperstepLimitError,
)
from ..model._graph import NodeSpec, Workflow
from ..model._messages import Message
from ..model._records import CheckpointSource, ErrorInfo, RunStatus
from ..model._routing import Routed
from ..model._task_id import TaskId
from ..store._approval_rows import DecisionDraft
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
from ._algo import apply_writes, next_tasks, refers_to_messages
from ._checkpoints import Place, first_write, next_meta, next_rows
from ._context import Interrupt
from ._lazy import load_head, resolved
from ._ownership import HandBack
from ._parked import Barrier, Parking, barrier, idle, stopped_at, take
from ._recorded import recorded_work
from ._resume import resume_point
from ._run import RunContext
from ._runner import TaskRunner, qualified
from ._state import LogGrowth, ThreadState, decode_checkpoint, input_values
from ._task import TaskResult

__all__ = ["RunContext", "ThreadOutcome", "ThreadRunner"]


@dataclass
class ThreadOutcome:
    """Where a thread stopped."""

    status: RunStatus
    state: ThreadState
    error: ErrorInfo | None = None
    exception: BaseException | None = None
    requests: list[RequestRow] = field(default_factory=list)


class ThreadRunner:
    """Runs the supersteps of one thread (the top level or a sub-workflow).

    The loop: it reads and commits checkpoints; its tasks run in a
    :class:`TaskRunner`, and the merge and the routing are pure functions
    (``_algo.py``) over what they wrote.
    """

    def __init__(self, rc: RunContext, workflow: Workflow, *, thread: str = "",
                 namespace: str = "", request_prefix: str = "",
                 max_supersteps: int | None = None) -> None:
        self.rc = rc
        self.wf = workflow
        self.schema = workflow.schema
        self.thread = thread
        self.namespace = namespace
        self.prefix = request_prefix
        self.top = thread == ""
        self.max_supersteps = max_supersteps or workflow.max_supersteps
        self.place = Place(rc.run_id, thread, namespace)
        self.tasks = TaskRunner(rc, workflow, thread=thread, namespace=namespace,
                                request_prefix=request_prefix, run_child=self._run_child)
        # histories refer to the messages log when it is one (``_histories``)
        self._history_refs = refers_to_messages(self.schema)
        self._fresh: str | None = None  # the checkpoint first_checkpoint made: nothing recorded
        self.parks = workflow.waits == "branch"  # waiting tasks park (``_parked``)
        self._anchors: dict[TaskId, ParkedRow] = {}  # parked tasks running again this superstep

    def qualify(self, node: str) -> str:
        """The node's path from the top-level workflow."""
        return qualified(self.namespace, node)

    # checkpoints ------------------------------------------------------------
    def first_checkpoint(
        self, values: dict[str, Any], routed: Routed, *, source: CheckpointSource = "input",
        superstep: int = 0, histories: dict[str, list[Message]] | None = None,
    ) -> tuple[CheckpointWrite, ThreadState]:
        """A complete checkpoint (every channel written) starting this thread."""
        write, state = first_write(self.place, self.schema, values, routed, source=source,
                                   superstep=superstep, histories=histories)
        self._fresh = write.meta.id
        return write, state

    def checked(self, checkpoint_id: str) -> None:
        """The caller already read and checked what the first superstep from here uses."""
        self._fresh = checkpoint_id

    async def load(self, checkpoint_id: str) -> ThreadState:
        """Load one of this run's checkpoints (a head the store points at) as a typed state."""
        try:
            loaded = await self.rc.store.load_checkpoint(self.rc.run_id, checkpoint_id)
        except CheckpointNotFoundError:
            raise CheckpointCorruptedError(
                self.rc.run_id, checkpoint_id or "-",
                "the checkpoint the run points at is missing") from None
        return await load_head(loaded, self.schema, decode_checkpoint)  # type: ignore[no-any-return]

    # the loop ---------------------------------------------------------------
    async def run(self, state: ThreadState, *, new: bool = False) -> ThreadOutcome:
        """Run supersteps from ``state`` until the thread completes, waits or fails.

        ``new``: ``state`` is the first checkpoint of a run this lease just
        created, so nothing is recorded against it (nothing to read back).
        """
        resumed = not new
        while True:
            if (stopped := stopped_at(state.meta, resumed)) is not None:
                return ThreadOutcome(stopped, state)
            if self.top and self.rc.stopping:
                raise HandBack
            if state.meta.superstep >= self.max_supersteps:
                return await self._fail(state, SuperstepLimitError(self.max_supersteps), None, [])
            if resumed and self.top:  # checked, and moved off the id it was reported at
                self.rc.watch(await self.rc.store.get_requests(self.rc.run_id, open_only=True))
                state = await resume_point(self, state, checked=state.meta.id == self._fresh)
            step = await self._superstep(state, resumed)
            resumed = False
            if isinstance(step, ThreadOutcome):
                return step
            state = step

    async def _superstep(self, st: ThreadState, resumed: bool) -> ThreadState | ThreadOutcome:
        step = st.meta.superstep + 1
        parking = await take(self, st) if st.meta.parked else Parking()
        st = parking.base or st  # parked sub-workflows taken again moved onto a new head
        if not (tasks := parking.due(st.tasks)):  # a node's parked task goes first
            return await idle(self, st, parking)
        self._anchors = parking.ready
        self.rc.emit("superstep_started", self.namespace, step, tasks=list(map(str, tasks)))
        saved: dict[TaskId, TaskResult] = {}
        answered: dict[TaskId, dict[int, RequestRow]] = {}
        blocked: set[TaskId] = set()
        if resumed:
            saved, answered, blocked = await recorded_work(self, st, step)
        answered |= parking.answered  # a parked task's rows, recorded at its anchor
        todo = [n for n in tasks if n not in saved and n not in blocked]
        snapshot = st.node_view(self.schema)
        results, saved_now = await self.tasks.run(todo, st, step, snapshot, answered, resumed,
                                                  self._anchors)
        finished = [r for r in results if r.kind == "done"]
        unsaved = [r for r in finished if r.node not in saved_now]
        failures = [r for r in results if r.kind == "failed"]
        new_requests = [q for r in results if r.kind == "interrupted" for q in r.requests]
        reopen = [rid for r in results for rid in r.reopen]
        if failures:
            first = min(failures, key=lambda r: r.node)
            return await self._fail(st, first.error or RuntimeError("failed"), first.node,
                                    unsaved, new_requests, reopen)
        stopped = [r for r in results if r.kind == "interrupted"]
        if not self.parks and (new_requests or blocked or stopped):
            return await self._wait(st, unsaved, new_requests, reopen)
        try:
            if self.parks:  # the waiting tasks park; the rest merge and route on
                return await barrier(self, st, step, [*saved.values(), *finished], stopped,
                                     blocked, parking)
            return await self.merge(st, step, [*saved.values(), *finished])
        except LeaseLostError:
            raise
        except Exception as exc:  # a conflict or a routing error fails the run
            if isinstance(exc, StoreError) and exc.unavailable:  # unreachable: a crash
                raise
            return await self._fail(st, exc, None, unsaved, [])

    # sub-workflows ------------------------------------------------------------
    def child_runner(self, spec: NodeSpec, st: ThreadState, step: int,
                     task: TaskId | None = None) -> ThreadRunner:
        """The runner of the thread sub-workflow node ``spec`` runs in from ``st``.

        ``task`` names the instance (``review[2]``) when a ``Send`` started it.
        """
        sub = spec.subworkflow
        if sub is None:
            raise TypeError(f"node {spec.id!r} is not a sub-workflow")
        task = task or TaskId(spec.id)
        at = self._anchors.get(task)  # a parked sub-workflow: its thread is where it first ran
        base_id, step = (at.anchor, at.superstep) if at is not None else (st.meta.id, step)
        child = ThreadRunner(
            self.rc, sub.workflow, thread=f"{base_id}/{task}",
            namespace=self.qualify(str(task)), request_prefix=f"{self.prefix}{task}@{step}/")
        child.tasks.marks = child.parks or self.tasks.marks
        return child

    async def _run_child(self, spec: NodeSpec, view: Any, st: ThreadState, step: int,
                         task: TaskId, arg: Any) -> Any:
        sub = spec.subworkflow
        if sub is None:
            raise TypeError(f"node {spec.id!r} is not a sub-workflow")
        child = self.child_runner(spec, st, step, task)
        head = await self.rc.store.thread_head(self.rc.run_id, child.thread)
        if head is None:
            data = {inner: getattr(view, outer, None) for inner, outer in sub.inputs.items()}
            data.update(arg or {})  # an instance's arg goes over the inputs mapping
            values = input_values(child.schema, data)
            from ..model._routing import route_entry

            write, state = child.first_checkpoint(values, route_entry(sub.workflow,
                                                                      child.schema.build(values)))
            await self.rc.commit(CommitParts(checkpoint=write))
        else:
            preloaded = self.rc.preloaded.pop(child.thread, None)
            state = preloaded if preloaded is not None else await child.load(head.id)
        outcome = await child.run(state)
        if outcome.status is RunStatus.WAITING:
            raise Interrupt([])
        if outcome.status is RunStatus.FAILED:
            err = outcome.error
            if err is None:  # pragma: no cover - a failed outcome always carries its error
                err = ErrorInfo(type="Error", message="failed", node=child.namespace)
            raised = SubworkflowError(err.node or child.namespace, err.type, err.message,
                                      err.traceback)
            self.rc.emit("subworkflow_failed", self.namespace, step, self.qualify(str(task)),
                         path=raised.path, error_type=raised.error_type,
                         message=raised.error_message)
            raise raised
        return {outer: resolved(outcome.state.values[inner]) for outer, inner in sub.outputs.items()}

    # outcomes -----------------------------------------------------------------
    async def merge(self, st: ThreadState, step: int, writes: list[TaskResult],
                    park: Barrier | None = None) -> ThreadState:
        """Merge finished tasks' writes through the reducers, route, commit the next checkpoint."""
        writes.sort(key=lambda r: r.node)
        values = dict(st.values)
        histories = dict(st.histories)
        grown = LogGrowth()
        try:
            changed, appended = apply_writes(self.schema, writes, values, histories, grown,
                                             history_refs=self._history_refs)
            routed = next_tasks(self.wf, self.schema.build(values), writes, st.meta.joins,
                                held=park.held if park else frozenset())
            routed = park.carried(routed, self.wf.name) if park else routed
            return await self.commit_state(st, step, values, histories, changed, appended,
                                           routed, tuple(str(r.node) for r in writes), park=park)
        except BaseException:
            grown.undo()  # the old head's logs are as they were: nothing was committed
            raise

    async def commit_state(
        self, st: ThreadState, step: int, values: dict[str, Any],
        histories: dict[str, list[Message]], changed: dict[str, bytes | None],
        appended: dict[str, list[bytes]], routed: Routed, nodes: tuple[str, ...],
        source: CheckpointSource = "loop", *, pause: bool = False, park: Barrier | None = None,
        decisions: Sequence[DecisionDraft] = (),
        keep_requests: bool = False, parked_on: tuple[str, ...] = (),
    ) -> ThreadState:
        """Write the next checkpoint of this thread and move its head.

        ``pause`` (used by ``update_state``) leaves a run that still has tasks
        or parked tasks ``waiting`` without a lease; the open requests of the
        old head move onto the new one (``keep_requests``: their tasks are
        still next) or are dropped in the same transaction. Parked tasks'
        requests stay at their anchors either way. ``park`` (a parking
        thread's barrier) gives the parked tasks, the waits they opened and
        the status; ``parked_on`` (without it) names the parked tasks' open
        requests, so an answer recorded meanwhile queues the run.
        """
        base = st.meta
        rows = next_rows(st, values, histories, changed, appended)
        status = RunStatus.RUNNING if routed.next_tasks else RunStatus.COMPLETED
        if pause and (routed.next_tasks or base.parked):
            status = RunStatus.WAITING
        if park is not None:
            status = await park.status(bool(routed.next_tasks))
        meta = next_meta(self.place, base, rows, routed, superstep=step, status=status,
                         source=source, nodes=nodes,
                         parked=park.parked if park is not None else base.parked)
        run = None
        if self.top:
            run = RunUpdate(status=status, head_checkpoint_id=meta.id,
                            release=status is not RunStatus.RUNNING)
        keep = pause and keep_requests
        write = CheckpointWrite(meta, rows.values, rows.appends)
        parts = park.commit_parts() if park is not None else CommitParts(parked_on=parked_on)
        await self.rc.commit(replace(
            parts, checkpoint=write, run=run,
            drop_open_requests=pause and not keep and not self.parks,
            carry=Carry(base.id) if keep else None, extends=self._extends(base),
            decisions=decisions))
        self.rc.emit("checkpoint_saved", self.namespace, step, checkpoint_id=meta.id,
                     nodes=list(nodes), size=meta.size)
        return ThreadState(meta=meta, values=values, histories=histories,
                           value_bytes=rows.value_bytes)

    def _extends(self, base: CheckpointMeta) -> str | None:
        """The run head a top-level commit builds on (the store refuses it if it moved)."""
        return base.id if self.top else None

    async def _wait(self, st: ThreadState, unsaved: list[TaskResult],
                    requests: list[RequestRow], reopen: list[str]) -> ThreadOutcome:
        run = RunUpdate(status=RunStatus.WAITING, release=True) if self.top else None
        await self.rc.commit(CommitParts(
            extends=self._extends(st.meta),
            mark=StatusMark(st.meta.id, RunStatus.WAITING), reopen=reopen,
            task_writes=[self.tasks.task_write(st, r) for r in unsaved], requests=requests,
            run=run))
        return ThreadOutcome(RunStatus.WAITING, st, requests=requests)

    async def _fail(self, st: ThreadState, exc: BaseException, node: TaskId | None,
                    unsaved: list[TaskResult], requests: list[RequestRow] | None = None,
                    reopen: list[str] | None = None) -> ThreadOutcome:
        qual = self.qualify(str(node)) if node else (self.namespace or None)
        if isinstance(exc, SubworkflowError):
            # the run's error names the inner exception itself, where it was raised
            err = ErrorInfo(type=exc.error_type, message=exc.error_message, node=exc.path,
                            traceback=exc.inner_traceback)
        else:
            err = ErrorInfo.from_exception(exc, qual)
        # on_failure="pause": the run is dead-lettered, paused with its error, not failed
        status = RunStatus.PAUSED if self.wf.on_failure == "pause" else RunStatus.FAILED
        run = RunUpdate(status=status, error=err, release=True) if self.top else None
        await self.rc.commit(CommitParts(
            extends=self._extends(st.meta),
            mark=StatusMark(st.meta.id, RunStatus.FAILED, err),
            task_writes=[self.tasks.task_write(st, r) for r in unsaved],
            requests=requests or [], reopen=reopen or [], run=run))
        return ThreadOutcome(RunStatus.FAILED, st, error=err, exception=exc)

