"""Runtime: the public entry point that starts, resumes, inspects and forks runs.

Every method hands its work to an object of the concern it belongs to, built
with the runtime: ``Runs`` (``_runs.py``) starts, continues, forks and updates
runs, each execution on its ``Executor``; the read side is its ``Inspector``;
``Approvals`` answers and decides, ``Doors`` cancels, ``Schedules`` keeps the
schedules and ``Fleet`` pauses, retries and selects runs.
"""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from ..model._approvals import Principal
from ..model._audit import AuditReport
from ..model._blackboard import Blackboard
from ..model._budget import Budget
from ..model._decisions import Decision
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
from ..model._schedules import CatchUp, ScheduleInfo
from ..store._protocols import CheckpointStore
from ._approvals import Approvals, answerer
from ._doors import Doors
from ._events import send_event
from ._execution import Executor
from ._fleet import Fleet
from ._inputs import check_lease_ttl, check_store, last_result, seconds
from ._inspect import Inspector, settled
from ._runs import Runs
from ._schedules import Schedules
from ._streams import StreamEntry, follow_stream, read_stream
from ._upgrade import UpgradeProblem, check_upgrade
from ._versions import GraphBook

__all__ = ["Runtime"]


class Runtime:
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
        self._runs = Runs(store, self._exec, GraphBook(store), owner=self.owner,
                          lease_ttl=self.lease_ttl)
        self._approvals = Approvals(store)
        self._doors = Doors(store, self._exec)
        self._schedules = Schedules(store)
        self._fleet = Fleet(store, self._exec)

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
        return self._inspect.info(await self._approvals.respond(
            run_id, responses, answerer(by, via, comment)))

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
        return self._inspect.info(await self._inspect.record(run_id))

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
        return await self._approvals.pending(workflow_name)

    async def recover(self, workflow: Workflow) -> list[RunResult]:
        """Resume this workflow's ``running`` runs whose lease has expired.

        Returns the runs this call executed. A run that someone else claimed,
        finished or cancelled since the listing is skipped: each claim checks
        the run as it is then.
        """
        return await self._runs.recover(workflow)

    async def check_upgrade(self, workflow: Workflow) -> list[UpgradeProblem]:
        """Unfinished runs of ``workflow.name`` it could not continue, and why; writes nothing."""
        return await check_upgrade(self.store, workflow)

    async def prune(self, run_id: str | None = None, *, keep_last: int | None = None,
                    older_than: timedelta | None = None) -> int:
        """Remove old checkpoints; never a head, pending requests or needed data."""
        return await self._fleet.prune(run_id, keep_last, older_than)

    # acts on a whole run, decisions --------------------------------------------
    async def cancel(self, run_id: str, *, by: Principal | str | None = None,
                     via: str = "api", comment: str | None = None) -> RunInfo:
        """Cancel a run; its last checkpoint stays as it was (a ``"cancel"`` decision ``by``).

        A waiting (or crashed) run is cancelled at once. A run executing in
        this runtime has its tasks cancelled. A run executing in another
        process is fenced: its lease epoch moves on, so that process's next
        write fails and it stops with ``run_cancelled``. The decision is
        written in the cancelling transaction.
        """
        return await self._doors.cancel(run_id, by, via, comment)

    async def decisions(self, run_id: str) -> list[Decision]:
        """Every decision on the run's requests, oldest first (``RunNotFoundError``)."""
        return await self._approvals.decisions(run_id)

    async def verify_audit(self, run_id: str, *, secret: str | None = None) -> AuditReport:
        """Check the run's audit trail: the chain, its anchor in the run row, its answers.

        Digests are checked under ``secret`` (default ``DURABLE_FLOW_SECRET``).
        The report says whether the chain is keyed (an HMAC under the secret;
        unkeyed, plain sha256, proves only that nothing changed by accident)
        and names every problem: a record edited or re-chained, a decision
        missing (the newest ones, or all, deleted), an answer stored on a
        request that is not its decision's. ``RunNotFoundError`` for an
        unknown run.
        """
        return await self._approvals.verify_audit(run_id, secret)

    async def reassign(self, run_id: str, request_id: str, *, assignees: Sequence[str] = (),
                       roles: Sequence[str] = (), by: Principal | str | None,
                       via: str = "api") -> PendingRequest:
        """Give an open request to other people (an admin's act), a ``reassign`` ``via`` a channel.

        Only they may answer it now; notified. ``UnknownRequestError`` unless it is open.
        """
        return await self._approvals.reassign(run_id, request_id, assignees, roles, by, via)

    async def approval_link(self, run_id: str, request_id: str, *, for_: Principal | str,
                            expires_in: timedelta = timedelta(days=2), base_url: str,
                            secret: str | None = None) -> str:
        """A signed, expiring link with which ``for_`` answers one open request, once.

        Signed with ``secret`` (default ``DURABLE_FLOW_SECRET``).
        ``UnknownRequestError`` unless the request is open; ``NotAuthorizedError``
        when ``for_`` may not answer it (its roles are the ``Principal``'s, or
        those of the user of that name).
        """
        return await self._approvals.link(run_id, request_id, for_, expires_in, base_url, secret)

    # the fleet and the schedules -----------------------------------------------
    async def pause(self, run_id: str, *, reason: str | None = None,
                    by: Principal | str | None = None) -> RunInfo:
        """Pause a run: it is not claimed again until :meth:`unpause`; recorded as a decision.

        A run executing on any worker finishes its current superstep, commits
        and stops within one lease renewal (no new superstep starts); answers,
        events and timers keep being recorded while it is paused. Pausing a
        paused run changes nothing. ``InvalidInputError`` for a completed,
        failed or cancelled run; ``RunNotFoundError``.
        """
        return await self._fleet.pause(run_id, reason, by)

    async def unpause(self, run_id: str, *, by: Principal | str | None = None) -> RunInfo:
        """Make a paused run claimable again (``queued``, or ``waiting`` if it still waits).

        Recorded as a decision. A dead-lettered run (``on_failure="pause"``)
        runs its failed task again from the head, nothing else. A run that is
        not paused is returned unchanged; ``RunNotFoundError``.
        """
        return await self._fleet.unpause(run_id, by)

    async def retry(self, run_id: str, *, by: Principal | str | None = None) -> RunInfo:
        """Queue a failed or dead-lettered run again; a ``Worker`` resumes it from its head.

        A dead-lettered run (paused with an error) is unpaused, recorded as a
        decision. Any other run is returned unchanged; ``RunNotFoundError``.
        """
        return await self._fleet.retry(run_id, by)

    async def list_runs(self, *, status: RunStatus | str | None = None,
                        workflow_name: str | None = None, labels: Mapping[str, str] | None = None,
                        since: datetime | None = None, until: datetime | None = None,
                        limit: int | None = None) -> list[RunInfo]:
        """Runs, newest first, filtered by status, workflow name, labels and creation time.

        ``labels``: each key must have that value; ``since``/``until``:
        created at or after / before; at most ``limit``.
        """
        return await self._inspect.runs(status, workflow_name, labels, since, until, limit)

    async def select_runs(self, *, status: RunStatus | str | None = None,
                          workflow_name: str | None = None,
                          labels: Mapping[str, str] | None = None,
                          since: datetime | None = None, until: datetime | None = None,
                          error_type: str | None = None) -> list[str]:
        """The ids of the runs matching every filter given, newest first (for bulk actions).

        ``labels``: each key with that value; ``since``/``until``: created at
        or after / before; ``error_type``: runs whose ``RunInfo.error.type``
        is that name (a failed or dead-lettered run).
        """
        return await self._fleet.select(status, workflow_name, labels, since, until, error_type)

    async def schedule(self, workflow: Workflow, *, cron: str,
                       input: Mapping[str, Any] | Blackboard | None = None, schedule_id: str,
                       timezone: str = "UTC", catch_up: CatchUp = "one",
                       labels: Mapping[str, str] | None = None) -> ScheduleInfo:
        """Create (or replace) a schedule: workers start a run of ``workflow`` at every tick.

        ``cron`` is a cron expression (five fields, or six with seconds last) read
        in ``timezone`` (an IANA name). Each due tick starts exactly one run,
        ``{schedule_id}@{tick, ISO 8601 UTC}``, on a worker that has this
        workflow version. Ticks missed while no worker ran follow
        ``catch_up``: ``"one"`` starts the latest, ``"all"`` each, ``"skip"``
        none (a tick under a minute late still starts). Replacing a schedule
        starts counting its ticks from now. ``InvalidInputError`` for a bad
        cron, time zone, ``catch_up`` or input.
        """
        return await self._schedules.put(workflow, cron, input, schedule_id, timezone,
                                         catch_up, labels)

    async def unschedule(self, schedule_id: str) -> bool:
        """Remove a schedule; runs it started stay. False if there was none."""
        return await self._schedules.remove(schedule_id)

    async def schedules(self) -> list[ScheduleInfo]:
        """Every schedule, by id."""
        return await self._schedules.all()

    async def pause_schedule(self, schedule_id: str, *, paused: bool = True) -> ScheduleInfo:
        """Stop (or, with ``paused=False``, restart) a schedule's ticks.

        A schedule resumed counts its ticks from now: ticks that fell while
        it was paused are not started. ``InvalidInputError`` if there is none.
        """
        return await self._schedules.pause(schedule_id, paused)
