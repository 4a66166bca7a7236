"""Executing a claimed run: the task that runs it, its events, its lease and its result.

Every execution (``run``, ``resume``, ``fork``) starts here only after the
store granted it the run's lease in one transaction (``create_run`` or
``claim``); this module never takes a lease itself. Before the claim,
``Executor.prepare`` reads and checks what the run goes on from, with no
lease. It runs the engine (``continue_run``) in a task, forwards events,
keeps the lease alive, turns the outcome into a ``RunResult`` and frees the
lease however the execution stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import Any

from .._logs import get_logger, is_configured
from ..engine import (
    LOCAL_EXPIRY,
    Gate,
    HandBack,
    LeaseClock,
    Prepared,
    RunContext,
    RunReader,
    ThreadOutcome,
    continue_run,
)
from ..errors import LeaseLostError, RunNotFoundError
from ..model._clock import utcnow
from ..model._graph import Workflow
from ..model._records import Event, EventKind, RunResult, RunStatus
from ..store._approval_rows import DecisionDraft
from ..store._protocols import CheckpointStore, Lease, RunRecord
from ._inspect import asks, to_pending
from ._lease import keep_lease
from ._signals import signals_for
from .observability._observer import RunObserver

__all__ = ["Executor", "final_event"]

_log = get_logger()

_FINAL_KIND: dict[RunStatus, EventKind] = {
    RunStatus.COMPLETED: "run_completed", RunStatus.WAITING: "run_waiting",
    RunStatus.FAILED: "run_failed", RunStatus.CANCELLED: "run_cancelled",
    RunStatus.PAUSED: "run_paused",
}


def final_event(run_id: str, result: RunResult, superstep: int = 0) -> Event:
    """The last event of a stream: it carries the ``RunResult``."""
    kind = _FINAL_KIND.get(result.status, "run_waiting")
    return Event(kind=kind, run_id=run_id, namespace="", superstep=superstep, node=None,
                 ts=utcnow(), data={"status": result.status.value,
                                    "checkpoint_id": result.checkpoint_id}, result=result)


class Executor:
    """Runs claimed executions of runs for one ``Runtime`` or ``Worker``."""

    def __init__(self, store: CheckpointStore, lease_ttl: float, *,
                 requeue_on_abort: bool = False) -> None:
        self.store = store
        self.lease_ttl = lease_ttl
        # a worker that stops gives unfinished runs back to the queue
        self.requeue_on_abort = requeue_on_abort
        self.active: dict[str, asyncio.Task[Any]] = {}
        self.contexts: dict[str, RunContext] = {}
        # runs being cancelled here, with the decision that records it (None: none)
        self.cancelling: dict[str, DecisionDraft | None] = {}
        # set by hand_back(): executions start no new superstep and give their runs back
        self.stopping = False
        # a worker's grants of named limits, for nodes with ``uses=``
        self.limits: Gate | None = None

    def hand_back(self) -> None:
        """Ask every execution to stop after its superstep in flight and give its run back.

        Executions started afterwards give their run back before their first
        superstep.
        """
        self.stopping = True
        for rc in self.contexts.values():
            rc.stopping = True

    def is_active(self, run_id: str) -> bool:
        """True while this runtime executes the run."""
        task = self.active.get(run_id)
        return task is not None and not task.done()

    async def cancel(self, run_id: str, decision: DecisionDraft | None = None) -> bool:
        """Cancel the run's execution in this runtime and wait for it; False if there is none.

        ``decision`` is recorded with the cancellation.
        """
        task = self.active.get(run_id)
        if task is None or task.done():
            return False
        self.cancelling[run_id] = decision
        try:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        finally:
            self.cancelling.pop(run_id, None)
        return True

    async def prepare(self, workflow: Workflow, record: RunRecord) -> Prepared:
        """Read and check, without a lease, what the run's next superstep continues.

        The claim that follows names the head read here, so it is refused if
        the run moved on meanwhile; damaged data raises having changed nothing.
        """
        prepared = await RunReader(self.store, workflow).prepare(record)
        for row in await self.store.get_requests(record.run_id, open_only=True):
            to_pending(row)  # the result lists them: a damaged one must stop us now
        return prepared

    async def execute(self, workflow: Workflow, lease: Lease, prepared: Prepared, *,
                      events: bool, sent_at: float | None = None,
                      started: Mapping[str, Any] | None = None,
                      answered: Sequence[str] = ()) -> AsyncIterator[Event]:
        """Run ``prepared`` on under ``lease``; yield its events, the last one with the result.

        ``sent_at`` is the ``time.monotonic()`` reading taken just before the
        claim (or creation) that granted the lease was sent: the lease's local
        deadline counts from it (from now, when not given). ``started`` and
        ``answered``: see ``continue_run``.
        """
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        # every event is logged and traced; a stream also gets it
        observer = RunObserver(lease, workflow.name, queue.put_nowait if events else None)
        clock = LeaseClock(self.lease_ttl, time.monotonic() if sent_at is None else sent_at)
        # an execution nobody logs, traces or streams builds no events at all
        rc = RunContext(self.store, lease, workflow.name,
                        observer.emit if observer.listening else None, clock=clock)
        rc.stopping = self.stopping
        rc.limits = self.limits
        body = partial(continue_run, rc, workflow, prepared, started=started, answered=answered)
        task = asyncio.create_task(self._guarded(rc, workflow, body))
        self.active[lease.run_id] = task
        self.contexts[lease.run_id] = rc
        renew = asyncio.create_task(self._renew(rc))
        task.add_done_callback(lambda _t: queue.put_nowait(None))
        final: Event | None = None
        try:
            while (event := await queue.get()) is not None:
                yield event
            final = task.result()
            yield final
        finally:
            renew.cancel()
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
            if self.active.get(lease.run_id) is task:
                del self.active[lease.run_id]
                del self.contexts[lease.run_id]
            observer.finish(final, _stopped_by(task) if final is None else None)

    async def _guarded(self, rc: RunContext, workflow: Workflow,
                       body: Callable[[], Awaitable[ThreadOutcome]]) -> Event:
        try:
            outcome = await body()
        except asyncio.CancelledError:
            if rc.run_id not in self.cancelling:
                # the caller went away (a timeout, an abandoned stream, shutdown):
                # stop like a crash, but free the lease so the run resumes at once
                await self.release(rc.lease)
                raise
            await self.store.cancel_run(rc.run_id, self.cancelling[rc.run_id])
            return final_event(rc.run_id, await self.result(workflow, rc.run_id))
        except HandBack:
            await self.release(rc.lease, requeue=True)
            if is_configured():
                _log.info("run_given_back", run_id=rc.run_id, epoch=rc.lease.epoch)
            return final_event(rc.run_id, await self.result(workflow, rc.run_id))
        except LeaseLostError as exc:
            if exc.reason == LOCAL_EXPIRY:
                # nobody may hold it yet: free it so that someone takes over at once
                await self.release(rc.lease)
                raise
            record = await self.store.get_run(rc.run_id)
            if record is not None and record.status is RunStatus.CANCELLED:
                return final_event(rc.run_id, await self.result(workflow, rc.run_id))
            raise
        except BaseException:
            # a store error or a corrupt checkpoint: stop, but do not keep others out
            await self.release(rc.lease)
            raise
        result = await self.result(workflow, rc.run_id, outcome)
        if result.status is RunStatus.QUEUED:
            signals_for(self.store).wake()  # an event came while it ran: a worker goes on
        return final_event(rc.run_id, result, outcome.state.meta.superstep)

    async def release(self, lease: Lease, *, requeue: bool | None = None) -> None:
        """Free the lease if it is still ours; never waits past a third of the lease."""
        requeue = self.requeue_on_abort if requeue is None else requeue
        with contextlib.suppress(Exception):
            async with asyncio.timeout(self.lease_ttl / 3):
                await self.store.release_lease(lease, requeue=requeue)
            if is_configured():
                _log.debug("lease_released", run_id=lease.run_id, epoch=lease.epoch,
                           requeued=requeue)

    async def _renew(self, rc: RunContext) -> None:
        await keep_lease(self.store, rc, self.lease_ttl, rc.fence.lose)

    async def result(self, workflow: Workflow, run_id: str,
                     outcome: ThreadOutcome | None = None) -> RunResult:
        """The run's current result (its head state, status, open requests, error)."""
        record = await self.store.get_run(run_id)
        if record is None:
            raise RunNotFoundError(run_id)
        if outcome is not None:
            state = outcome.state
        else:
            state = await RunReader(self.store, workflow).head(run_id,
                                                               record.head_checkpoint_id or "")
        open_rows = await self.store.get_requests(run_id, open_only=True)
        return RunResult(
            run_id=run_id, status=record.status, state=state.blackboard(workflow.schema),
            pending_requests=tuple(to_pending(r) for r in asks(open_rows)),
            checkpoint_id=record.head_checkpoint_id or state.meta.id, error=record.error)


def _stopped_by(task: asyncio.Task[Any]) -> BaseException | None:
    """Why an execution ended without a result: its error, or a cancellation."""
    if task.cancelled():
        return asyncio.CancelledError()
    return task.exception() if task.done() else None
