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
or by its poll interval, the fallback that also finds runs whose holder died.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import socket
from collections.abc import Sequence
from typing import Any

from tenacity import AsyncRetrying, retry_if_exception_type, wait_exponential, wait_random

from .._logs import get_logger
from ..errors import InvalidInputError, StoreError, WorkflowMismatchError
from ..model._graph import Workflow
from ..model._ids import new_id
from ..model._records import RunResult, RunStatus
from ..store._protocols import CheckpointStore, Lease, RunRecord
from ._runtime import Runtime
from ._signals import Listening, signals_for

__all__ = ["Worker"]

_log = get_logger()


class Worker:
    """Executes runs claimed from the store, at most ``concurrency`` at once.

    Use as ``async with Worker(store, [workflow, ...]) as worker: await
    worker.serve()``; ``serve`` runs until ``stop()`` (or cancellation).
    A run is executed on the workflow object whose name and version started
    it; runs of workflows this worker does not have stay queued for another.
    """

    def __init__(self, store: CheckpointStore, workflows: Sequence[Workflow], *,
                 concurrency: int = 8, lease_ttl: float = 30.0, poll_interval: float = 1.0,
                 grace_period: float = 10.0, name: str | None = None) -> None:
        _check_workflows(workflows)
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise InvalidInputError(f"concurrency must be a positive int, got {concurrency!r}")
        for label, value in (("poll_interval", poll_interval), ("grace_period", grace_period)):
            if isinstance(value, bool) or not isinstance(value, int | float) \
                    or not math.isfinite(value) or value < 0:
                raise InvalidInputError(f"{label} must be a number of seconds >= 0, got {value!r}")
        self.store = store
        self.name = name or f"worker:{socket.gethostname()}:{os.getpid()}:{new_id()[-6:]}"
        self.concurrency = concurrency
        self.poll_interval = float(poll_interval)
        self.grace_period = float(grace_period)
        self._workflows = {(wf.name, wf.version): wf for wf in workflows}
        self._runtime = Runtime(store, lease_ttl=lease_ttl, owner=self.name)
        self._runtime._exec.requeue_on_abort = True
        self._tasks: dict[asyncio.Task[Any], str] = {}
        self._stopping = False
        self._next_unknown_check = 0.0
        #: (workflow name, version) of queued runs seen that this worker cannot run
        self.unknown: set[tuple[str, str]] = set()
        self.results: list[RunResult] = []

    async def __aenter__(self) -> Worker:
        await self.store.setup()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
        await self.store.close()

    @property
    def running(self) -> list[str]:
        """Ids of the runs this worker executes now."""
        return sorted(self._tasks.values())

    async def serve(self) -> None:
        """Claim and execute runs until :meth:`stop` is called."""
        signals = signals_for(self.store)
        _log.info("worker_started", worker=self.name, concurrency=self.concurrency,
                  workflows=sorted(f"{n}@{v}" for n, v in self._workflows))
        try:
            if isinstance(self.store, Listening):
                await self.store.listen(signals.wake)
            while not self._stopping:
                seen = signals.wakes  # a wake-up during the claim is not slept through
                free = self.concurrency - len(self._tasks)
                claimed = await self._claim(free) if free > 0 else []
                for record, lease in claimed:
                    self._start(record, lease)
                if claimed and len(claimed) == free:
                    continue  # there may be more: claim again once a slot frees up
                if not claimed:
                    await self._note_unknown()
                await signals.wait(self.poll_interval, since=seen)
        finally:
            if not self._stopping:  # cancelled: stop like stop() without the grace
                self._stopping = True
                await self._drain(0.0)

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
        """Stop claiming; let running supersteps finish within the grace period.

        Runs still executing after ``grace_period`` are cancelled and given
        back to the queue (``queued``), their leases released.
        """
        if self._stopping and not self._tasks:
            return
        self._stopping = True
        signals_for(self.store).wake()
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

    async def _claim(self, limit: int) -> list[tuple[RunRecord, Lease]]:
        """One claim; a store that fails for a while is retried with backoff, never dropped."""
        keys = sorted(self._workflows)
        async for attempt in AsyncRetrying(
                retry=retry_if_exception_type((StoreError, OSError)),
                wait=wait_exponential(multiplier=0.1, max=5.0) + wait_random(0, 0.1),
                before_sleep=lambda s: _log.warning(
                    "worker_claim_failed", worker=self.name, attempt=s.attempt_number,
                    error=repr(s.outcome.exception() if s.outcome else None)),
                reraise=True):
            with attempt:
                return await self.store.claim_next(
                    self.name, self._runtime.lease_ttl, keys, limit=limit)
        return []  # pragma: no cover - AsyncRetrying either returns or raises

    def _start(self, record: RunRecord, lease: Lease) -> None:
        workflow = self._workflows[(record.workflow_name, record.workflow_version)]
        task = asyncio.create_task(self._execute(workflow, record, lease))
        self._tasks[task] = record.run_id
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.pop(task, None)
        signals_for(self.store).wake()  # a slot is free

    async def _execute(self, workflow: Workflow, record: RunRecord, lease: Lease) -> None:
        log = _log.bind(worker=self.name, run_id=record.run_id)
        if record.signature != workflow.signature:
            log.error("worker_workflow_mismatch", error=str(WorkflowMismatchError(
                record.run_id, record.signature, workflow.signature)))
            await self.store.release_lease(lease, requeue=True)
            return
        log.info("run_claimed", epoch=lease.epoch, workflow=workflow.name)
        try:
            result = await self._runtime.execute_claimed(workflow, record, lease)
        except asyncio.CancelledError:
            log.info("run_given_back")
            raise
        except Exception as exc:  # a store error or a lost lease: another worker takes over
            log.warning("run_execution_stopped", error=f"{type(exc).__name__}: {exc}")
            return
        self.results.append(result)
        log.info("run_executed", status=result.status.value)


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
