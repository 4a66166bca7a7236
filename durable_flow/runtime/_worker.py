"""Worker: claims queued and abandoned runs from a shared store and executes them.

Many workers, in many processes, share one store; the store is the only
coordinator. Each claim is one transaction (``RunStore.claim_next``: priority,
then age; rows being claimed elsewhere are skipped), each claimed run is
executed under its lease exactly as ``Runtime.resume`` executes it, and the
lease is renewed while it runs. A run whose holder died is claimed again
once its lease expired. ``stop`` stops claiming, lets running supersteps
finish within the grace period, and gives what is left back to the queue.

Between claims a worker sleeps until woken: by ``submit``/``respond`` in its
own process, by a store that hears other processes (PostgreSQL ``LISTEN``),
at the earliest time the store knows something comes due (a timer, a
deadline, a backoff, a lease running out, a schedule tick), or by its poll
interval, the fallback.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import socket
import time
from collections.abc import Mapping, Sequence
from typing import Any, cast

from tenacity import AsyncRetrying, retry_if_exception_type, wait_exponential, wait_random

from .._logs import get_logger, is_configured
from ..errors import CheckpointCorruptedError, InvalidInputError, LeaseLostError, StoreError
from ..model._clock import utcnow
from ..model._graph import Workflow
from ..model._ids import new_id
from ..model._records import ErrorInfo, RunResult, RunStatus
from ..store._flow_protocols import WakeTimes
from ..store._machine import DEFAULT_MAX_START_ATTEMPTS
from ..store._protocols import CheckpointStore, Lease, RunRecord
from ._audit import check_backed
from ._execution import Executor
from ._inputs import check_lease_ttl, check_store, last_result
from ._limits import Limit, LimitGate, check_limits
from ._runs import Runs
from ._schedules import ScheduleTicker
from ._signals import Listening, signals_for
from ._versions import GraphBook, check_graph
from .notifications._notifiers import Notifier
from .notifications._outbox import outbox_for, stop_outbox

__all__ = ["Worker"]

_log = get_logger()
# seconds past a due time that a worker wakes, so the time has come when it claims
_WAKE_SLACK = 0.005


class Worker:
    """Executes runs claimed from the store, at most ``concurrency`` at once.

    Use as ``async with Worker(store, [workflow, ...]) as worker: await
    worker.serve()``; ``serve`` runs until ``stop()`` (or cancellation).
    A run is executed on the workflow object whose name and version started
    it; runs of workflows this worker does not have stay queued for another.
    A claimed run that cannot be started (its head damaged, its graph changed
    without a new version) goes back to the queue with a backoff; after
    ``max_start_attempts`` such starts it is ``failed``. With ``notifiers``
    (``WebhookNotifier``, ``SmtpNotifier``) it also delivers the store's
    notification outbox while serving (links under ``base_url``). ``limits``
    names the ``Limit``s that nodes declaring ``uses=`` take grants of; they
    hold across every worker sharing the store.
    """

    def __init__(self, store: CheckpointStore, workflows: Sequence[Workflow], *,
                 concurrency: int = 8, lease_ttl: float = 30.0, poll_interval: float = 1.0,
                 grace_period: float = 10.0, name: str | None = None,
                 max_start_attempts: int = DEFAULT_MAX_START_ATTEMPTS,
                 notifiers: Sequence[Notifier] = (), base_url: str | None = None,
                 limits: Mapping[str, Limit] | None = None) -> None:
        _check_workflows(workflows)
        checked_limits = check_limits(limits, workflows)
        for label, count in (("concurrency", concurrency),
                             ("max_start_attempts", max_start_attempts)):
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise InvalidInputError(f"{label} must be a positive int, got {count!r}")
        for label, value in (("poll_interval", poll_interval), ("grace_period", grace_period)):
            if isinstance(value, bool) or not isinstance(value, int | float) \
                    or not math.isfinite(value) or value < 0:
                raise InvalidInputError(f"{label} must be a number of seconds >= 0, got {value!r}")
        self.store = check_store(store)
        lease_ttl = check_lease_ttl(lease_ttl)
        self.name = name or f"worker:{socket.gethostname()}:{os.getpid()}:{new_id()[-6:]}"
        self.concurrency = concurrency
        self.poll_interval = float(poll_interval)
        self.grace_period = float(grace_period)
        self.max_start_attempts = max_start_attempts
        self._workflows = {(wf.name, wf.version): wf for wf in workflows}
        # a worker that stops gives unfinished runs back to the queue
        self._exec = Executor(store, lease_ttl, requeue_on_abort=True)
        #: the named limits this worker's nodes with ``uses=`` take grants of
        self.limits = checked_limits
        if checked_limits:
            self._exec.limits = LimitGate(store, checked_limits, owner=self.name, ttl=lease_ttl)
        self._tasks: dict[asyncio.Task[Any], str] = {}
        self._stopping = False
        # set while no claim is in flight: stop() waits for it, so a claim that
        # returns after stop() began is handed back before stop() returns
        self._quiet = asyncio.Event()
        self._quiet.set()
        self._serving: asyncio.Task[Any] | None = None
        self._cut_short = False  # stop() cancelled serve() to end a stalled claim
        self._next_unknown_check = 0.0
        #: (workflow name, version) of queued runs seen that this worker cannot run
        self.unknown: set[tuple[str, str]] = set()
        self.results: list[RunResult] = []
        #: starts the runs of due schedule ticks of these workflows
        self.ticker = ScheduleTicker(
            Runs(store, self._exec, GraphBook(store), owner=self.name, lease_ttl=lease_ttl),
            workflows, poll_interval=self.poll_interval)
        #: delivers the store's notification outbox while serving (when given notifiers)
        self.outbox = outbox_for(store, notifiers, base_url, poll_interval)

    async def __aenter__(self) -> Worker:
        await self.store.setup()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
        await self.store.close()

    @property
    def running(self) -> list[str]:
        """Ids of the runs this worker executes now."""
        return sorted(set(self._tasks.values()))

    async def serve(self) -> None:
        """Claim and execute runs until :meth:`stop` is called."""
        signals = signals_for(self.store)
        self._serving = asyncio.current_task()
        _log.info("worker_started", worker=self.name, concurrency=self.concurrency,
                  workflows=sorted(f"{n}@{v}" for n, v in self._workflows))
        delivering = None if self.outbox is None else asyncio.create_task(self.outbox.serve())
        try:
            if isinstance(self.store, Listening):
                await self.store.listen(signals.wake)
            woken = True  # the first look reads everything
            while not self._stopping:
                seen = signals.wakes  # a wake-up during the claim is not slept through
                await self.ticker.tick(woken=woken)  # due schedule ticks become queued runs first
                woken = False
                free = self.concurrency - len(self._tasks)
                claimed = await self._claim_or_hand_back(free) if free > 0 else []
                if self._stopping:
                    break
                for record, lease, sent in claimed:
                    self._start(record, lease, sent)
                if claimed and len(claimed) == free:
                    continue  # there may be more: claim again once a slot frees up
                if not claimed:
                    await self._note_unknown()
                woken = await signals.wait(await self._until_next_wake(), since=seen)
        except asyncio.CancelledError:
            if not self._cut_short:
                raise
            # stop() ended a claim that never returned (a stalled connection): done
            cast(asyncio.Task[Any], self._serving).uncancel()
        finally:
            await stop_outbox(self.outbox, delivering)
            if not self._stopping:  # cancelled: stop like stop() without the grace
                self._stopping = True
                self._exec.hand_back()
                await self._drain(0.0)

    async def _until_next_wake(self) -> float:
        """Seconds to sleep: until the earliest wake-up the store knows of, at most the poll.

        A timer, a deadline, a backoff, another holder's lease or a schedule
        tick coming due is claimed when it comes, not at the next poll.
        """
        if not isinstance(self.store, WakeTimes):
            return self.poll_interval
        try:
            wake = await self.store.next_wake(self.name)
        except Exception as exc:  # the poll is the fallback; the claim reports the store
            _log.debug("worker_next_wake_failed", worker=self.name, error=repr(exc))
            return self.poll_interval
        if wake is None:
            return self.poll_interval
        # a little after: the claim compares with the database's clock in microseconds
        return min(self.poll_interval, max(0.0, (wake - utcnow()).total_seconds()) + _WAKE_SLACK)

    async def _claim_or_hand_back(self, limit: int) -> list[tuple[RunRecord, Lease, float]]:
        """One claim; what it took is handed back at once if the worker stops meanwhile.

        The claim runs in a task of its own, so that a ``serve`` cancelled while
        it is in flight still learns which runs it took and gives them back
        instead of leaving them under a lease nobody renews.
        """
        self._quiet.clear()
        claim = asyncio.create_task(self._claim(limit))
        try:
            claimed = await asyncio.shield(claim)
        except asyncio.CancelledError:
            # a claim that never returns (a stalled connection) strands its runs
            # for one lease at most: nobody renews them
            with contextlib.suppress(Exception):
                async with asyncio.timeout(self._exec.lease_ttl):
                    await self._give_back(await claim)
            self._quiet.set()
            raise
        if self._stopping:
            await self._give_back(claimed)
            claimed = []
        self._quiet.set()
        return claimed

    async def _give_back(self, claimed: Sequence[tuple[RunRecord, Lease, float]]) -> None:
        """Release runs claimed but not started: each ``queued`` again at once."""
        for record, lease, _sent in claimed:
            with contextlib.suppress(Exception):
                await self.store.release_lease(lease, requeue=True)
            _log.info("run_given_back", worker=self.name, run_id=record.run_id,
                      epoch=lease.epoch, started=False)

    async def _note_unknown(self) -> None:
        """Log, once per workflow version, queued runs this worker leaves for another.

        Looked at when the worker is idle, at most once a minute.
        """
        loop = asyncio.get_running_loop()
        if loop.time() < self._next_unknown_check:
            return
        self._next_unknown_check = loop.time() + 60.0
        for run in await self.store.list_runs(status=RunStatus.QUEUED):
            key = (run.workflow_name, run.workflow_version)
            if key not in self._workflows and key not in self.unknown:
                self.unknown.add(key)
                _log.warning("worker_unknown_workflow", worker=self.name, run_id=run.run_id,
                             workflow=run.workflow_name, version=run.workflow_version,
                             hint="left queued for a worker that has this workflow version")

    async def stop(self) -> None:
        """Stop claiming at once; hand every run back after its superstep in flight.

        A claim in flight is handed back when it returns (its runs ``queued``,
        no node started). Executions start no new superstep: the one running
        commits within ``grace_period`` and its run goes back to ``queued``.
        Runs still executing after ``grace_period`` are cancelled and given
        back the same way, their leases released.
        """
        if self._stopping and not self._tasks and self._quiet.is_set():
            return
        self._stopping = True
        self._exec.hand_back()
        signals_for(self.store).wake()
        try:
            async with asyncio.timeout(self.grace_period):
                await self._quiet.wait()
        except TimeoutError:  # a claim stuck on a stalled connection: stop waiting for it
            if self._serving is not None:
                self._cut_short = True
                self._serving.cancel()
        await self._drain(self.grace_period)
        _log.info("worker_stopped", worker=self.name)

    async def _drain(self, grace: float) -> None:
        tasks = list(self._tasks)
        if not tasks:
            return
        _done, pending = await asyncio.wait(tasks, timeout=grace)
        for task in pending:
            task.cancel()
        for task in pending:
            with contextlib.suppress(BaseException):
                await task

    async def _claim(self, limit: int) -> list[tuple[RunRecord, Lease, float]]:
        """One claim; a store that fails for a while is retried with backoff, never dropped.

        Every try of one claim carries the same token: a try whose COMMIT reply
        was lost is found again by the next, never stranded. Each run comes
        with the ``time.monotonic()`` reading taken as its claim was sent.
        """
        keys = sorted(self._workflows)
        token = new_id()
        async for attempt in AsyncRetrying(
                retry=retry_if_exception_type((StoreError, OSError)),
                wait=wait_exponential(multiplier=0.1, max=5.0) + wait_random(0, 0.1),
                before_sleep=lambda s: _log.warning(
                    "worker_claim_failed", worker=self.name, attempt=s.attempt_number,
                    error=repr(s.outcome.exception() if s.outcome else None)),
                reraise=True):
            with attempt:
                sent = time.monotonic()
                claimed = await self.store.claim_next(
                    self.name, self._exec.lease_ttl, keys, limit=limit, token=token)
                return [(record, lease, sent) for record, lease in claimed]
        return []  # pragma: no cover - AsyncRetrying either returns or raises

    def _start(self, record: RunRecord, lease: Lease, sent: float) -> None:
        workflow = self._workflows[(record.workflow_name, record.workflow_version)]
        # the same run still executing here (its lease ran out and it was claimed
        # again): the new execution waits for the old one to end, never overlaps it
        before = [t for t, rid in self._tasks.items() if rid == record.run_id]
        task = asyncio.create_task(self._after(before, workflow, record, lease, sent))
        self._tasks[task] = record.run_id
        task.add_done_callback(self._finished)

    async def _after(self, before: list[asyncio.Task[Any]], workflow: Workflow,
                     record: RunRecord, lease: Lease, sent: float) -> None:
        if before:
            await asyncio.wait(before)
        await self._execute(workflow, record, lease, sent)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.pop(task, None)
        signals_for(self.store).wake()  # a slot is free

    async def _execute(self, workflow: Workflow, record: RunRecord, lease: Lease,
                       sent: float) -> None:
        log = _log.bind(worker=self.name, run_id=record.run_id)
        try:
            # a failure here is a failed start the worker counts, never a run that half-started
            await check_graph(self.store, workflow, record)
            await check_backed(self.store, record.run_id)  # AuditError: nothing ran
            prepared = await self._exec.prepare(workflow, record)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if _passing(exc):  # the store, not the run: another worker takes over
                log.warning("run_start_interrupted", error=f"{type(exc).__name__}: {exc}")
                await self._exec.release(lease)
                return
            await self._start_failed(record, lease, exc)
            return
        log.info("run_claimed", epoch=lease.epoch, workflow=workflow.name,
                 takeover=record.claimed_from is RunStatus.RUNNING)
        try:
            # executed exactly as ``Runtime.resume`` would
            result = await last_result(self._exec.execute(workflow, lease, prepared,
                                                          events=False, sent_at=sent))
        except asyncio.CancelledError:
            log.info("run_given_back", started=True)
            raise
        except Exception as exc:  # a store error or a lost lease: another worker takes over
            log.warning("run_execution_stopped", error=f"{type(exc).__name__}: {exc}")
            return
        self.results.append(result)
        if result.status is RunStatus.QUEUED:
            log.info("run_given_back", started=True)
        else:
            log.info("run_executed", status=result.status.value)

    async def _start_failed(self, record: RunRecord, lease: Lease, exc: Exception) -> None:
        """Count a failed start on the run; log its cause once per run, and when it gives up."""
        try:
            after = await self.store.start_failed(lease, ErrorInfo.from_exception(exc),
                                                  max_attempts=self.max_start_attempts)
        except Exception as store_exc:
            _log.warning("run_start_failed", worker=self.name, run_id=record.run_id,
                         error=f"{type(store_exc).__name__}: {store_exc}")
            return
        fields = {"worker": self.name, "run_id": record.run_id,
                  "attempts": after.start_attempts, "error": f"{type(exc).__name__}: {exc}"}
        if after.status is RunStatus.FAILED:
            _log.error("run_failed_to_start", **fields)
        elif after.start_attempts == 1:
            _log.warning("run_start_failed", **fields,
                         retry_at=None if after.start_after is None
                         else after.start_after.isoformat())
        elif is_configured():
            _log.debug("run_start_failed", **fields)


def _passing(exc: BaseException) -> bool:
    """An error of the store or the lease, not of the run: it does not count as a failed start."""
    if isinstance(exc, LeaseLostError | OSError):
        return True
    return isinstance(exc, StoreError) and not isinstance(exc, CheckpointCorruptedError)


def _check_workflows(workflows: object) -> None:
    if not isinstance(workflows, list | tuple) or not workflows:
        raise InvalidInputError("Worker needs a non-empty list of workflows")
    seen: set[tuple[str, str]] = set()
    for wf in workflows:
        if not isinstance(wf, Workflow):
            raise InvalidInputError(
                f"Worker takes Workflow objects (from WorkflowBuilder.build()), "
                f"got {type(wf).__name__}")
        key = (wf.name, wf.version)
        if key in seen:
            raise InvalidInputError(f"workflow {wf.name!r} version {wf.version!r} given twice")
        seen.add(key)
