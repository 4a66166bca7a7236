"""Runtime: the public entry point that starts, resumes, inspects and forks runs.

What starts, continues, forks and updates runs is its ``Runs`` (``_runs.py``);
every execution runs on its ``Executor``; the read side is its ``Inspector``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import AsyncIterator, Mapping
from datetime import timedelta
from typing import Any, cast

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
from ..model._ids import new_id
from ..model._records import (
    CheckpointInfo,
    Event,
    PendingRequest,
    RunInfo,
    RunResult,
    RunStatus,
    Snapshot,
)
from ..store._approval_rows import Answerer
from ..store._protocols import CheckpointStore, RunRecord
from ._approvals import RuntimeApprovals, answerer
from ._doors import RuntimeDoors, check_answerer
from ._events import send_event
from ._execution import Executor
from ._fleet import RuntimeFleet
from ._inputs import (
    check_lease_ttl,
    check_mapping,
    check_prune_args,
    check_store,
    check_workflow,
    last_result,
    seconds,
)
from ._inspect import Inspector, settled, to_pending
from ._responses import check_responses, only_repeats, parked_repeats
from ._runs import Runs
from ._schedules import RuntimeSchedules
from ._signals import signals_for
from ._streams import StreamEntry, follow_stream, read_stream
from ._upgrade import UpgradeProblem, check_upgrade
from ._versions import GraphBook

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
        self.store = check_store(store)
        self.lease_ttl = check_lease_ttl(lease_ttl)
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{new_id()[-8:]}"
        self._exec = Executor(store, self.lease_ttl)
        self._inspect = Inspector(store)
        self._graphs = GraphBook(store)
        self._runs = Runs(store, self._exec, self._graphs, owner=self.owner,
                          lease_ttl=self.lease_ttl)

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
        return await last_result(self._runs.start(workflow, input, run_id, max_supersteps,
                                                  workflow_ref, budget, events=False, by=by,
                                                  labels=labels))

    async def stream(self, workflow: Workflow, input: Mapping[str, Any] | Blackboard | None = None,
                     *, run_id: str | None = None, max_supersteps: int | None = None,
                     workflow_ref: str | None = None, budget: Budget | None = None,
                     by: Principal | str | None = None,
                     labels: Mapping[str, str] | None = None) -> AsyncIterator[Event]:
        """Like :meth:`run`, yielding events; the last one carries the ``RunResult``."""
        async for event in self._runs.start(workflow, input, run_id, max_supersteps,
                                            workflow_ref, budget, events=True, by=by,
                                            labels=labels):
            yield event

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
        return await last_result(self._runs.go_on(workflow, run_id, responses, allow_mismatch,
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
        async for event in self._runs.go_on(workflow, run_id, responses, allow_mismatch,
                                            events=True, migrate=migrate,
                                            who=answerer(by, via, comment)):
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
        return await last_result(self._runs.fork(workflow, run_id, checkpoint_id, update,
                                                 allow_mismatch, new_run_id, events=False,
                                                 by=by, via=via))

    async def stream_fork(self, workflow: Workflow, run_id: str, checkpoint_id: str, *,
                          update: Mapping[str, Any] | None = None, allow_mismatch: bool = False,
                          new_run_id: str | None = None, by: Principal | str | None = None,
                          via: str = "api") -> AsyncIterator[Event]:
        """Like :meth:`fork`, yielding events; the last one carries the ``RunResult``."""
        async for event in self._runs.fork(workflow, run_id, checkpoint_id, update,
                                           allow_mismatch, new_run_id, events=True, by=by,
                                           via=via):
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
        return await self._runs.update(workflow, run_id, values, as_node, by, via)

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
        return self._inspect.info(await self._runs.queue(
            workflow, input, run_id=run_id, priority=priority, budget=budget, by=by,
            labels=labels, concurrency_key=concurrency_key))

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
