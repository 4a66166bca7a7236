"""Runtime: the public entry point that starts, resumes, inspects and forks runs."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import timedelta
from typing import Any

from ..engine._fork import prepare_fork, write_update
from ..engine._loop import RunContext, ThreadOutcome, ThreadRunner
from ..engine._state import input_values
from ..errors import (
    DurableFlowError,
    InvalidInputError,
    LeaseLostError,
    RunLockedError,
    RunNotFoundError,
    RunNotResumableError,
    WorkflowMismatchError,
)
from ..model._blackboard import Blackboard
from ..model._clock import utcnow
from ..model._graph import Workflow
from ..model._ids import new_id, new_run_id
from ..model._records import (
    CheckpointInfo,
    Event,
    PendingRequest,
    RunInfo,
    RunResult,
    RunStatus,
    Snapshot,
)
from ..model._routing import route_entry
from ..store._protocols import CheckpointStore, Lease, RunRecord, RunUpdate
from ._inspect import Inspector, to_pending
from ._lease import keep_lease
from ._responses import check_responses

__all__ = ["Runtime"]

EventSink = Callable[[Event], None]


class Runtime:
    """Runs workflows durably on a checkpoint store.

    Use as ``async with Runtime(store) as rt``. ``lease_ttl`` is how long a
    run's lease lives without renewal; it is renewed while the run executes,
    so another process can take over a run only after its holder died.
    """

    def __init__(self, store: CheckpointStore, *, lease_ttl: float = 30.0,
                 owner: str | None = None) -> None:
        if not isinstance(store, CheckpointStore):
            raise InvalidInputError(f"Runtime needs a checkpoint store (MemoryStore, SqliteStore, ...), "
                                    f"got {type(store).__name__}")
        if isinstance(lease_ttl, bool) or not isinstance(lease_ttl, int | float) or lease_ttl <= 0:
            raise InvalidInputError(f"lease_ttl must be a positive number of seconds, got {lease_ttl!r}")
        self.store = store
        self.lease_ttl = float(lease_ttl)
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{new_id()[-8:]}"
        self._active: dict[str, asyncio.Task[Any]] = {}
        self._cancelling: set[str] = set()
        self._inspect = Inspector(store)

    async def __aenter__(self) -> Runtime:
        await self.store.setup()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.store.close()

    # starting and continuing --------------------------------------------------
    async def run(self, workflow: Workflow, input: Mapping[str, Any] | Blackboard | None = None,
                  *, run_id: str | None = None, max_supersteps: int | None = None,
                  workflow_ref: str | None = None) -> RunResult:
        """Start a run and execute it until it completes, waits or fails."""
        return await _last(self._start(workflow, input, run_id, max_supersteps, workflow_ref,
                                       events=False))

    async def stream(self, workflow: Workflow, input: Mapping[str, Any] | Blackboard | None = None,
                     *, run_id: str | None = None, max_supersteps: int | None = None,
                     workflow_ref: str | None = None) -> AsyncIterator[Event]:
        """Like :meth:`run`, yielding events; the last one carries the ``RunResult``."""
        async for event in self._start(workflow, input, run_id, max_supersteps, workflow_ref,
                                       events=True):
            yield event

    async def _start(self, workflow: Workflow, input: Mapping[str, Any] | Blackboard | None,
                     run_id: str | None, max_supersteps: int | None, workflow_ref: str | None,
                     *, events: bool) -> AsyncIterator[Event]:
        _check_workflow(workflow)
        if run_id is not None and (not isinstance(run_id, str) or not run_id.strip()):
            raise InvalidInputError(f"run_id must be a non-empty string, got {run_id!r}")
        if max_supersteps is not None and (isinstance(max_supersteps, bool)
                                           or not isinstance(max_supersteps, int)
                                           or max_supersteps < 1):
            raise InvalidInputError(f"max_supersteps must be a positive int, got {max_supersteps!r}")
        run_id = run_id or new_run_id()
        if await self.store.get_run(run_id) is not None:
            raise InvalidInputError(f"run {run_id} already exists; resume it instead")
        try:
            values = input_values(workflow.schema, input if input is not None else {})
        except InvalidInputError:
            raise
        except ValueError as exc:
            raise InvalidInputError(f"input does not fit {workflow.state.__name__}: {exc}") from None
        try:
            entry = route_entry(workflow, workflow.schema.build(values))
        except Exception as exc:
            raise InvalidInputError(
                f"routing the input to the entry failed: {type(exc).__name__}: {exc}") from exc
        limit = max_supersteps or workflow.max_supersteps
        now = utcnow()
        lease = Lease(run_id, self.owner, 1, now + timedelta(seconds=self.lease_ttl))

        async def start(rc: RunContext) -> ThreadOutcome:
            runner = ThreadRunner(rc, workflow, max_supersteps=limit)
            write, state = runner.first_checkpoint(values, entry)
            record = RunRecord(
                run_id=run_id, workflow_name=workflow.name, status=RunStatus.RUNNING,
                created_at=now, updated_at=now, head_checkpoint_id=write.meta.id,
                signature=workflow.signature, max_supersteps=limit, workflow_ref=workflow_ref)
            await self.store.create_run(record, [write], lease)
            rc.emit("run_started", "", 0, workflow=workflow.name, input=sorted(values))
            if not state.meta.next_tasks:
                await rc.commit(run=RunUpdate(RunStatus.COMPLETED, release=True))
            return await runner.run(state)

        async for event in self._execute(workflow, lease, start, events=events):
            yield event

    async def resume(self, workflow: Workflow, run_id: str, *,
                     responses: Mapping[str, Any] | None = None,
                     allow_mismatch: bool = False) -> RunResult:
        """Continue a run from its head: after a crash, a failure, or with answers."""
        return await _last(self._continue(workflow, run_id, responses, allow_mismatch,
                                          events=False))

    async def stream_resume(self, workflow: Workflow, run_id: str, *,
                            responses: Mapping[str, Any] | None = None,
                            allow_mismatch: bool = False) -> AsyncIterator[Event]:
        """Like :meth:`resume`, yielding events; the last one carries the ``RunResult``.

        An answer that fits the request's JSON Schema but fails the node's own
        type (a custom validator) is rejected when the node runs: the request
        is open again and the run stays ``waiting``.
        """
        async for event in self._continue(workflow, run_id, responses, allow_mismatch,
                                          events=True):
            yield event

    async def _continue(self, workflow: Workflow, run_id: str,
                        responses: Mapping[str, Any] | None, allow_mismatch: bool,
                        *, events: bool) -> AsyncIterator[Event]:
        _check_workflow(workflow)
        _check_mapping("responses", responses)
        record = await self._require(run_id)
        if record.status.is_final and responses:
            # a client retrying answers that already finished the run: a no-op
            try:
                answers, repeated = await check_responses(self.store, record, responses)
            except DurableFlowError:
                answers, repeated = {}, []
            if not answers and len(repeated) == len(responses):
                result = await self._result(workflow, run_id)
                kind = "run_completed" if record.status is RunStatus.COMPLETED else "run_cancelled"
                yield self._final_event(run_id, kind, result)
                return
        record = await self._resumable(workflow, run_id, allow_mismatch)
        answers, _repeated = await check_responses(self.store, record, responses or {})
        self._check_not_active(run_id)
        lease = await self.store.acquire_lease(run_id, self.owner, self.lease_ttl)

        async def go(rc: RunContext) -> ThreadOutcome:
            await rc.commit(answers=answers,
                            run=RunUpdate(RunStatus.RUNNING, error=None) if answers or
                            record.status is not RunStatus.WAITING else None)
            for rid in answers:
                rc.emit("request_answered", "", 0, request_id=rid)
            runner = ThreadRunner(rc, workflow, max_supersteps=record.max_supersteps)
            state = await runner.load(record.head_checkpoint_id or "")
            return await runner.run(state)

        async for event in self._execute(workflow, lease, go, events=events):
            yield event

    async def fork(self, workflow: Workflow, run_id: str, checkpoint_id: str, *,
                   update: Mapping[str, Any] | None = None,
                   allow_mismatch: bool = False) -> RunResult:
        """Start a new run from a checkpoint of ``run_id`` (``update`` applied first)."""
        _check_workflow(workflow)
        _check_mapping("update", update)
        if not isinstance(checkpoint_id, str):
            raise InvalidInputError(f"checkpoint_id must be a string, got {checkpoint_id!r}")
        source = await self._require(run_id)
        self._check_signature(workflow, source, allow_mismatch)
        new_run = new_run_id()
        now = utcnow()
        lease = Lease(new_run, self.owner, 1, now + timedelta(seconds=self.lease_ttl))

        async def go(rc: RunContext) -> ThreadOutcome:
            state = await prepare_fork(rc, workflow, source, checkpoint_id, update or {})
            rc.emit("run_started", "", state.meta.superstep, workflow=workflow.name,
                    forked_from=checkpoint_id)
            if not state.meta.next_tasks:  # forked from a finished checkpoint
                await rc.commit(run=RunUpdate(RunStatus.COMPLETED, release=True))
            runner = ThreadRunner(rc, workflow, max_supersteps=source.max_supersteps)
            return await runner.run(state)

        return await _last(self._execute(workflow, lease, go, events=False))

    async def update_state(self, workflow: Workflow, run_id: str, values: Mapping[str, Any], *,
                           as_node: str | None = None) -> str:
        """Write a new head checkpoint through the reducers, as if ``as_node`` wrote it.

        With ``as_node`` the next tasks are routed as if that node had just
        run; without it the head's next tasks stay. Returns the new
        checkpoint's id; the run is then ``waiting`` (continue it with
        ``resume``) or ``completed`` when nothing is left to run. A failed
        run's error is cleared. Pending requests of the old head are dropped
        (the waiting nodes ask again on the new state). Refused with
        ``InvalidInputError`` while the head holds recorded work that a new
        head would lose (finished sibling tasks, ``ctx.step`` results, given
        answers, an in-flight sub-workflow): answer or finish it first, or
        ``fork`` with ``update=``. Completed and cancelled runs raise
        ``RunNotResumableError``.
        """
        _check_workflow(workflow)
        if not isinstance(values, Mapping):
            raise InvalidInputError(f"values must be a mapping of field names, got {values!r}")
        record = await self._resumable(workflow, run_id, False)
        if as_node is not None and as_node not in workflow.nodes:
            raise InvalidInputError(f"as_node {as_node!r} is not a node of {workflow.name!r}")
        await self._check_no_recorded_work(workflow, record)
        self._check_not_active(run_id)
        lease = await self.store.acquire_lease(run_id, self.owner, self.lease_ttl)
        rc = RunContext(self.store, lease, workflow.name, lambda e: None)
        try:
            return await write_update(rc, workflow, record, values, as_node)
        finally:
            await self.store.release_lease(rc.lease)

    # the execution wrapper ---------------------------------------------------
    async def _execute(self, workflow: Workflow, lease: Lease,
                       body: Callable[[RunContext], Any], *, events: bool) -> AsyncIterator[Event]:
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        rc = RunContext(self.store, lease, workflow.name, queue.put_nowait if events else None)
        task = asyncio.create_task(self._guarded(rc, workflow, body))
        self._active[lease.run_id] = task
        renew = asyncio.create_task(self._renew(rc))
        task.add_done_callback(lambda _t: queue.put_nowait(None))
        try:
            while (event := await queue.get()) is not None:
                yield event
            result = task.result()
            yield result
        finally:
            renew.cancel()
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
            self._active.pop(lease.run_id, None)

    async def _guarded(self, rc: RunContext, workflow: Workflow,
                       body: Callable[[RunContext], Any]) -> Event:
        try:
            outcome: ThreadOutcome = await body(rc)
        except asyncio.CancelledError:
            if rc.run_id not in self._cancelling:
                # the caller went away (a timeout, an abandoned stream, shutdown):
                # stop like a crash, but free the lease so the run resumes at once
                await self.store.release_lease(rc.lease)
                raise
            await self.store.cancel_run(rc.run_id)
            result = await self._result(workflow, rc.run_id)
            return self._final(rc, "run_cancelled", result)
        except LeaseLostError:
            record = await self.store.get_run(rc.run_id)
            if record is not None and record.status is RunStatus.CANCELLED:
                return self._final(rc, "run_cancelled", await self._result(workflow, rc.run_id))
            raise
        except BaseException:
            # a store error or a corrupt checkpoint: stop, but do not keep others out
            with contextlib.suppress(Exception):
                await self.store.release_lease(rc.lease)
            raise
        result = await self._result(workflow, rc.run_id, outcome)
        kind = {RunStatus.COMPLETED: "run_completed", RunStatus.WAITING: "run_waiting",
                RunStatus.FAILED: "run_failed"}[outcome.status]
        return self._final(rc, kind, result, outcome.state.meta.superstep)

    def _final(self, rc: RunContext, kind: Any, result: RunResult, superstep: int = 0) -> Event:
        return self._final_event(rc.run_id, kind, result, superstep)

    @staticmethod
    def _final_event(run_id: str, kind: Any, result: RunResult, superstep: int = 0) -> Event:
        return Event(kind=kind, run_id=run_id, namespace="", superstep=superstep, node=None,
                     ts=utcnow(), data={"status": result.status.value,
                                        "checkpoint_id": result.checkpoint_id}, result=result)

    async def _renew(self, rc: RunContext) -> None:
        await keep_lease(self.store, rc, self.lease_ttl, rc.fence.lose)

    async def _result(self, workflow: Workflow, run_id: str,
                      outcome: ThreadOutcome | None = None) -> RunResult:
        record = await self._require(run_id)
        if outcome is not None:
            state = outcome.state
        else:
            rc = RunContext(self.store, Lease(run_id, "", 0, utcnow()), workflow.name,
                            lambda e: None)
            state = await ThreadRunner(rc, workflow).load(record.head_checkpoint_id or "")
        open_rows = await self.store.get_requests(run_id, open_only=True)
        return RunResult(
            run_id=run_id, status=record.status, state=state.blackboard(workflow.schema),
            pending_requests=tuple(to_pending(r) for r in open_rows),
            checkpoint_id=record.head_checkpoint_id or state.meta.id, error=record.error)

    # inspection ---------------------------------------------------------------
    async def get_state(self, run_id: str, checkpoint_id: str | None = None, *,
                        namespace: str = "") -> Snapshot:
        """The readable state of a run at a checkpoint (default: the head)."""
        return await self._inspect.snapshot(run_id, checkpoint_id, namespace)

    async def get_run(self, run_id: str) -> RunInfo:
        """One run's record (status, head, error, fork origin); ``RunNotFoundError`` if unknown."""
        return self._inspect.info(await self._require(run_id))

    async def history(self, run_id: str, *, namespace: str = "") -> list[CheckpointInfo]:
        """Checkpoints of a run (one namespace), newest first."""
        return await self._inspect.history(run_id, namespace)

    async def list_runs(self, *, status: RunStatus | str | None = None,
                        workflow_name: str | None = None) -> list[RunInfo]:
        """Runs, newest first, filtered by status and workflow name."""
        return await self._inspect.runs(status, workflow_name)

    async def pending_requests(self, *, workflow_name: str | None = None) -> list[PendingRequest]:
        """Every open request across all runs and nesting levels, oldest first."""
        schemas: dict[bytes, Any] = {}
        return [to_pending(r, schemas) for r in await self.store.pending_requests(
            workflow_name=workflow_name)]

    async def cancel(self, run_id: str) -> RunInfo:
        """Cancel a run; its last checkpoint stays as it was.

        A waiting (or crashed) run is cancelled at once. A run executing in
        this runtime has its tasks cancelled. A run executing in another
        process is fenced: its lease epoch moves on, so that process's next
        write fails and it stops with ``run_cancelled``.
        """
        record = await self._require(run_id)
        if record.status in (RunStatus.COMPLETED, RunStatus.CANCELLED):
            raise RunNotResumableError(run_id, record.status.value)
        task = self._active.get(run_id)
        if task is not None and not task.done():
            self._cancelling.add(run_id)
            try:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
            finally:
                self._cancelling.discard(run_id)
        else:
            await self.store.cancel_run(run_id)
        return self._inspect.info(await self._require(run_id))

    async def recover(self, workflow: Workflow) -> list[RunResult]:
        """Resume this workflow's ``running`` runs whose lease has expired."""
        _check_workflow(workflow)
        results = []
        now = utcnow()
        for record in await self.store.list_runs(status=RunStatus.RUNNING,
                                                 workflow_name=workflow.name):
            if record.lease_expires_at is not None and record.lease_expires_at > now:
                continue
            with contextlib.suppress(RunLockedError):
                results.append(await self.resume(workflow, record.run_id))
        return results

    async def prune(self, run_id: str | None = None, *, keep_last: int | None = None,
                    older_than: timedelta | None = None) -> int:
        """Remove old checkpoints; never a head, pending requests or needed data."""
        if run_id is not None and not isinstance(run_id, str):
            raise InvalidInputError(f"run_id must be a string, got {run_id!r}")
        if keep_last is not None and (isinstance(keep_last, bool) or not isinstance(keep_last, int)):
            raise InvalidInputError(f"keep_last must be an int, got {keep_last!r}")
        if older_than is not None and not isinstance(older_than, timedelta):
            raise InvalidInputError(f"older_than must be a timedelta, got {older_than!r}")
        if keep_last is None and older_than is None:
            raise InvalidInputError("prune needs keep_last, older_than or both")
        if keep_last is not None and keep_last < 1:
            raise InvalidInputError("keep_last must be at least 1")
        cutoff = utcnow() - older_than if older_than is not None else None
        return await self.store.prune(run_id=run_id, keep_last=keep_last, older_than=cutoff)

    # helpers ----------------------------------------------------------------------
    async def _require(self, run_id: str) -> RunRecord:
        record = await self.store.get_run(run_id)
        if record is None:
            raise RunNotFoundError(run_id)
        return record

    async def _resumable(self, workflow: Workflow, run_id: str, allow: bool) -> RunRecord:
        record = await self._require(run_id)
        if record.status.is_final:
            raise RunNotResumableError(run_id, record.status.value)
        self._check_signature(workflow, record, allow)
        return record

    def _check_not_active(self, run_id: str) -> None:
        task = self._active.get(run_id)
        if task is not None and not task.done():
            raise RunLockedError(run_id, f"{self.owner} (this runtime)", self.lease_ttl)

    async def _check_no_recorded_work(self, workflow: Workflow, record: RunRecord) -> None:
        head = record.head_checkpoint_id or ""
        meta = await self.store.get_checkpoint(record.run_id, head)
        tasks = meta.next_tasks if meta is not None else ()
        found: list[str] = []
        if await self.store.get_task_writes(record.run_id, head):
            found.append("finished sibling tasks")
        if any(r.answer is not None for r in await self.store.get_requests(
                record.run_id, checkpoint_id=head)):
            found.append("given answers")
        for node in tasks:
            if await self.store.get_steps(record.run_id, head, node):
                found.append(f"ctx.step results of {node!r}")
            if await self.store.thread_head(record.run_id, f"{head}/{node}") is not None:
                found.append(f"the in-flight sub-workflow {node!r}")
        if found:
            raise InvalidInputError(
                f"cannot update the state of run {record.run_id} now: its head holds "
                f"{', '.join(found)}, which a new head would lose; resume it first, "
                "or fork it with update=")

    @staticmethod
    def _check_signature(workflow: Workflow, record: RunRecord, allow: bool) -> None:
        if not allow and record.signature != workflow.signature:
            raise WorkflowMismatchError(record.run_id, record.signature, workflow.signature)


def _check_workflow(workflow: object) -> None:
    if not isinstance(workflow, Workflow):
        raise InvalidInputError(
            f"expected a Workflow (from WorkflowBuilder.build()), got {type(workflow).__name__}")


def _check_mapping(name: str, value: object) -> None:
    if value is not None and not isinstance(value, Mapping):
        raise InvalidInputError(f"{name} must be a mapping, got {type(value).__name__}")


async def _last(events: AsyncIterator[Event | RunResult]) -> RunResult:
    last: Any = None
    async for event in events:
        last = event
    if isinstance(last, Event) and last.result is not None:
        return last.result
    raise RuntimeError("the run ended without a result")  # pragma: no cover

