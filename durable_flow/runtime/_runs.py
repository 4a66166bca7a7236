"""Runs: what starts, continues, forks and updates runs (a ``Runtime``'s, a worker's ticks).

Every execution owns its run through one store transaction before it runs
anything: ``create_run`` for a new run or a fork, ``claim`` (status check,
answers, lease) for ``resume``, ``update_state`` and a ``run`` that continues
an existing id. Everything the first superstep uses is read and checked
before that transaction, without a lease (``RunReader``); the engine's
commits then name the head they extend, so a second execution of the same
run can neither start nor write.

With ``waits="branch"`` an answer for a parked task may land between the
engine's last look at the answers and its ``waiting`` commit; the store then
leaves the run ``queued`` (``_machine.after_waiting_commit``): right for
workers. A caller of ``run``, ``resume`` or ``fork`` asked this runtime to
execute the run, so it claims the run again and goes on from its head; if
another executor took it first, ``queued`` is the answer.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Mapping
from datetime import timedelta
from typing import Any

from ..engine import (
    Prepared,
    RunContext,
    RunReader,
    ThreadState,
    check_no_recorded_work,
    commit_update,
    first_checkpoint,
    prepare_fork,
)
from ..errors import (
    InvalidInputError,
    RunExistsError,
    RunLockedError,
    RunNotFoundError,
    RunNotResumableError,
)
from ..model._approvals import Principal
from ..model._blackboard import Blackboard
from ..model._budget import Budget
from ..model._clock import utcnow
from ..model._graph import Workflow
from ..model._ids import new_run_id
from ..model._records import Event, RunResult, RunStatus
from ..model._routing import Routed
from ..store._approval_rows import Answerer
from ..store._protocols import CheckpointStore, Claim, Lease, RunRecord
from ._approvals import answerer
from ._audit import check_backed
from ._doors import check_answerer, fork_decision, started_by, update_decision
from ._events import asleep
from ._execution import Executor, final_event
from ._fleet import check_labels, unpause_run
from ._holders import dead_holder
from ._inputs import (
    check_budget_arg,
    check_concurrency_key,
    check_mapping,
    check_start_args,
    check_workflow,
    input_digest,
    last_result,
    validated_input,
)
from ._responses import check_responses, only_repeats
from ._signals import signals_for
from ._versions import GraphBook, check_graph

__all__ = ["Runs"]


class Runs:
    """Starts, continues, forks and updates runs, each executed on ``executor``."""

    def __init__(self, store: CheckpointStore, executor: Executor, graphs: GraphBook, *,
                 owner: str, lease_ttl: float) -> None:
        self.store = store
        self.executor = executor
        self.graphs = graphs
        self.owner = owner
        self.lease_ttl = lease_ttl

    # starting --------------------------------------------------------------------
    async def start(self, workflow: Workflow, input: Mapping[str, Any] | Blackboard | None,
                    run_id: str | None, max_supersteps: int | None, workflow_ref: str | None,
                    budget: Budget | None, *, events: bool,
                    by: Principal | str | None = None,
                    labels: Mapping[str, str] | None = None) -> AsyncIterator[Event]:
        """``Runtime.run``/``stream``: create the run and execute it, or rejoin the existing one."""
        check_workflow(workflow)
        check_start_args(run_id, max_supersteps)
        check_budget_arg(budget)
        values, entry = validated_input(workflow, input)
        run_id = run_id or new_run_id()
        digest = input_digest(values)
        limit = max_supersteps or workflow.max_supersteps
        sent = time.monotonic()  # the lease's local deadline counts from here
        lease = self._new_lease(run_id)
        created = await self._create(workflow, lease, values, entry, digest, limit=limit,
                                     workflow_ref=workflow_ref, status=RunStatus.RUNNING,
                                     budget=budget, started_by=started_by(by), labels=labels)
        if isinstance(created, ThreadState):
            async for event in self._begin(workflow, lease, created, events, limit,
                                           sent_at=sent, new=True):
                yield event
            return
        record = created
        async for event in self._rejoin(workflow, record, digest, events):
            yield event

    async def queue(self, workflow: Workflow, input: Mapping[str, Any] | Blackboard | None, *,
                    run_id: str | None, priority: int, budget: Budget | None,
                    by: Principal | str | None, labels: Mapping[str, str] | None,
                    concurrency_key: str | None) -> RunRecord:
        """``Runtime.submit``: create the run ``queued`` for a worker (or find it); its row."""
        check_workflow(workflow)
        check_start_args(run_id, None)
        check_budget_arg(budget)
        check_concurrency_key(concurrency_key)
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise InvalidInputError(f"priority must be an int, got {priority!r}")
        values, entry = validated_input(workflow, input)
        lease = self._new_lease(run_id or new_run_id())
        digest = input_digest(values)
        created = await self._create(workflow, lease, values, entry, digest,
                                     limit=workflow.max_supersteps, workflow_ref=None,
                                     status=RunStatus.QUEUED, priority=priority, budget=budget,
                                     started_by=started_by(by), labels=labels,
                                     concurrency_key=concurrency_key)
        if isinstance(created, RunRecord):
            await self._check_same_start(workflow, created, digest)
        else:
            signals_for(self.store).wake()
        return await self._require(lease.run_id)

    async def _create(self, workflow: Workflow, lease: Lease, values: dict[str, Any],
                      entry: Routed, digest: str, *, limit: int, workflow_ref: str | None,
                      status: RunStatus, priority: int = 0, budget: Budget | None = None,
                      started_by: str | None = None, labels: Mapping[str, str] | None = None,
                      concurrency_key: str | None = None) -> ThreadState | RunRecord:
        """Create a run with its input checkpoint in one transaction; its head state.

        ``status`` is ``running`` (this runtime executes it, under ``lease``) or
        ``queued`` (for a worker); a run with nothing to run is created
        ``completed``. ``budget`` (else the workflow's) is stored with the run, and
        so are ``started_by``, ``labels``, ``concurrency_key`` (with the workflow's
        ``max_runs_per_key``) and the workflow's ``operators``/``viewers``.
        When the id is taken, the existing run's row instead.
        """
        tags = check_labels(labels)  # checked before anything is written
        write, state = first_checkpoint(self.store, workflow, lease, values, entry)
        done = not state.meta.next_tasks
        now = utcnow()
        new = RunRecord(
            run_id=lease.run_id, workflow_name=workflow.name,
            status=RunStatus.COMPLETED if done else status, created_at=now, updated_at=now,
            head_checkpoint_id=write.meta.id, signature=workflow.signature,
            max_supersteps=limit, workflow_ref=workflow_ref, input_digest=digest,
            workflow_version=workflow.version, priority=priority,
            budget=budget if budget is not None else workflow.budget, started_by=started_by,
            operators=workflow.operators, viewers=workflow.viewers, labels=tags,
            concurrency_key=concurrency_key,
            max_per_key=workflow.max_runs_per_key if concurrency_key is not None else None)
        held = lease if new.status is RunStatus.RUNNING else None
        await self.graphs.keep(workflow)  # so a changed graph can be told apart later
        try:
            await self.store.create_run(new, [write], held)
        except RunExistsError:
            return await self._require(lease.run_id)  # another caller created it first
        return state

    async def _begin(self, workflow: Workflow, lease: Lease, state: ThreadState, events: bool,
                     limit: int, *, sent_at: float | None = None, new: bool = False,
                     **started: Any) -> AsyncIterator[Event]:
        """Execute a run just created with ``state`` as its head (or report it finished).

        ``new``: a run started afresh (nothing recorded against its head, as a fork's may).
        """
        data = {"workflow": workflow.name, **(started or {"input": sorted(state.values)})}
        if not state.meta.next_tasks and not state.meta.parked:
            if events:
                yield Event(kind="run_started", run_id=lease.run_id, namespace="",
                            superstep=state.meta.superstep, node=None, ts=utcnow(), data=data)
            yield final_event(lease.run_id, await self.executor.result(workflow, lease.run_id))
            return
        prepared = Prepared(state, limit, checked=False, new=new)
        async for event in self._again(workflow, self.executor.execute(
                workflow, lease, prepared, events=events, sent_at=sent_at, started=data),
                events):
            yield event

    async def _rejoin(self, workflow: Workflow, record: RunRecord, digest: str,
                      events: bool) -> AsyncIterator[Event]:
        """``run`` with the id of an existing run: its result, or its continuation."""
        await self._check_same_start(workflow, record, digest)
        if record.status is RunStatus.RUNNING:
            async for event in self.go_on(workflow, record.run_id, None, False, events=events):
                yield event
            return
        yield final_event(record.run_id, await self.executor.result(workflow, record.run_id))

    async def _check_same_start(self, workflow: Workflow, record: RunRecord, digest: str) -> None:
        """Starting an existing run id again must name the same workflow and input."""
        if record.workflow_name != workflow.name or record.input_digest != digest:
            what = "workflow" if record.workflow_name != workflow.name else "input"
            raise InvalidInputError(
                f"run {record.run_id} already exists with another {what}; "
                "start it with a new run_id, or resume it")
        await check_graph(self.store, workflow, record)

    # continuing ------------------------------------------------------------------
    async def go_on(self, workflow: Workflow, run_id: str,
                    responses: Mapping[str, Any] | None, allow_mismatch: bool,
                    *, events: bool, migrate: bool = False,
                    who: Answerer | None = None) -> AsyncIterator[Event]:
        """``Runtime.resume``/``stream_resume``: claim the run (with answers) and go on from its head."""
        check_workflow(workflow)
        check_mapping("responses", responses)
        record = await self._require(run_id)
        if record.status is RunStatus.PAUSED:  # resume of a paused run unpauses it
            record = await unpause_run(self.store, run_id, None if who is None else who.principal)
        migrating = migrate and record.workflow_version != workflow.version
        await check_graph(self.store, workflow, record, allow_mismatch=allow_mismatch,
                          migrate=migrating)
        await check_answerer(self.store, run_id, responses, who)
        if record.status.is_final and not await only_repeats(self.store, record, responses):
            raise RunNotResumableError(run_id, record.status.value)
        answers, _repeated = await check_responses(self.store, record, responses or {})
        if not migrating and not answers and (
                (responses and record.status is not RunStatus.RUNNING) or asleep(record)):
            # answers recorded before, or a run whose timer is still ahead: a no-op
            yield await self._repeated(workflow, run_id)
            return
        self._check_not_active(run_id)
        head = record.head_checkpoint_id or ""
        # read and check everything the first superstep will use before claiming:
        # damaged data then raises having changed nothing
        prepared = await self._to_continue(workflow, record, migrating)
        sent = time.monotonic()  # the lease's local deadline counts from here
        try:
            lease = await self.store.claim(Claim(
                run_id, self.owner, self.lease_ttl, answers=answers, expect_head=head,
                answerer=who, dead_holder=dead_holder(self.store, record, utcnow())))
        except (RunNotResumableError, RunLockedError):
            # another execution moved the run on since it was read: answers it
            # has already recorded are a no-op; anything else is refused
            if not await only_repeats(self.store, await self._require(run_id), responses):
                raise
            yield await self._repeated(workflow, run_id)
            return
        async for event in self._again(workflow, self.executor.execute(
                workflow, lease, prepared, events=events, sent_at=sent, answered=list(answers)),
                events):
            yield event

    async def recover(self, workflow: Workflow) -> list[RunResult]:
        """``Runtime.recover``: go on with the workflow's ``running`` runs whose lease expired."""
        check_workflow(workflow)
        results = []
        now = utcnow()
        for record in await self.store.list_runs(status=RunStatus.RUNNING,
                                                 workflow_name=workflow.name):
            if record.lease_expires_at is not None and record.lease_expires_at > now:
                continue
            with contextlib.suppress(RunLockedError, RunNotResumableError):
                results.append(await last_result(self.go_on(
                    workflow, record.run_id, None, False, events=False, who=answerer(None))))
        return results

    async def _to_continue(self, workflow: Workflow, record: RunRecord,
                           migrating: bool) -> Prepared:
        """What to continue from: the head, or the migrated head (checked, not written)."""
        await check_backed(self.store, record.run_id)  # AuditError: answers not their decisions
        if not migrating:
            return await self.executor.prepare(workflow, record)
        prepared = await RunReader(self.store, workflow).migrated(record)
        await self.graphs.keep(workflow)
        return prepared

    async def _again(self, workflow: Workflow, execution: AsyncIterator[Event],
                     events: bool) -> AsyncIterator[Event]:
        """``execution``'s events; a ``queued`` end (an answer came meanwhile) is continued."""
        final: Event | None = None
        async for event in execution:
            if event.result is not None and event.result.status is RunStatus.QUEUED:
                final = event  # the execution's last event: held back while it is taken again
                continue
            yield event
        if final is None:
            return
        assert final.result is not None
        again = self.go_on(workflow, final.result.run_id, None, False, events=events)
        try:
            first = await anext(again)
        except (RunLockedError, RunNotResumableError):
            yield final  # another executor holds it (or finished it): it is queued for us
            return
        yield first
        async for event in again:
            yield event

    async def _repeated(self, workflow: Workflow, run_id: str) -> Event:
        """The result for answers that were all recorded before: the run as it stands.

        While another execution still runs with them, that is ``RunLockedError``.
        """
        record = await self._require(run_id)
        if record.status is RunStatus.RUNNING and record.lease_expires_at is not None:
            left = (record.lease_expires_at - utcnow()).total_seconds()
            if left > 0:
                raise RunLockedError(run_id, record.lease_owner or "another runtime", left)
        return final_event(run_id, await self.executor.result(workflow, run_id))

    # forking and updating ----------------------------------------------------------
    async def fork(self, workflow: Workflow, run_id: str, checkpoint_id: str,
                   update: Mapping[str, Any] | None, allow_mismatch: bool,
                   fork_id: str | None, *, events: bool, by: Principal | str | None = None,
                   via: str = "api") -> AsyncIterator[Event]:
        """``Runtime.fork``/``stream_fork``: create the new run from a checkpoint and execute it."""
        check_workflow(workflow)
        check_mapping("update", update)
        check_start_args(fork_id, None)
        if not isinstance(checkpoint_id, str):
            raise InvalidInputError(f"checkpoint_id must be a string, got {checkpoint_id!r}")
        source = await self._require(run_id)
        await check_graph(self.store, workflow, source, allow_mismatch=allow_mismatch)
        decision = await fork_decision(self.store, source, checkpoint_id, update, by, via)
        sent = time.monotonic()  # the lease's local deadline counts from here
        lease = self._new_lease(fork_id or new_run_id())
        rc = RunContext(self.store, lease, workflow.name, None)
        state = await prepare_fork(rc, workflow, source, checkpoint_id, update or {},
                                   started_by=decision.by, decisions=[decision])
        async for event in self._begin(workflow, lease, state, events, source.max_supersteps,
                                       sent_at=sent, forked_from=checkpoint_id):
            yield event

    async def update(self, workflow: Workflow, run_id: str, values: Mapping[str, Any],
                     as_node: str | None, by: Principal | str | None, via: str) -> str:
        """``Runtime.update_state``: plan the new head without a lease, then commit it under one."""
        check_workflow(workflow)
        if not isinstance(values, Mapping):
            raise InvalidInputError(f"values must be a mapping of field names, got {values!r}")
        record = await self._require(run_id)
        if record.status.is_final:
            raise RunNotResumableError(run_id, record.status.value)
        await check_graph(self.store, workflow, record, allow_mismatch=False)
        if as_node is not None and as_node not in workflow.nodes:
            raise InvalidInputError(f"as_node {as_node!r} is not a node of {workflow.name!r}")
        await check_no_recorded_work(self.store, record, workflow)
        self._check_not_active(run_id)
        head = record.head_checkpoint_id or ""
        plan = await RunReader(self.store, workflow).plan_update(run_id, head, values, as_node)
        decision = update_decision(values, as_node, by, via)
        lease = await self.store.claim(Claim(run_id, self.owner, self.lease_ttl, expect_head=head,
                                             dead_holder=dead_holder(self.store, record, utcnow())))
        rc = RunContext(self.store, lease, workflow.name, None)
        try:
            return await commit_update(rc, workflow, plan, [decision])
        finally:
            await self.store.release_lease(rc.lease)

    # helpers ----------------------------------------------------------------------
    def _new_lease(self, run_id: str) -> Lease:
        """The first lease of a run this runtime creates (epoch 1)."""
        return Lease(run_id, self.owner, 1, utcnow() + timedelta(seconds=self.lease_ttl))

    async def _require(self, run_id: str) -> RunRecord:
        record = await self.store.get_run(run_id)
        if record is None:
            raise RunNotFoundError(run_id)
        return record

    def _check_not_active(self, run_id: str) -> None:
        if self.executor.is_active(run_id):
            raise RunLockedError(run_id, f"{self.owner} (this runtime)", self.lease_ttl)
