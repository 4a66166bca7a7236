"""The checkpoint store interface: small protocols by concern.

A store keeps *threads* of checkpoints. The top level of a run is the thread
``""``; a sub-workflow invoked by node ``n`` while its parent thread stood at
checkpoint ``c`` is the thread ``f"{c}/{n}"`` (so two invocations never
share state). Within a thread checkpoints form a chain: each new one has the
previous head as parent and ``seq = parent.seq + 1``.

Blackboard state is stored as *channels*, never as a full copy per
checkpoint, so storage grows O(n):

* a **value channel** (a last-write-wins or reduced field) is written only in
  the checkpoint that changed it; ``CheckpointMeta.value_versions`` maps the
  channel to the ``seq`` of the checkpoint that holds its current bytes;
* a **log channel** (an ``append`` field or a node's message history) stores
  only the items appended by each checkpoint, as one JSON array;
  ``CheckpointMeta.log_lengths`` gives the channel's length at that point.

The store never decodes payloads: the engine encodes every value (and so
fails at write time on what cannot be stored) and decodes what it loads.

Ownership is made by the store, not hoped for by its callers:

* :meth:`RunStore.create_run` inserts a run with its first checkpoints, its
  final status when it has nothing to run, and its lease, in one transaction;
* :meth:`RunStore.claim` checks the run's status, records answers only to
  requests still open and takes the lease, in one transaction; a live lease
  refuses it, whoever holds it (a claim is never re-entrant);
* every write of an execution carries its :class:`Lease`, and a commit names
  the head it extends (:class:`Commit`); the store refuses either with
  ``LeaseLostError``, writing nothing, when the epoch or the head moved.

Time and events are store rules too: a claim first delivers the events kept
in the run's mailbox to its open event waits and closes the waits whose
``expires_at`` passed (timers fire, deadlines time out), and a commit that
leaves a run ``waiting`` sets its ``wake_at``, so workers find due runs
through an index.

The protocols are split by concern: :class:`RunStore` (runs and claims),
:class:`CheckpointLog` (the chain of checkpoints and retention),
:class:`Journal` (task writes and step results of a superstep in flight),
:class:`Inbox` (recorded waits: requests, timers, event waits),
:class:`Mailbox` (events sent to runs) and :class:`Graphs` (the graphs runs
were started with). :class:`CheckpointStore` is all six.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from ..model._audit import AuditAnchor
from ..model._budget import Budget, RunUsage
from ..model._decisions import Decision, DecisionVia
from ..model._records import ErrorInfo, RunStatus
from ._approval_rows import Answerer, DecisionDraft
from ._fleet_ops import FleetOps
from ._machine import check_claimable, check_respondable, claimed_record
from ._outbox_rows import NotificationRow, SessionRow, UserRow
from ._rows import (
    HEAD_MOVED,
    Carry,
    CheckpointMeta,
    CheckpointWrite,
    Claim,
    Commit,
    CommitParts,
    Lease,
    LoadedCheckpoint,
    MailRow,
    ParkedRow,
    RequestRow,
    RunRecord,
    RunRows,
    RunUpdate,
    StatusMark,
    StepRow,
    TaskWrite,
    WaitKind,
    check_answerable,
    match_mail,
)

__all__ = [
    "HEAD_MOVED",
    "Approvals",
    "Carry",
    "CheckpointLog",
    "CheckpointMeta",
    "CheckpointStore",
    "CheckpointWrite",
    "Claim",
    "Commit",
    "CommitParts",
    "DecisionLog",
    "Graphs",
    "Inbox",
    "InboxCursor",
    "Journal",
    "Lease",
    "LoadedCheckpoint",
    "MailRow",
    "Mailbox",
    "ParkedRow",
    "RequestRow",
    "RunRecord",
    "RunRows",
    "RunStore",
    "RunUpdate",
    "StatusMark",
    "StepRow",
    "TaskWrite",
    "Transfer",
    "WaitKind",
    "check_answerable",
    "check_claimable",
    "check_respondable",
    "claimed_record",
    "match_mail",
]


# Where a page of the inbox ends: the (created_at, run_id, request id) of its last request.
InboxCursor = tuple[datetime, str, str]


@runtime_checkable
class RunStore(Protocol):
    """Runs, their status and their lease: who may execute a run."""

    async def create_run(
        self, run: RunRecord, checkpoints: Sequence[CheckpointWrite], lease: Lease | None,
        *, task_writes: Sequence[TaskWrite] = (), steps: Sequence[StepRow] = (),
        requests: Sequence[RequestRow] = (), decisions: Sequence[DecisionDraft] = (),
    ) -> None:
        """Insert a run with its first checkpoint(s) and lease in one transaction.

        ``decisions`` (a fork's ``"fork"`` decision) start the new run's chain in it.

        ``run.status`` is stored as given (``completed`` for a run with
        nothing to run, then ``lease`` is None). ``task_writes``, ``steps``
        and ``requests`` (open or answered, saved as given) are inserted in
        the same transaction: a fork copies with them what was recorded for
        the supersteps it continues. Raises ``RunExistsError`` when the id is
        taken, writing nothing.
        """
        ...

    async def get_run(self, run_id: str) -> RunRecord | None:
        """Return the run row, or None."""
        ...

    async def list_runs(
        self, *, status: RunStatus | None = None, workflow_name: str | None = None,
        labels: Mapping[str, str] | None = None, since: datetime | None = None,
        until: datetime | None = None, limit: int | None = None,
    ) -> list[RunRecord]:
        """Runs matching every filter given, newest first, at most ``limit``.

        ``labels``: each key must have that value (``run_labels``, indexed);
        ``since``/``until``: created at or after / before.
        """
        ...

    async def claim(self, claim: Claim) -> Lease:
        """Take ownership of a run in one transaction, or change nothing.

        Checks, in order: the run exists (``RunNotFoundError``); it is not
        ``completed`` or ``cancelled`` (``RunNotResumableError``); no lease
        is live, whoever holds it (``RunLockedError``); its head is
        ``claim.expect_head`` when given (``RunLockedError``); every answered
        id is a request of the run that is still open and not past its
        deadline, or already holds the identical answer (skipped)
        (``UnknownRequestError``). Then delivers kept events to open event
        waits, closes the waits whose ``expires_at`` passed, records the
        answers, sets the run ``running`` (error and ``wake_at`` cleared) when
        any of these changed a wait or the run was not ``waiting``, and takes
        the lease with the next epoch.
        """
        ...

    async def claim_next(self, owner: str, ttl: float, workflows: Sequence[tuple[str, str]],
                         *, limit: int, token: str | None = None) -> list[tuple[RunRecord, Lease]]:
        """A worker's claim: up to ``limit`` runs, in one transaction.

        Takes runs of the given ``(workflow_name, workflow_version)`` pairs
        that are ``queued`` (and whose ``start_after`` has come), ``running``
        with no live lease (their holder died), or ``waiting`` with a
        ``wake_at`` that has come (found through an index on status and wake
        time), highest ``priority`` first, then oldest; delivers kept events
        and closes due waits as ``claim`` does; sets each ``running`` under a
        new lease (next epoch, ``wake_at`` cleared), marked with ``token``.
        Runs another transaction is claiming are skipped, never waited for.
        A run with a ``concurrency_key`` and a ``max_per_key`` starts only while
        fewer than ``max_per_key`` runs of its key are ``running`` and no queued
        run of the key comes before it (atomically: two claims at once never
        exceed it); it stays as it is meanwhile, and the runs of other keys go on.
        Returns the claimed runs as they are now, with their leases.

        A ``token`` names one claim: called again with the same token (its
        COMMIT reply was lost), it returns the runs that claim took, with
        their live leases, instead of claiming others.
        """
        ...

    async def start_failed(self, lease: Lease, error: ErrorInfo, *,
                           max_attempts: int) -> RunRecord:
        """A claimed run could not be started: count it and free the lease, in one transaction.

        The run's ``start_attempts`` grows by one; below ``max_attempts`` it
        goes back to ``queued`` with ``start_after`` set by the backoff
        (1 s, doubling, at most 5 minutes) and ``error`` recorded; at
        ``max_attempts`` it is ``failed`` with ``error``. The next commit of
        an execution, or a ``claim``, starts the count again. Raises
        ``LeaseLostError`` if the lease is no longer held. Returns the run row.
        """
        ...

    async def respond(self, run_id: str, answers: Mapping[str, bytes],
                      answerer: Answerer | None = None) -> RunRecord:
        """Record answers to open requests without executing, in one transaction.

        Raises ``RunNotFoundError``, ``RunNotResumableError`` (completed or
        cancelled), ``RunLockedError`` (a live lease: an execution is under
        way) and ``UnknownRequestError`` (an id that is not an open request,
        or is past its deadline, unless it repeats the recorded answer),
        writing nothing. A ``waiting`` run left with no open request (timers
        and event waits do not count) becomes ``queued``. Returns the run row.
        Approvals: an answer to an assigned request that ``answerer`` may not
        give raises ``NotAuthorizedError``, writing nothing; every recorded
        answer is also recorded as a decision (``claim`` does the same with
        ``Claim.answerer``).
        """
        ...

    async def renew_lease(self, lease: Lease, ttl: float) -> Lease:
        """Extend a held lease. Raises ``LeaseLostError`` if it was taken over."""
        ...

    async def release_lease(self, lease: Lease, *, requeue: bool = False) -> None:
        """Give the lease up; does nothing if it is no longer ours.

        With ``requeue`` a run still ``running`` becomes ``queued`` (a worker
        that stops gives its unfinished runs back).
        """
        ...

    async def add_usage(self, lease: Lease, usage: RunUsage) -> RunUsage:
        """Add one model call's usage to the run's totals (its own transaction); the new totals.

        Raises ``LeaseLostError`` if the lease was taken over (nothing added).
        """
        ...

    async def set_budget(self, lease: Lease, budget: Budget | None) -> None:
        """Replace the run's budget (a person raised it). Raises ``LeaseLostError``."""
        ...

    async def cancel_run(self, run_id: str, decision: DecisionDraft | None = None) -> RunRecord:
        """Cancel a run in one transaction: status, fence (epoch + 1), open requests closed.

        ``decision`` (the ``"cancel"`` decision) is appended to its chain in it.

        Raises ``RunNotFoundError``, or ``RunNotResumableError`` for a run
        that is already ``completed`` or ``cancelled`` (writing nothing).
        """
        ...


@runtime_checkable
class CheckpointLog(Protocol):
    """The chains of checkpoints of every run, and their retention."""

    async def commit(self, commit: Commit) -> None:
        """Write a :class:`Commit` in one transaction.

        Raises ``LeaseLostError`` (epoch or head moved) and writes nothing.
        """
        ...

    async def load_checkpoint(self, run_id: str, checkpoint_id: str) -> LoadedCheckpoint:
        """Read one checkpoint back exactly. Raises ``CheckpointNotFoundError``."""
        ...

    async def get_checkpoint(self, run_id: str, checkpoint_id: str) -> CheckpointMeta | None:
        """Metadata of one checkpoint, or None."""
        ...

    async def thread_head(self, run_id: str, thread: str) -> CheckpointMeta | None:
        """The newest checkpoint of a thread, or None if the thread is empty."""
        ...

    async def first_checkpoint(self, run_id: str, thread: str) -> CheckpointMeta | None:
        """The oldest checkpoint of a thread (its lowest seq), or None if the thread is empty.

        A store reads one row of an index, however long the thread.
        """
        ...

    async def checkpoint_ids(self, run_id: str, part: str, *, limit: int) -> list[str]:
        """Ids of the run's checkpoints that end with ``part`` (else start with it), sorted.

        At most ``limit`` of them: a store reads the run's ids in an index
        and returns only those that match, however long the run.
        """
        ...

    async def list_checkpoints(
        self, run_id: str, *, namespace: str | None = None, thread: str | None = None,
        before: str | None = None, limit: int | None = None,
    ) -> list[CheckpointMeta]:
        """Checkpoint metadata of a run (optionally one namespace/thread), newest first.

        A page: at most ``limit`` checkpoints whose ids sort before ``before``
        (an id, not necessarily of a stored checkpoint). A store reads only
        the page (an index range), however long the run.
        """
        ...

    async def child_checkpoints(self, run_id: str, parent_id: str) -> list[CheckpointMeta]:
        """The checkpoints written on ``parent_id``, oldest first.

        Those are the next checkpoint of its thread and the copies a run went on
        from (``source="resume"``, in any thread): the only checkpoints the
        engine writes with a parent. A store reads a few rows of its indexes,
        however long the run: what came after an older checkpoint is found
        without reading the run's history.
        """
        ...

    async def namespace_heads(self, run_id: str) -> list[CheckpointMeta]:
        """The newest checkpoint of each sub-workflow namespace of a run, by namespace.

        Top-level checkpoints (namespace ``""``) are not read: a long run's
        sub-workflows are listed without scanning its history.
        """
        ...

    async def prune(
        self,
        *,
        run_id: str | None = None,
        keep_last: int | None = None,
        older_than: datetime | None = None,
    ) -> int:
        """Delete old checkpoints; return how many.

        A checkpoint is *needed*, and never removed, when it is

        * a run's head (the newest checkpoint of the top-level thread ``""``);
        * the checkpoint of an open (unanswered) request;
        * the head of a sub-thread whose status is not ``completed`` (the
          sub-workflow is in flight, waiting, failed or cancelled);
        * the anchor ``c`` of a sub-thread ``f"{c}/{node}"`` holding a needed
          checkpoint, so everything needed keeps its anchors at every depth.

        Any other checkpoint is removed when

        * it is beyond the newest ``keep_last`` of its thread (if given;
          otherwise every checkpoint but the thread's head goes) and was
          created before ``older_than`` (if given); or
        * it belongs to a sub-thread whose anchor is removed (or already
          gone), however recent: a sub-workflow's checkpoints live as long as
          the parent checkpoint they hang from. So every kept checkpoint keeps
          the anchors above it, and can still be forked and inspected; a
          finished sub-workflow's head stays exactly as long as its anchor.

        Task writes protect nothing more: pending ones are saved against their
        thread's head, and those of an older checkpoint belong to a superstep
        that has since been merged. A removed checkpoint takes its task
        writes, its step results and its (answered) requests with it, and the
        value rows no remaining checkpoint of its thread references; a thread
        left without checkpoints loses its log chunks too. Every kept
        checkpoint still loads exactly: the value rows it references stay, and
        a thread's log chunks stay while it has a checkpoint (its head needs
        every chunk of the thread). A run that lost checkpoints loses the
        stream log entries written before its oldest kept top-level checkpoint
        was created (the streams of supersteps that started from a removed
        checkpoint), in the same transaction; its last entry always stays.
        """
        ...


@runtime_checkable
class Journal(Protocol):
    """What a superstep in flight has recorded: finished tasks' writes and step results."""

    async def put_task_writes(self, lease: Lease, writes: Sequence[TaskWrite]) -> None:
        """Save finished tasks' writes (one transaction). Raises ``LeaseLostError``."""
        ...

    async def put_step(self, lease: Lease, step: StepRow) -> None:
        """Record a durable step result. Raises ``LeaseLostError``."""
        ...

    async def get_task_writes(self, run_id: str, checkpoint_id: str) -> list[TaskWrite]:
        """Task writes saved against a base checkpoint, in node order."""
        ...

    async def get_steps(self, run_id: str, checkpoint_id: str, node: str) -> dict[str, bytes]:
        """Recorded ``ctx.step`` results of one node run from a base checkpoint."""
        ...


@runtime_checkable
class Inbox(Protocol):
    """Recorded waits of tasks (requests to people, timers, event waits): open until closed."""

    async def get_requests(
        self, run_id: str, *, open_only: bool = False, checkpoint_id: str | None = None
    ) -> list[RequestRow]:
        """Recorded waits of a run, of every kind, oldest first."""
        ...

    async def pending_requests(self, *, workflow_name: str | None = None, limit: int | None = None,
                               after: InboxCursor | None = None) -> list[RequestRow]:
        """Every open request to a person across all runs, oldest first (the inbox).

        Requests past their deadline are left out (no answer is taken for
        them), except those that escalate and were not escalated yet: until
        the escalation is recorded their first people may still answer.
        Ordered by ``(created_at, run_id, id)``. A page: at most ``limit``
        requests, only those ordered after the cursor ``after`` (the key of
        the last request of the previous page), read without scanning the
        requests before it.
        """
        ...


@runtime_checkable
class Mailbox(Protocol):
    """Events sent to runs, kept until a wait takes them (each by exactly one wait)."""

    async def send_event(self, run_id: str, name: str, payload: bytes) -> RunRecord:
        """Keep an event in the run's mailbox (after the ones sent before), in one transaction.

        When no execution holds the run, the event is delivered at once to
        the oldest open wait for ``name``, and a ``waiting`` run it was
        delivered to becomes ``queued``; otherwise the execution's next
        commit that leaves the run waiting, or the next claim, delivers it.
        Raises ``RunNotFoundError``, or ``RunNotResumableError`` for a
        completed or cancelled run (writing nothing). Returns the run row.
        """
        ...

    async def wait_event(self, lease: Lease, wait: RequestRow) -> RequestRow:
        """Record an event wait under the lease; deliver it a kept event at once if one is there.

        The oldest kept event of the wait's name that no wait took (and that
        was sent before the wait's deadline) is delivered to it in the same
        transaction. An existing row with the wait's id is left as it is.
        Returns the wait as stored. Raises ``LeaseLostError``.
        """
        ...

    async def settle(self, lease: Lease) -> bool:
        """Under the lease: deliver kept events to open event waits, close (or escalate) due waits.

        What a claim does first, for a run that keeps running: its executor
        calls it at a barrier while tasks are parked. True if anything
        changed. Raises ``LeaseLostError``.
        """
        ...

    async def get_mail(self, run_id: str) -> list[MailRow]:
        """A run's events, delivered or not, in the order they were sent."""
        ...


@runtime_checkable
class Graphs(Protocol):
    """The graph descriptions runs were started with, by signature."""

    async def put_graph(self, signature: str, workflow_name: str, version: str,
                        description: bytes) -> None:
        """Keep a graph's description (JSON); a signature already kept is left as it is."""
        ...

    async def get_graph(self, signature: str) -> bytes | None:
        """The description kept for ``signature``, or None."""
        ...


@runtime_checkable
class DecisionLog(Protocol):
    """Approvals: the decisions taken on a run's requests (written with the answers)."""

    async def decisions(self, run_id: str) -> list[Decision]:
        """The run's decisions, oldest first (an empty list for an unknown run)."""
        ...

    async def audit_trail(self, run_id: str) -> tuple[AuditAnchor, list[Decision]]:
        """The run row's anchor of its chain and its decisions, read in one transaction."""
        ...


@runtime_checkable
class Approvals(Protocol):
    """Approvals beyond answers: policy answers, reassignments, the outbox, users, web sessions.

    A request's deadline is settled with the others (``claim``): a request
    with ``escalate_to`` not yet escalated is reassigned with a new deadline
    of the same length, a decision and an ``escalated`` notification in the
    same transaction; any other is closed (a ``timeout`` decision for a
    request to a person). A commit that opens requests writes their
    ``opened`` notifications with them.
    """

    async def answer_by_policy(self, lease: Lease, row: RequestRow, principal: str) -> RequestRow:
        """Record ``row`` (already answered) and a ``policy`` decision by ``principal``.

        Under the lease; a request recorded already is returned as it is.
        """
        ...

    async def reassign(self, run_id: str, request_id: str, assignees: tuple[str, ...],
                       roles: tuple[str, ...], by: str | None, via: DecisionVia = "api") -> RequestRow:
        """Give an open request to other people, recorded (``reassign`` ``via``) and notified.

        ``RunNotFoundError``, ``RunNotResumableError`` for a finished run,
        ``UnknownRequestError`` unless the request is open.
        """
        ...

    async def due_notifications(self, limit: int = 50) -> list[NotificationRow]:
        """Undelivered notifications whose time has come, oldest first."""
        ...

    async def notification_sent(self, notice_id: str) -> None:
        """Mark a notification delivered."""
        ...

    async def notification_failed(self, notice: NotificationRow, error: str) -> None:
        """Count a failed delivery and put the next try off (backoff)."""
        ...

    async def prune_notifications(self, delivered_before: datetime) -> int:
        """Delete notifications delivered before ``delivered_before``; return how many.

        Undelivered ones are never removed, nor those about a request still
        open (writing its notification again must find the one delivered).
        """
        ...

    async def notifications(self, run_id: str) -> list[NotificationRow]:
        """A run's notifications, oldest first."""
        ...

    async def add_user(self, user: UserRow) -> None:
        """Add a person (``InvalidInputError`` when the name is taken)."""
        ...

    async def get_user(self, name: str) -> UserRow | None:
        """One person, or None."""
        ...

    async def list_users(self) -> list[UserRow]:
        """Every person, by name."""
        ...

    async def remove_user(self, name: str) -> bool:
        """Remove a person and end their sessions; False when there was none."""
        ...

    async def set_user_roles(self, name: str, roles: tuple[str, ...]) -> bool:
        """Replace a person's roles and end their sessions; False when there is no such person."""
        ...

    async def set_user_password(self, name: str, password_hash: str) -> bool:
        """Replace a person's password hash and end their sessions; False when there is none."""
        ...

    async def start_session(self, session: SessionRow) -> None:
        """Keep a new web session (a login); expired ones may be dropped meanwhile."""
        ...

    async def get_session(self, id_hash: str) -> SessionRow | None:
        """The web session with this id hash (expired or not), or None."""
        ...

    async def end_session(self, id_hash: str) -> bool:
        """End one web session; False when there was none."""
        ...


@runtime_checkable
class Transfer(Protocol):
    """A run's stored rows read and written whole: what ``export_run``/``import_run`` move.

    The SQL stores have it (SQLite, PostgreSQL); rows read from one load into
    another exactly.
    """

    async def export_rows(self, run_id: str) -> RunRows | None:
        """Every row of the run and the graph it names, in one transaction; None if unknown.

        The rows of every table keyed by the run (runs, checkpoints, channel
        values, log chunks, task writes, steps, requests, mailbox), and of
        ``graphs`` the description of the run's signature.
        """
        ...

    async def import_rows(self, rows: RunRows) -> None:
        """Insert the rows in one transaction; a graph description already kept stays.

        Raises ``RunExistsError`` when the run id is taken, writing nothing.
        """
        ...


@runtime_checkable
class CheckpointStore(RunStore, CheckpointLog, Journal, Inbox, Mailbox, Graphs, DecisionLog,
                      Approvals, FleetOps, Protocol):
    """Durable home of runs, checkpoints, task writes, steps and requests.

    All methods are coroutines. Times are timezone-aware UTC datetimes.
    """

    async def setup(self) -> None:
        """Create or upgrade the schema; idempotent. Raises ``SchemaVersionError``."""
        ...

    async def close(self) -> None:
        """Release connections. The store may be set up again afterwards."""
        ...
