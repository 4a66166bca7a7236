"""The task runner: one superstep's due tasks of a thread, run concurrently.

Each task gets its own ``NodeContext`` per attempt, with what its earlier
executions recorded (answers, step results); its ``RetryPolicy`` and
timeout apply around the attempts. A task that finishes while siblings
still run has its write saved at once (a task write), so after a crash it
is not run again. A lost lease cancels every task at once. What the tasks
return (done, interrupted, failed) goes back to the loop (``_loop.py``),
which merges and commits; a sub-workflow node's thread is run by the loop
too, through the ``run_child`` it hands in.
"""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

from .._logs import get_logger
from ..errors import CheckpointCorruptedError, LeaseLostError, StoreError
from ..model._clock import utcnow
from ..model._graph import NodeSpec, Workflow
from ..model._retry import cancelled_from_outside
from ..model._task_id import TaskId
from ..store._protocols import ParkedRow, RequestRow, TaskWrite
from ._context import Interrupt, TaskIO
from ._instances import gates, run_gated, task_arg
from ._parked import parked_meta
from ._recorded import open_now
from ._run import RunContext
from ._state import ThreadState
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

__all__ = ["RunChild", "TaskRunner", "qualified"]

_log = get_logger()

#: Runs a sub-workflow node's thread: ``(spec, view, state, superstep, task, arg)`` -> outputs.
RunChild = Callable[[NodeSpec, Any, ThreadState, int, TaskId, Any], Awaitable[Any]]


def qualified(namespace: str, node: str) -> str:
    """A node's path from the top-level workflow, given its thread's namespace."""
    return f"{namespace}.{node}" if namespace else node


class TaskRunner:
    """Runs the tasks of one thread's supersteps: attempts, retries, timeouts, cancellation.

    ``marks``: this thread or one above it parks waiting tasks, so the
    requests its tasks open are answerable while the run goes on.
    """

    def __init__(self, rc: RunContext, workflow: Workflow, *, thread: str, namespace: str,
                 request_prefix: str, run_child: RunChild) -> None:
        self.rc = rc
        self.wf = workflow
        self.thread = thread
        self.namespace = namespace
        self.prefix = request_prefix
        self.run_child = run_child
        self.parks = self.marks = workflow.waits == "branch"
        self._takes_ctx = {nid: spec.takes_ctx for nid, spec in workflow.nodes.items()}

    async def run(
        self, todo: Sequence[TaskId], st: ThreadState, step: int, snapshot: Any,
        answered: dict[TaskId, dict[int, RequestRow]], resumed: bool,
        anchors: dict[TaskId, ParkedRow],
    ) -> tuple[list[TaskResult], set[TaskId]]:
        """Run tasks concurrently; save each finished write while siblings still run.

        Returns the results and the nodes whose writes were saved on the way.
        ``anchors``: the parked tasks running again (their rows stay where
        they first ran). A lost lease (seen by the renewal or by any write of
        the run) cancels every task at once; they are awaited and
        ``LeaseLostError`` is raised.
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
            self._run_task, n, st, step, snapshot, answered.get(n, {}), resumed, anchors.get(n))))
            for n in todo}
        for task in pending:
            fence.track(task)
        results: list[TaskResult] = []

        async def flush() -> None:
            while queue:
                batch = list(queue)
                queue.clear()
                try:
                    await self.rc.put_task_writes([self.task_write(st, r) for r in batch])
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

    def task_write(self, st: ThreadState, r: TaskResult) -> TaskWrite:
        """The row saving finished task ``r``'s write against ``st``'s checkpoint."""
        return TaskWrite(run_id=self.rc.run_id, checkpoint_id=st.meta.id, node=str(r.node),
                         data=r.to_bytes(), created_at=utcnow())

    async def _task_io(self, qual: str, st: ThreadState, answered: dict[int, RequestRow],
                       resumed: bool, at: ParkedRow | None) -> TaskIO:
        """The task's durable records: its answers, and its step results when it ran before."""
        self.rc.taken(answered.values())
        base_id = at.anchor if at is not None else st.meta.id
        steps = await self.rc.store.get_steps(self.rc.run_id, base_id, qual) \
            if resumed or at is not None else {}
        for old in (at.names[1:] if at is not None else ()):  # recorded before a rename
            steps = await self.rc.store.get_steps(
                self.rc.run_id, base_id, qualified(self.namespace, old)) | steps
        return TaskIO(run=self.rc, checkpoint_id=base_id, thread=self.thread,
                      request_prefix=self.prefix, namespace=self.namespace, answered=answered,
                      steps=steps, origin=at.superstep if at is not None else None,
                      parks=self.marks)

    async def _run_task(
        self, node: TaskId, st: ThreadState, step: int, snapshot: Any,
        answered: dict[int, RequestRow], resumed: bool, at: ParkedRow | None,
    ) -> TaskResult:
        """One task, its attempts under its ``RetryPolicy``; ``at``: it is a parked task."""
        spec = self.wf.nodes[node.node]
        qual = qualified(self.namespace, str(node))
        log = _log.bind(run_id=self.rc.run_id, node=qual, superstep=step)
        self.rc.emit("node_started", self.namespace, step, qual)
        io = await self._task_io(qual, st, answered, resumed, at)
        view = spec.view(snapshot) if spec.view is not None else snapshot
        arg = task_arg(st.meta if at is None else parked_meta(st.meta, at), spec, node)
        holder: list[Any] = []

        async def attempt() -> Any:
            ctx = make_context(io, qual, step, st.histories.get(str(node), []), log, arg)
            holder[:] = [ctx]
            sub = (lambda: self.run_child(spec, view, st, step, node, arg)) \
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
            result = normalize(node, spec, self.wf.schema, out, holder[0])
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


def _traceback(exc: BaseException) -> str:
    """The exception's traceback as text, for logs and traces of a failed attempt."""
    return "".join(traceback.format_exception(exc))
