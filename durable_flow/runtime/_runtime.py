"""Runtime: the public entry point that starts, resumes, inspects and forks runs.

Every execution owns its run through one store transaction before it runs
anything: ``create_run`` for a new run or a fork, ``claim`` (status check,
answers, lease) for ``resume``, ``update_state`` and a ``run`` that continues
an existing id. The engine's commits then name the head they extend, so a
second execution of the same run can neither start nor write.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import socket
import time
from collections.abc import AsyncIterator, Mapping
from datetime import timedelta
from typing import Any, cast

from ..engine._fork import check_no_recorded_work, commit_update, plan_update, prepare_fork
from ..engine._loop import RunContext, ThreadOutcome, ThreadRunner
from ..engine._migrate import MigrationPlan, commit_migration, plan_migration
from ..engine._preflight import preflight
from ..engine._state import ThreadState
from ..errors import (
    InvalidInputError,
    RunLockedError,
    RunNotFoundError,
    RunNotResumableError,
)
from ..model._approvals import Principal
from ..model._blackboard import Blackboard
from ..model._budget import Budget
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
from ..model._routing import Routed
from ..store._approval_rows import Answerer
from ..store._protocols import CheckpointStore, Claim, Lease, RunRecord, RunUpdate
from ._again import going_on
from ._approvals import RuntimeApprovals, answerer, check_backed
from ._doors import RuntimeDoors, check_answerer, fork_decision, started_by, update_decision
from ._events import asleep, send_event
from ._execution import Executor, final_event
from ._fleet import RuntimeFleet
from ._holders import dead_holder
from ._inputs import (
    check_mapping,
    check_prune_args,
    check_start_args,
    check_workflow,
    input_digest,
    last_result,
    seconds,
    validated_input,
)
from ._inspect import Inspector, settled, to_pending
from ._responses import check_responses, only_repeats, parked_repeats
from ._schedules import RuntimeSchedules
from ._signals import signals_for
from ._starting import check_budget_arg, check_concurrency_key, create_run
from ._streams import StreamEntry, follow_stream, read_stream
from ._upgrade import UpgradeProblem, check_upgrade
from ._versions import GraphBook, check_graph

__all__ = ["Runtime"]


#: How long ``respond`` waits for an execution that holds the run (seconds).
RESPOND_LOCK_WAIT = 10.0


class Runtime(RuntimeApprovals, RuntimeDoors, RuntimeSchedules, RuntimeFleet):
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
        if isinstance(lease_ttl, bool) or not isinstance(lease_ttl, int | float) \
                or not math.isfinite(lease_ttl) or lease_ttl <= 0:
            raise InvalidInputError(
                f"lease_ttl must be a positive, finite number of seconds, got {lease_ttl!r}")
        self.store = store
        self.lease_ttl = float(lease_ttl)
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{new_id()[-8:]}"
        self._exec = Executor(store, self.lease_ttl)
        self._inspect = Inspector(store)
        self._graphs = GraphBook(store)

    async def __aenter__(self) -> Runtime:
        await self.store.setup()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.store.close()

    # starting and continuing --------------------------------------------------
    async def run(self, workflow: Workflow, input: Mapping[str, Any] | Blackboard | None = None,
                  *, run_id: str | None = None, max_supersteps: int | None = None,
                  workflow_ref: str | None = None, budget: Budget | None = None,
                  by: Principal | str | None = None,
                  labels: Mapping[str, str] | None = None) -> RunResult:
        """Start a run and execute it until it completes, waits or fails.

        Idempotent on ``run_id``: the same id with the same input returns the
        run's current result (running it on when it is ``running`` and its
        lease expired; ``RunLockedError`` while another runtime holds it); the
        same id with another input raises ``InvalidInputError``. ``budget``
        (default: the workflow's) caps what its model calls may use before a
        person is asked (see ``Budget``). ``by`` (a ``Principal`` or id): ``RunInfo.started_by``;
        ``labels``: see ``RunInfo.labels``.
        """
        return await last_result(self._start(workflow, input, run_id, max_supersteps, workflow_ref,
                                             budget, events=False, by=by, labels=labels))

    async def stream(self, workflow: Workflow, input: Mapping[str, Any] | Blackboard | None = None,
                     *, run_id: str | None = None, max_supersteps: int | None = None,
                     workflow_ref: str | None = None, budget: Budget | None = None,
                     by: Principal | str | None = None,
                     labels: Mapping[str, str] | None = None) -> AsyncIterator[Event]:
        """Like :meth:`run`, yielding events; the last one carries the ``RunResult``."""
        async for event in self._start(workflow, input, run_id, max_supersteps, workflow_ref,
                                       budget, events=True, by=by, labels=labels):
            yield event

    async def _start(self, workflow: Workflow, input: Mapping[str, Any] | Blackboard | None,
                     run_id: str | None, max_supersteps: int | None, workflow_ref: str | None,
                     budget: Budget | None, *, events: bool,
                     by: Principal | str | None = None,
                     labels: Mapping[str, str] | None = None) -> AsyncIterator[Event]:
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

    async def _create(self, workflow: Workflow, lease: Lease, values: dict[str, Any],
                      entry: Routed, digest: str, **how: Any) -> ThreadState | RunRecord:
        """The new run's head state (see ``create_run``), or the existing run's row."""
        state = await create_run(self.store, self._graphs, workflow, lease, values, entry,
                                 digest, **how)
        return state if state is not None else await self._require(lease.run_id)

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
            yield final_event(lease.run_id, await self._exec.result(workflow, lease.run_id))
            return

        async def go(rc: RunContext) -> ThreadOutcome:
            rc.emit("run_started", "", state.meta.superstep, **data)
            return await ThreadRunner(rc, workflow, max_supersteps=limit).run(state, new=new)

        async for event in going_on(self, workflow, self._exec.execute(
                workflow, lease, go, events=events, sent_at=sent_at), events):
            yield event

    async def _rejoin(self, workflow: Workflow, record: RunRecord, digest: str,
                      events: bool) -> AsyncIterator[Event]:
        """``run`` with the id of an existing run: its result, or its continuation."""
        await self._check_same_start(workflow, record, digest)
        if record.status is RunStatus.RUNNING:
            async for event in self._continue(workflow, record.run_id, None, False,
                                              events=events):
                yield event
            return
        yield final_event(record.run_id, await self._exec.result(workflow, record.run_id))

    async def resume(self, workflow: Workflow, run_id: str, *,
                     responses: Mapping[str, Any] | None = None, migrate: bool = False,
                     allow_mismatch: bool = False, by: Principal | str | None = None,
                     comment: str | None = None, via: str = "api") -> RunResult:
        """Continue a run from its head: after a crash, a failure, or with answers.

        The store checks the run's status, records the answers (to requests
        still open) and takes the lease in one transaction, so of two callers
        resuming one run at once exactly one executes; the other gets
        ``RunLockedError``. Re-sending answers that were already recorded is a
        no-op that returns the current result, and so is resuming a run
        waiting for a timer or deadline still ahead (nothing is written).

        A workflow of another version than the run's raises
        ``WorkflowMismatchError`` unless ``migrate`` is set: then the
        workflow's migration from the run's version (``builder.migrate``)
        moves the run onto it first, and ``responses`` apply after it.
        ``by``, ``comment`` and ``via`` answer as :meth:`respond`'s do.
        """
        return await last_result(self._continue(workflow, run_id, responses, allow_mismatch,
                                                events=False, migrate=migrate,
                                                who=answerer(by, via, comment)))

    async def stream_resume(self, workflow: Workflow, run_id: str, *,
                            responses: Mapping[str, Any] | None = None, migrate: bool = False,
                            allow_mismatch: bool = False,
                            by: Principal | str | None = None, comment: str | None = None,
                            via: str = "api") -> AsyncIterator[Event]:
        """Like :meth:`resume`, yielding events; the last one carries the ``RunResult``.

        An answer that fits the request's JSON Schema but fails the node's own
        type (a custom validator) is rejected when the node runs: the request
        is open again and the run stays ``waiting``.
        """
        async for event in self._continue(workflow, run_id, responses, allow_mismatch,
                                          events=True, migrate=migrate,
                                          who=answerer(by, via, comment)):
            yield event

    async def _continue(self, workflow: Workflow, run_id: str,
                        responses: Mapping[str, Any] | None, allow_mismatch: bool,
                        *, events: bool, migrate: bool = False,
                        who: Answerer | None = None) -> AsyncIterator[Event]:
        check_workflow(workflow)
        check_mapping("responses", responses)
        record = await self._unpaused(await self._require(run_id), who)
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
        state, preloaded, plan = await self._to_continue(workflow, record, migrating)
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

        async def go(rc: RunContext) -> ThreadOutcome:
            for rid in answers:
                rc.emit("request_answered", "", 0, request_id=rid)
            if plan is not None:
                await commit_migration(rc, workflow, plan)
            rc.preloaded.update(preloaded)
            runner = ThreadRunner(rc, workflow, max_supersteps=record.max_supersteps)
            runner.checked(state.meta.id)
            if not state.meta.next_tasks and not state.meta.parked:  # finished before its status was written
                await rc.commit(extends=head, run=RunUpdate(RunStatus.COMPLETED, release=True))
            return await runner.run(state)

        async for event in going_on(self, workflow, self._exec.execute(
                workflow, lease, go, events=events, sent_at=sent), events):
            yield event

    async def fork(self, workflow: Workflow, run_id: str, checkpoint_id: str, *,
                   update: Mapping[str, Any] | None = None, allow_mismatch: bool = False,
                   new_run_id: str | None = None, by: Principal | str | None = None,
                   via: str = "api") -> RunResult:
        """Start a new run from a checkpoint of ``run_id`` (``update`` applied first).

        The new run (id ``new_run_id``, default a new uuid7), its copied
        checkpoints and its lease are created in one transaction; a fork that
        fails before that writes nothing. It keeps the source's budget, labels
        (``forked_from`` says where it came from) and concurrency key; ``by``
        is its ``started_by`` and its first decision's (a ``"fork"``, see ``_doors``).
        """
        return await last_result(self._fork(workflow, run_id, checkpoint_id, update,
                                            allow_mismatch, new_run_id, events=False,
                                            by=by, via=via))

    async def stream_fork(self, workflow: Workflow, run_id: str, checkpoint_id: str, *,
                          update: Mapping[str, Any] | None = None, allow_mismatch: bool = False,
                          new_run_id: str | None = None, by: Principal | str | None = None,
                          via: str = "api") -> AsyncIterator[Event]:
        """Like :meth:`fork`, yielding events; the last one carries the ``RunResult``."""
        async for event in self._fork(workflow, run_id, checkpoint_id, update, allow_mismatch,
                                      new_run_id, events=True, by=by, via=via):
            yield event

    async def _fork(self, workflow: Workflow, run_id: str, checkpoint_id: str,
                    update: Mapping[str, Any] | None, allow_mismatch: bool,
                    fork_id: str | None, *, events: bool, by: Principal | str | None = None,
                    via: str = "api") -> AsyncIterator[Event]:
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

    async def update_state(self, workflow: Workflow, run_id: str, values: Mapping[str, Any], *,
                           as_node: str | None = None, by: Principal | str | None = None,
                           via: str = "api") -> str:
        """Write a new head checkpoint through the reducers, as if ``as_node`` wrote it.

        With ``as_node`` the next tasks are routed as if that node had just
        run; without it the head's next tasks stay. Returns the new
        checkpoint's id; the run is then ``waiting`` (continue it with
        ``resume``) or ``completed`` when nothing is left to run or parked. A
        failed run's error is cleared. Open requests stay open in either waits
        mode (with ``as_node`` the routed tasks are new and ask afresh; parked
        tasks' requests stay). A bad value raises and changes nothing.
        ``InvalidInputError`` while the head holds work a new head would lose
        (finished sibling tasks, ``ctx.step`` results, given answers, an
        in-flight sub-workflow, a parked task whose answer came): resume it
        first, or ``fork`` with ``update=``. Completed and cancelled runs
        raise ``RunNotResumableError``. Recorded as an ``"update"`` decision
        ``by`` (the fields, ``as_node`` and the digest of ``values``).
        """
        check_workflow(workflow)
        if not isinstance(values, Mapping):
            raise InvalidInputError(f"values must be a mapping of field names, got {values!r}")
        record = await self._resumable(workflow, run_id, False)
        if as_node is not None and as_node not in workflow.nodes:
            raise InvalidInputError(f"as_node {as_node!r} is not a node of {workflow.name!r}")
        await check_no_recorded_work(self.store, record, workflow)
        self._check_not_active(run_id)
        head = record.head_checkpoint_id or ""
        reader = RunContext(self.store, Lease(run_id, "", 0, utcnow()), workflow.name, None)
        plan = await plan_update(reader, workflow, head, values, as_node)
        decision = update_decision(values, as_node, by, via)
        lease = await self.store.claim(Claim(run_id, self.owner, self.lease_ttl, expect_head=head,
                                             dead_holder=dead_holder(self.store, record, utcnow())))
        rc = RunContext(self.store, lease, workflow.name, None)
        try:
            return await commit_update(rc, workflow, plan, [decision])
        finally:
            await self.store.release_lease(rc.lease)

    async def _check_same_start(self, workflow: Workflow, record: RunRecord, digest: str) -> None:
        """Starting an existing run id again must name the same workflow and input."""
        if record.workflow_name != workflow.name or record.input_digest != digest:
            what = "workflow" if record.workflow_name != workflow.name else "input"
            raise InvalidInputError(
                f"run {record.run_id} already exists with another {what}; "
                "start it with a new run_id, or resume it")
        await check_graph(self.store, workflow, record)

    async def _to_continue(self, workflow: Workflow, record: RunRecord, migrating: bool
                           ) -> tuple[ThreadState, dict[str, ThreadState], MigrationPlan | None]:
        """The state to continue from: the head, or the migrated head (checked, not written)."""
        await check_backed(self.store, record.run_id)  # AuditError: answers not their decisions
        if not migrating:
            return (*await self._prepared(workflow, record), None)
        reader = RunContext(self.store, Lease(record.run_id, "", 0, utcnow()), workflow.name,
                            None)
        plan = await plan_migration(reader, workflow, record)
        await self._graphs.keep(workflow)
        return plan.state, {}, plan

    async def _prepared(self, workflow: Workflow, record: RunRecord
                        ) -> tuple[ThreadState, dict[str, ThreadState]]:
        """The run's head and the nested heads its next superstep continues, all checked.

        Read without a lease: the claim that follows names this head, so it is
        refused if the run moved on meanwhile.
        """
        reader = RunContext(self.store, Lease(record.run_id, "", 0, utcnow()), workflow.name,
                            None)
        runner = ThreadRunner(reader, workflow, max_supersteps=record.max_supersteps)
        state = await runner.load(record.head_checkpoint_id or "")
        if state.meta.next_tasks:
            await preflight(runner, state)
        for row in await self.store.get_requests(record.run_id, open_only=True):
            to_pending(row)  # the result lists them: a damaged one must stop us now
        return state, reader.preloaded

    async def _repeated(self, workflow: Workflow, run_id: str) -> Event:
        """The result for answers that were all recorded before: the run as it stands.

        While another execution still runs with them, that is ``RunLockedError``.
        """
        record = await self._require(run_id)
        if record.status is RunStatus.RUNNING and record.lease_expires_at is not None:
            left = (record.lease_expires_at - utcnow()).total_seconds()
            if left > 0:
                raise RunLockedError(run_id, record.lease_owner or "another runtime", left)
        return final_event(run_id, await self._exec.result(workflow, run_id))

    def _new_lease(self, run_id: str) -> Lease:
        """The first lease of a run this runtime creates (epoch 1)."""
        return Lease(run_id, self.owner, 1, utcnow() + timedelta(seconds=self.lease_ttl))

    # the queue: runs for workers ------------------------------------------------
    async def submit(self, workflow: Workflow,
                     input: Mapping[str, Any] | Blackboard | None = None, *,
                     run_id: str | None = None, priority: int = 0,
                     budget: Budget | None = None, by: Principal | str | None = None,
                     labels: Mapping[str, str] | None = None,
                     concurrency_key: str | None = None) -> RunInfo:
        """Save the run's input checkpoint and queue it for a ``Worker``; returns at once.

        Idempotent on ``run_id`` like :meth:`run`: the same id with the same
        input returns the run as it stands; another input raises
        ``InvalidInputError``. Higher ``priority`` runs are claimed first.
        ``budget``, ``by`` (``RunInfo.started_by``) and ``labels`` as in :meth:`run`.
        ``concurrency_key``: workers execute at most the workflow's
        ``max_runs_per_key`` runs of this key at once (across every workflow that
        submits with it); the others stay ``queued`` and start in order.
        """
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
        return self._inspect.info(await self._require(lease.run_id))

    async def respond(self, run_id: str, responses: Mapping[str, Any], *,
                      by: Principal | str | None = None, comment: str | None = None,
                      via: str = "api") -> RunInfo:
        """Record answers without executing anything; no workflow code is needed.

        Answers are checked exactly as :meth:`resume` checks them (against the
        stored JSON Schema). Once no request of the run is left open, the run
        becomes ``queued``, so a worker continues it (or a later ``resume``).
        Re-sending recorded answers is a no-op. While an execution holds the run
        (a worker escalating it, or waking it at a deadline), the answer waits for it up to
        ``RESPOND_LOCK_WAIT`` seconds, then raises ``RunLockedError``. ``by`` (a
        ``Principal`` or id) answers; an assigned request refuses others
        (``NotAuthorizedError``). Each answer is a decision (:meth:`decisions`).
        """
        who = answerer(by, via, comment)
        check_mapping("responses", responses)
        if not responses:
            raise InvalidInputError("responses must answer at least one request")
        record = await self._require(run_id)
        await check_answerer(self.store, run_id, responses, who)
        if record.status.is_final and await only_repeats(self.store, record, responses):
            return self._inspect.info(record)
        answers, repeated = await check_responses(self.store, record, responses)
        if not answers and await parked_repeats(self.store, record, repeated):
            return self._inspect.info(record)  # taken already by the running executor
        updated = await self._respond_when_free(run_id, answers, who)
        if updated.status is RunStatus.QUEUED:
            signals_for(self.store).wake()
        return self._inspect.info(updated)

    async def _respond_when_free(self, run_id: str, answers: Mapping[str, bytes],
                                 who: Answerer | None) -> RunRecord:
        """``store.respond``, sent again while another execution holds the run for a moment."""
        give_up, pause = time.monotonic() + RESPOND_LOCK_WAIT, 0.02
        while True:
            try:
                return await self.store.respond(run_id, answers, who)
            except RunLockedError:
                if time.monotonic() + pause > give_up:
                    raise
                await asyncio.sleep(pause)
                pause = min(pause * 2, 0.5)

    async def send_event(self, run_id: str, name: str, payload: Any = None) -> None:
        """Send the event ``name`` to a run: for systems rather than people (a webhook, ...).

        The event is kept in the run's mailbox and delivered to exactly one
        ``ctx.wait_event(name)``, in the order events were sent; one sent
        before the node waits is kept for it. A ``waiting`` run it is
        delivered to becomes ``queued`` (a worker continues it, or a later
        ``resume``). ``payload`` must be storable; when the run already waits
        for ``name`` it must fit the waiting node's type (else
        ``InvalidResponseError``, nothing stored; an event kept from before the
        wait that does not fit is dropped with a warning when delivered).
        Raises ``RunNotFoundError``, or ``RunNotResumableError`` for a
        completed or cancelled run.
        """
        await send_event(self.store, run_id, name, payload)

    async def wait(self, run_id: str, *, timeout: float | timedelta | None = None) -> RunInfo:
        """Return once the run is waiting, completed, failed or cancelled.

        Raises ``TimeoutError`` after ``timeout`` seconds (a number or a
        ``timedelta``; None waits for as long as it takes).
        """
        return await settled(self.store, self._inspect, run_id, seconds("timeout", timeout))

    # inspection ---------------------------------------------------------------
    async def get_state(self, run_id: str, checkpoint_id: str | None = None, *,
                        namespace: str = "") -> Snapshot:
        """The readable state of a run at a checkpoint (default: the head)."""
        return await self._inspect.snapshot(run_id, checkpoint_id, namespace)

    async def get_run(self, run_id: str) -> RunInfo:
        """One run's record (status, head, error, fork origin); ``RunNotFoundError`` if unknown."""
        return self._inspect.info(await self._require(run_id))

    async def history(self, run_id: str, *, namespace: str = "", limit: int | None = None,
                      before: str | None = None) -> list[CheckpointInfo]:
        """Checkpoints of a run (one namespace), newest first.

        Page with ``limit`` (at most that many) and ``before`` (only checkpoints
        older than that checkpoint id, e.g. the last id of the previous page).
        """
        return await self._inspect.history(run_id, namespace, limit, before)

    async def read_stream(self, run_id: str, *, after: int = 0) -> list[StreamEntry]:
        """What the run's agents streamed after entry ``after`` (see ``StreamEntry``)."""
        return await read_stream(self.store, run_id, after)

    def follow_stream(self, run_id: str, *, after: int = 0,
                      poll: float = 0.2) -> AsyncIterator[StreamEntry]:
        """The run's stream log from ``after`` on, live, until the run stops running."""
        return follow_stream(self.store, run_id, after, poll=poll)

    async def pending_requests(self, *, workflow_name: str | None = None) -> list[PendingRequest]:
        """Every open request a person may answer now, across runs and nesting levels, oldest first.

        A request past its deadline is left out, unless it escalates and the
        escalation is not recorded yet: its first people may still answer it.
        """
        views = getattr(self.store, "pending_views", None)  # SQL stores: straight from the rows
        if views is not None and (found := await views(workflow_name=workflow_name)) is not None:
            return cast("list[PendingRequest]", found)
        schemas: dict[bytes, Any] = {}  # otherwise (or a damaged row, to name it) the usual way
        return [to_pending(r, schemas) for r in await self.store.pending_requests(
            workflow_name=workflow_name)]

    async def recover(self, workflow: Workflow) -> list[RunResult]:
        """Resume this workflow's ``running`` runs whose lease has expired.

        Returns the runs this call executed. A run that someone else claimed,
        finished or cancelled since the listing is skipped: each claim checks
        the run as it is then.
        """
        check_workflow(workflow)
        results = []
        now = utcnow()
        for record in await self.store.list_runs(status=RunStatus.RUNNING,
                                                 workflow_name=workflow.name):
            if record.lease_expires_at is not None and record.lease_expires_at > now:
                continue
            with contextlib.suppress(RunLockedError, RunNotResumableError):
                results.append(await self.resume(workflow, record.run_id))
        return results

    async def check_upgrade(self, workflow: Workflow) -> list[UpgradeProblem]:
        """Unfinished runs of ``workflow.name`` it could not continue, and why; writes nothing."""
        return await check_upgrade(self.store, workflow)

    async def prune(self, run_id: str | None = None, *, keep_last: int | None = None,
                    older_than: timedelta | None = None) -> int:
        """Remove old checkpoints; never a head, pending requests or needed data."""
        check_prune_args(run_id, keep_last, older_than)
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
        await check_graph(self.store, workflow, record, allow_mismatch=allow)
        return record

    def _check_not_active(self, run_id: str) -> None:
        if self._exec.is_active(run_id):
            raise RunLockedError(run_id, f"{self.owner} (this runtime)", self.lease_ttl)
