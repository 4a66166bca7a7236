"""The superstep engine: runs one thread of checkpoints until it stops.

One superstep: the due tasks run concurrently on one frozen snapshot; a task
that finishes while siblings still run has its write saved at once; when all
are done their updates merge through the reducers in node-id order; routing
picks the next tasks; one ``Commit`` writes the new checkpoint (changed value
channels, appended log items, node histories, next tasks, join buffers) and
moves the head. A task that pauses for input or fails stops the merge: the
finished siblings' writes and the new requests are committed instead, and the
thread is ``waiting`` or ``failed``.
"""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from .._logs import get_logger
from ..errors import (
    CheckpointCorruptedError,
    CheckpointNotFoundError,
    ConflictingUpdateError,
    LeaseLostError,
    StoreError,
    SubworkflowError,
    SuperstepLimitError,
)
from ..model._clock import utcnow
from ..model._frozen import freeze
from ..model._graph import NodeSpec, Workflow
from ..model._ids import new_checkpoint_id
from ..model._messages import Message
from ..model._records import CheckpointSource, ErrorInfo, RunStatus
from ..model._retry import cancelled_from_outside
from ..model._routing import Completed, Routed, route
from ..model._task_id import TaskId
from ..store._approval_rows import DecisionDraft
from ..store._protocols import (
    Carry,
    CheckpointMeta,
    CheckpointWrite,
    ParkedRow,
    RequestRow,
    RunUpdate,
    StatusMark,
    TaskWrite,
)
from ..store._segments import join_arrays
from ._context import Interrupt, TaskIO
from ._histories import MESSAGES, history_chunk
from ._instances import gates, run_gated, task_arg
from ._lazy import first_digests, load_head, next_digests, resolved
from ._ownership import HandBack
from ._parked import (
    Barrier,
    Parking,
    barrier,
    idle,
    parked_meta,
    stopped_at,
    take,
)
from ._recorded import open_now, recorded_work
from ._resume import resume_point
from ._run import RunContext
from ._state import (
    LogGrowth,
    ThreadState,
    decode_checkpoint,
    encode_field,
    history_channel,
    input_values,
    log_channels,
    stored_tasks,
)
from ._task import (
    TaskResult,
    call_node,
    failed,
    interrupted,
    make_context,
    normalize,
    stop_tasks,
    task_outcome,
)

__all__ = ["RunContext", "ThreadOutcome", "ThreadRunner"]

_log = get_logger()


@dataclass
class ThreadOutcome:
    """Where a thread stopped."""

    status: RunStatus
    state: ThreadState
    error: ErrorInfo | None = None
    exception: BaseException | None = None
    requests: list[RequestRow] = field(default_factory=list)


class ThreadRunner:
    """Runs the supersteps of one thread (the top level or a sub-workflow)."""

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
        self._takes_ctx = {nid: spec.takes_ctx for nid, spec in workflow.nodes.items()}
        # histories refer to the messages log when it is one (``_histories``)
        self._history_refs = MESSAGES in self.schema.fields and self.schema.fields[MESSAGES].is_log
        self._fresh: str | None = None  # the checkpoint first_checkpoint made: nothing recorded
        self.parks = self.marks = workflow.waits == "branch"  # waiting tasks park (``_parked``)
        # marks: this thread or one above parks, so its requests are answerable while it runs
        self._anchors: dict[TaskId, ParkedRow] = {}  # parked tasks running again this superstep

    def qualify(self, node: str) -> str:
        """The node's path from the top-level workflow."""
        return f"{self.namespace}.{node}" if self.namespace else node

    # checkpoints ------------------------------------------------------------
    def first_checkpoint(
        self, values: dict[str, Any], routed: Routed, *, source: CheckpointSource = "input",
        superstep: int = 0, histories: dict[str, list[Message]] | None = None,
    ) -> tuple[CheckpointWrite, ThreadState]:
        """A complete checkpoint (every channel written) starting this thread."""
        histories = histories or {}
        vals: dict[str, bytes] = {}
        appends: dict[str, bytes] = {}
        lengths: dict[str, int] = {}
        for name, value in values.items():
            spec = self.schema.fields.get(name)
            data = encode_field("<input>", name, value)
            if spec is not None and spec.is_log:
                appends[name], lengths[name] = data, len(value)
            else:
                vals[name] = data
        for node, msgs in histories.items():
            appends[history_channel(node)] = encode_field(node, "history", msgs)
            lengths[history_channel(node)] = len(msgs)
        status = RunStatus.RUNNING if routed.next_tasks else RunStatus.COMPLETED
        tasks, args = stored_tasks(routed.next_tasks, routed.args)
        meta = CheckpointMeta(
            id=new_checkpoint_id(), run_id=self.rc.run_id, thread=self.thread,
            namespace=self.namespace, parent_id=None, seq=0, superstep=superstep,
            created_at=utcnow(), status=status, source=source, routing_reason=routed.reason,
            next_tasks=tasks, joins=routed.joins, task_args=args,
            value_versions=dict.fromkeys(vals, 0), log_lengths=lengths,
            size=sum(map(len, vals.values())) + sum(map(len, appends.values())),
            digests=first_digests(vals, appends))
        state = ThreadState(meta=meta, values=dict(values), histories=dict(histories),
                            value_bytes=vals)
        self._fresh = meta.id
        return CheckpointWrite(meta=meta, values=vals, appends=appends), state

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
        results, saved_now = await self._run_tasks(todo, st, step, snapshot, answered, resumed)
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

    async def _run_tasks(
        self, todo: Sequence[TaskId], st: ThreadState, step: int, snapshot: Any,
        answered: dict[TaskId, dict[int, RequestRow]], resumed: bool,
    ) -> tuple[list[TaskResult], set[TaskId]]:
        """Run tasks concurrently; save each finished write while siblings still run.

        Returns the results and the nodes whose writes were saved on the way.
        A lost lease (seen by the renewal or by any write of the run) cancels
        every task at once; they are awaited and ``LeaseLostError`` is raised.
        """
        fence = self.rc.fence
        fence.check()
        saved_now: set[TaskId] = set()
        if not todo:
            return [], saved_now
        queue: list[TaskResult] = []
        flusher: asyncio.Task[None] | None = None
        gate = gates(self.wf, todo)  # nodes with max_concurrency: their instances take turns
        pending = {asyncio.create_task(run_gated(gate, n, partial(
            self._run_task, n, st, step, snapshot, answered.get(n, {}), resumed))) for n in todo}
        for task in pending:
            fence.track(task)
        results: list[TaskResult] = []

        async def flush() -> None:
            while queue:
                batch = list(queue)
                queue.clear()
                try:
                    await self.rc.put_task_writes([self._task_write(st, r) for r in batch])
                except LeaseLostError as exc:
                    fence.lose(exc)
                    raise
                saved_now.update(r.node for r in batch)

        try:
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for fut in done:
                    res = task_outcome(fut, fence)
                    results.append(res)
                    if res.kind == "done" and pending:
                        queue.append(res)
                        if flusher is None or flusher.done():
                            flusher = asyncio.create_task(flush())
            if flusher is not None:
                await flusher
        finally:
            await stop_tasks(pending, flusher)
        fence.check()  # a node that swallowed the lost lease does not get its result committed
        return results, saved_now

    def _task_write(self, st: ThreadState, r: TaskResult) -> TaskWrite:
        return TaskWrite(run_id=self.rc.run_id, checkpoint_id=st.meta.id, node=str(r.node),
                         data=r.to_bytes(), created_at=utcnow())

    async def _run_task(
        self, node: TaskId, st: ThreadState, step: int, snapshot: Any,
        answered: dict[int, RequestRow], resumed: bool,
    ) -> TaskResult:
        spec = self.wf.nodes[node.node]
        qual = self.qualify(str(node))
        log = _log.bind(run_id=self.rc.run_id, node=qual, superstep=step)
        self.rc.emit("node_started", self.namespace, step, qual)
        at = self._anchors.get(node)  # a parked task: its rows stay where it first ran
        self.rc.taken(answered.values())
        base_id = at.anchor if at is not None else st.meta.id
        steps = await self.rc.store.get_steps(self.rc.run_id, base_id, qual) \
            if resumed or at is not None else {}
        for old in (at.names[1:] if at is not None else ()):  # recorded before a rename
            steps = await self.rc.store.get_steps(self.rc.run_id, base_id, self.qualify(old)) \
                | steps
        io = TaskIO(run=self.rc, checkpoint_id=base_id, thread=self.thread,
                    request_prefix=self.prefix, namespace=self.namespace, answered=answered,
                    steps=steps, origin=at.superstep if at is not None else None,
                    parks=self.marks)
        view = spec.view(snapshot) if spec.view is not None else snapshot
        arg = task_arg(st.meta if at is None else parked_meta(st.meta, at), spec, node)
        holder: list[Any] = []

        async def attempt() -> Any:
            ctx = make_context(io, qual, step, st.histories.get(str(node), []), log, arg)
            holder[:] = [ctx]
            sub = (lambda: self._run_child(spec, view, st, step, node, arg)) \
                if spec.kind == "subworkflow" else None
            coro = call_node(spec, self._takes_ctx[spec.id], view, ctx, sub, gate=self.rc.limits,
                             run_id=self.rc.run_id)
            if spec.timeout is None:
                return await coro
            async with asyncio.timeout(spec.timeout):
                return await coro

        async def on_retry(attempt_no: int, exc: BaseException, delay: float) -> None:
            log.warning("node_retrying", attempt=attempt_no, error=repr(exc), delay=delay)
            self.rc.emit("node_retrying", self.namespace, step, qual, attempt=attempt_no,
                         error=f"{type(exc).__name__}: {exc}", delay=delay,
                         error_type=type(exc).__name__, traceback=_traceback(exc))

        try:
            out = await (spec.retry.call(attempt, on_retry) if spec.retry else attempt())
            result = normalize(node, spec, self.schema, out, holder[0])
        except Interrupt as exc:
            if self.parks and exc.requests:
                await open_now(self.rc, exc.requests)
            return self._interrupted(node, qual, step, log, exc)
        except (LeaseLostError, CheckpointCorruptedError):
            raise  # the store's trouble, not the node's: stop the run, record nothing
        except (Exception, asyncio.CancelledError) as exc:
            if (isinstance(exc, StoreError) and exc.unavailable) or (
                    isinstance(exc, asyncio.CancelledError) and cancelled_from_outside()):
                raise  # the store unreachable, or the run stopped: a crash, not the node's
            log.error("node_failed", error=f"{type(exc).__name__}: {exc}", exc_info=exc)
            self.rc.emit("node_failed", self.namespace, step, qual,
                         error=f"{type(exc).__name__}: {exc}", error_type=type(exc).__name__,
                         traceback=_traceback(exc))
            return failed(node, exc)
        finally:
            # a step write whose fn ran lands before the outcome, and before the
            # lease is released when the run is being stopped
            await io.settle()
        self.rc.emit("node_completed", self.namespace, step, qual, keys=sorted(result.update))
        return result

    def _interrupted(self, node: TaskId, qual: str, step: int, log: Any,
                     exc: Interrupt) -> TaskResult:
        for req in exc.requests:
            if req.kind == "request":  # a timer is no question to anyone
                self.rc.emit("request_issued", self.namespace, step, qual, request_id=req.id)
        for rid, reason in exc.reopen.items():
            log.warning("answer_rejected", request_id=rid, reason=reason)
            self.rc.emit("request_issued", self.namespace, step, qual, request_id=rid,
                         rejected_answer=reason)
        return interrupted(node, exc)

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
        child.marks = child.parks or self.marks
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
            await self.rc.commit(checkpoint=write)
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
            changed, appended = self._reduce(writes, values, histories, grown)
            snapshot = self.schema.build(values)
            routed = route(self.wf, snapshot, [Completed(r.node, r.goto, r.reason, r.sends)
                                               for r in writes], st.meta.joins,
                           held=park.held if park else frozenset())
            routed = park.carried(routed, self.wf.name) if park else routed
            return await self.commit_state(st, step, values, histories, changed, appended,
                                           routed, tuple(str(r.node) for r in writes), park=park)
        except BaseException:
            grown.undo()  # the old head's logs are as they were: nothing was committed
            raise

    def _reduce(
        self, writes: list[TaskResult], values: dict[str, Any],
        histories: dict[str, list[Message]], grown: LogGrowth,
    ) -> tuple[dict[str, bytes | None], dict[str, list[bytes]]]:
        """Apply the writes in task order through the reducers, into ``values``/``histories``.

        Appends grow the thread's log buffers in place (O(items appended));
        ``grown`` remembers their lengths before, to undo them.
        """
        lww: dict[str, str] = {}
        changed: dict[str, bytes | None] = {}
        appended: dict[str, list[bytes]] = {}
        refs = self._history_refs
        for r in writes:
            start = len(values.get(MESSAGES, ())) if refs else 0  # where its messages go
            task = str(r.node)
            for name, value in r.update.items():
                spec = self.schema.field(task, name)
                if spec.is_lww:
                    if name in lww:
                        raise ConflictingUpdateError(name, [lww[name], task])
                    lww[name] = task
                    values[name] = freeze(value)
                    changed[name] = r.encoded[name]
                elif spec.is_log:
                    values[name] = grown.append(values.get(name, ()), value)
                    appended.setdefault(name, []).append(r.encoded[name])
                else:
                    values[name] = freeze(self.schema.reduce(task, name, values.get(name), value))
                    changed[name] = None
            if r.history:
                histories[task] = grown.append(histories.get(task, ()), r.history)
                appended.setdefault(history_channel(task), []).append(
                    history_chunk(r, start) if refs else r.history_bytes or b"[]")
        return changed, appended

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
        seq = base.seq + 1
        vals: dict[str, bytes] = {}
        value_bytes = dict(st.value_bytes)
        for name, data in changed.items():
            data = data if data is not None else encode_field("<merge>", name, values[name])
            if value_bytes.get(name) != data:
                vals[name] = value_bytes[name] = data
        stored = log_channels(base)  # a log a migration rewrote has a channel of its own
        appends = {stored.get(ch, ch): join_arrays(chunks) for ch, chunks in appended.items()}
        lengths = dict(base.log_lengths)
        for ch in appended:
            node = ch.removeprefix("history:") if ch.startswith("history:") else None
            lengths[stored.get(ch, ch)] = len(histories[node] if node is not None else values[ch])
        status = RunStatus.RUNNING if routed.next_tasks else RunStatus.COMPLETED
        if pause and (routed.next_tasks or base.parked):
            status = RunStatus.WAITING
        if park is not None:
            status = await park.status(bool(routed.next_tasks))
        tasks, args = stored_tasks(routed.next_tasks, routed.args)
        meta = CheckpointMeta(
            id=new_checkpoint_id(), run_id=self.rc.run_id, thread=self.thread,
            namespace=self.namespace, parent_id=base.id, seq=seq, superstep=step,
            created_at=utcnow(), status=status, source=source, nodes=nodes,
            routing_reason=routed.reason, next_tasks=tasks, joins=routed.joins,
            value_versions={**base.value_versions, **dict.fromkeys(vals, seq)},
            log_lengths=lengths, task_args=args,
            parked=park.parked if park is not None else base.parked,
            size=sum(map(len, vals.values())) + sum(map(len, appends.values()))
            + sum(map(len, args.values())),
            digests=next_digests(base, vals, appends, set(lengths) - set(base.log_lengths)))
        run = None
        if self.top:
            run = RunUpdate(status=status, head_checkpoint_id=meta.id,
                            release=status is not RunStatus.RUNNING)
        keep = pause and keep_requests
        await self.rc.commit(checkpoint=CheckpointWrite(meta, vals, appends), run=run,
                             drop_open_requests=pause and not keep and not self.parks,
                             carry=Carry(base.id) if keep else None,
                             extends=self._extends(base), decisions=decisions,
                             **(park.commit_parts() if park is not None
                                else {"parked_on": parked_on}))
        self.rc.emit("checkpoint_saved", self.namespace, step, checkpoint_id=meta.id,
                     nodes=list(nodes), size=meta.size)
        return ThreadState(meta=meta, values=values, histories=histories, value_bytes=value_bytes)

    def _extends(self, base: CheckpointMeta) -> str | None:
        """The run head a top-level commit builds on (the store refuses it if it moved)."""
        return base.id if self.top else None

    async def _wait(self, st: ThreadState, unsaved: list[TaskResult],
                    requests: list[RequestRow], reopen: list[str]) -> ThreadOutcome:
        run = RunUpdate(status=RunStatus.WAITING, release=True) if self.top else None
        await self.rc.commit(
            extends=self._extends(st.meta),
            mark=StatusMark(st.meta.id, RunStatus.WAITING), reopen=reopen,
            task_writes=[self._task_write(st, r) for r in unsaved], requests=requests, run=run)
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
        await self.rc.commit(
            extends=self._extends(st.meta),
            mark=StatusMark(st.meta.id, RunStatus.FAILED, err),
            task_writes=[self._task_write(st, r) for r in unsaved],
            requests=requests or [], reopen=reopen or [], run=run)
        return ThreadOutcome(RunStatus.FAILED, st, error=err, exception=exc)


def _traceback(exc: BaseException) -> str:
    """The exception's traceback as text, for logs and traces of a failed attempt."""
    return "".join(traceback.format_exception(exc))
