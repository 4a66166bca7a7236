"""What every thread of one run execution shares: the store, the lease, the event sink.

Every write an execution makes goes through its :class:`RunContext`, and
each is checked first against the lease: a lost lease, or one whose local
deadline (:class:`~durable_flow.engine._ownership.LeaseClock`) passed,
raises ``LeaseLostError`` and stops the run's tasks instead of writing.
What the run's nodes publish is buffered in its :class:`StreamBuffer` and
stored before each superstep commit; its :class:`Spending` keeps the run's
usage and budget.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..errors import LeaseLostError
from ..model._clock import utcnow
from ..model._records import Event, EventKind, RunStatus
from ..store._protocols import (
    CheckpointStore,
    Commit,
    CommitParts,
    Lease,
    RequestRow,
    StepRow,
    TaskWrite,
)
from ._budget import Spending
from ._ownership import LOCAL_EXPIRY, LeaseClock
from ._streamlog import StreamBuffer
from ._task import TaskFence
from ._uses import Gate

if TYPE_CHECKING:
    from ._state import ThreadState

__all__ = ["RunContext"]


class RunContext:
    """What every thread of one run execution shares: store, lease, event sink."""

    def __init__(self, store: CheckpointStore, lease: Lease, workflow_name: str,
                 emit: Callable[[Event], None] | None, *, clock: LeaseClock | None = None) -> None:
        self.store = store
        self.lease = lease
        self.run_id = lease.run_id
        self.workflow_name = workflow_name
        self._emit = emit
        self.stream_log = StreamBuffer(store, lease.run_id, lease.epoch)
        self.spending = Spending(store, lease)  # the run's usage and budget, read on first use
        self.fence = TaskFence()  # the run's tasks, stopped at once if the lease is lost
        # the lease's local deadline: past it nothing is written and no step starts
        self.clock = clock
        # set just before the commit that frees the lease (the run waits, ends or
        # fails): renewals stop, and one that fails after it is no loss
        self.releasing = False
        # a worker that stops: no superstep starts after the one in flight
        self.stopping = False
        # sub-workflow heads read by ``preflight``, by thread, until their task continues them
        self.preloaded: dict[str, ThreadState] = {}
        # grants of named limits for nodes with ``uses=`` (a worker's; None: no limits)
        self.limits: Gate | None = None
        # requests answerable while the run runs (``RequestRow.parked``) that this execution
        # saw open and has not yet given to a task: one answered meanwhile queues the run
        # when it is next saved ``waiting`` (``Commit.parked_on``), so it is never stranded
        self.watched: set[str] = set()

    @classmethod
    def reading(cls, store: CheckpointStore, run_id: str, workflow_name: str) -> RunContext:
        """A context that only reads the run: it holds no lease (epoch 0), so it may write nothing."""
        return cls(store, Lease(run_id, "", 0, utcnow()), workflow_name, None)

    def watch(self, rows: Sequence[RequestRow]) -> None:
        """Remember the open requests among ``rows`` that may be answered while the run runs."""
        self.watched.update(r.id for r in rows if r.parked and r.answer is None)

    def taken(self, rows: Iterable[RequestRow]) -> None:
        """These recorded answers were given to a task: no reason to queue the run any more."""
        self.watched.difference_update(r.id for r in rows)

    def guard(self) -> None:
        """Raise ``LeaseLostError`` (stopping the run's tasks) if the lease is lost or past due."""
        self.fence.check()
        if self.clock is not None and self.clock.expired():
            self.fence.lose(LeaseLostError(
                self.run_id, self.lease.epoch, LOCAL_EXPIRY))
            self.fence.check()

    def emit(self, kind: EventKind, namespace: str, superstep: int, node: str | None = None,
             **data: Any) -> None:
        """Send an event to the stream, if one listens."""
        if self._emit is None:
            return  # run()/resume(): nobody reads events, so none are built
        self._emit(Event(kind=kind, run_id=self.run_id, namespace=namespace,
                         superstep=superstep, node=node, ts=utcnow(), data=data))

    async def put_step(self, row: StepRow) -> None:
        """Record a ``ctx.step`` result under the run's lease."""
        self.guard()
        await self.store.put_step(self.lease, row)

    async def put_task_writes(self, writes: Sequence[TaskWrite]) -> None:
        """Save finished tasks' writes under the run's lease."""
        self.guard()
        await self.store.put_task_writes(self.lease, writes)

    async def wait_event(self, wait: RequestRow) -> RequestRow:
        """Record an event wait under the run's lease (a kept event is taken at once)."""
        self.guard()
        return await self.store.wait_event(self.lease, wait)

    async def answer_by_policy(self, row: RequestRow, principal: str) -> RequestRow:
        """Record a request a policy answered, and its decision, under the run's lease."""
        self.guard()
        return await self.store.answer_by_policy(self.lease, row, principal)

    async def commit(self, parts: CommitParts) -> None:
        """Commit ``parts`` under the run's lease, after what the superstep streamed is stored.

        Nothing is sent past the lease's local deadline (checked again after the flush).
        """
        # the flusher's batch in flight too (it holds the lock): flush waits for it
        if self.stream_log.pending or self.stream_log.lock.locked():
            self.guard()
            await self.stream_log.flush()
        self.guard()
        update = parts.run
        if update is not None and update.release:
            self.releasing = True
        self.watch(parts.requests)
        if update is not None and update.status is RunStatus.WAITING and self.watched:
            parts = replace(parts, parked_on=(*parts.parked_on, *sorted(self.watched)))
        await self.store.commit(Commit.of(self.lease, parts))
