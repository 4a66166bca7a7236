"""The rows every store persists: runs, leases, checkpoints, journal and inbox.

These frozen records are the vocabulary between the engine and the stores
(see ``_protocols.py`` for the contracts). The SQL tables that hold them
live apart, in ``sql/_tables.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from ..errors import UnknownRequestError
from ..model._budget import Budget, RunUsage
from ..model._records import CheckpointRef, CheckpointSource, ErrorInfo, RunStatus

if TYPE_CHECKING:
    from ._approval_rows import Answerer, DecisionDraft

__all__ = [
    "HEAD_MOVED",
    "HEAD_PARTS",
    "Carry",
    "CheckpointMeta",
    "CheckpointWrite",
    "Claim",
    "Commit",
    "CommitParts",
    "Lease",
    "LoadedCheckpoint",
    "MailRow",
    "ParkedRow",
    "RequestRow",
    "RunRecord",
    "RunRows",
    "RunUpdate",
    "StatusMark",
    "StepRow",
    "TaskWrite",
    "WaitKind",
    "answerable_now",
    "check_answerable",
    "escalation_due",
    "extra_parts",
    "match_mail",
]

HEAD_MOVED = "the head this commit extends has moved"

#: What a recorded wait of a task waits for: a person's answer (``ctx.request``),
#: a time (``ctx.sleep``) or an event (``ctx.wait_event``).
WaitKind = Literal["request", "timer", "event"]

@dataclass(frozen=True, slots=True)
class Lease:
    """The right to write to one run: whoever holds the current epoch."""

    run_id: str
    owner: str
    epoch: int
    expires_at: datetime
    #: set on the lease a renewal returns when the run was paused meanwhile:
    #: its holder finishes the superstep in flight and gives the run back
    paused: bool = False


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One row of the runs table."""

    run_id: str
    workflow_name: str
    status: RunStatus
    created_at: datetime
    updated_at: datetime
    head_checkpoint_id: str | None
    signature: str
    max_supersteps: int = 100
    error: ErrorInfo | None = None
    forked_from: CheckpointRef | None = None
    workflow_ref: str | None = None
    input_digest: str | None = None
    workflow_version: str = "1"
    priority: int = 0
    wake_at: datetime | None = None
    lease_owner: str | None = None
    lease_epoch: int = 0
    lease_expires_at: datetime | None = None
    claim_token: str | None = None
    start_attempts: int = 0
    start_after: datetime | None = None
    #: what the run's model calls used, and its spending limit (None: none)
    usage: RunUsage = field(default_factory=RunUsage)
    budget: Budget | None = None
    #: who started it (``by=`` of ``run``/``submit``/``fork``), and the workflow's
    #: ``operators=``/``viewers=`` roles as they were when it started (migration 0012)
    started_by: str | None = None
    operators: tuple[str, ...] = ()
    viewers: tuple[str, ...] = ()
    #: only on the records ``claim_next`` returns (never stored): the status the
    #: claim found the run in (``running``: its holder's lease had expired)
    claimed_from: RunStatus | None = None
    #: a paused run: the status it goes back to on unpause, and why it was paused
    paused_from: RunStatus | None = None
    pause_reason: str | None = None
    #: the run's labels (string keys and values)
    labels: Mapping[str, str] = field(default_factory=dict)
    #: the run's concurrency key (``submit(..., concurrency_key=)``) and its workflow's
    #: ``max_runs_per_key`` when it was submitted (None: no limit; migration 0020)
    concurrency_key: str | None = None
    max_per_key: int | None = None


@dataclass(frozen=True, slots=True)
class CheckpointMeta:
    """Everything about a checkpoint except channel payloads."""

    id: str
    run_id: str
    thread: str
    namespace: str
    parent_id: str | None
    seq: int
    superstep: int
    created_at: datetime
    status: RunStatus
    source: CheckpointSource
    nodes: tuple[str, ...] = ()
    routing_reason: str | None = None
    next_tasks: tuple[str, ...] = ()
    joins: dict[str, tuple[str, ...]] = field(default_factory=dict)
    value_versions: dict[str, int] = field(default_factory=dict)
    log_lengths: dict[str, int] = field(default_factory=dict)
    error: ErrorInfo | None = None
    size: int = 0
    # the encoded argument of each ``Send`` instance in ``next_tasks``, by task id
    task_args: dict[str, bytes] = field(default_factory=dict)
    # the tasks parked at this checkpoint (``waits="branch"``), by task id order
    parked: tuple[ParkedRow, ...] = ()
    # ``(crc32, length)`` of the bytes each channel it sees was written as (the engine's
    # ``engine/_lazy.py``); empty for checkpoints written before, or by copies; the row
    # itself is sealed by ``row_digest`` (``store/sql/_codec.py``)
    digests: dict[str, tuple[int, int]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ParkedRow:
    """A parked task as its checkpoint stores it.

    ``anchor`` is the checkpoint the task first ran from: its request rows,
    step results and sub-workflow thread are recorded there, so every re-run
    finds them, and ``superstep`` is the superstep its request ids name.
    ``arg`` is a ``Send`` instance's encoded argument (None for a plain task).
    ``recorded`` is the task id its rows at the anchor were recorded under
    when a migration renamed the task since (None: ``task`` itself).
    """

    task: str
    anchor: str
    superstep: int
    arg: bytes | None = None
    recorded: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """The task ids its rows at the anchor may be recorded under (the newest first)."""
        return (self.task,) if self.recorded in (None, self.task) else (self.task, self.recorded)


@dataclass(frozen=True, slots=True)
class CheckpointWrite:
    """A new checkpoint: its metadata plus the channel data it adds.

    ``values`` holds the bytes of every value channel whose version is this
    checkpoint's ``seq``; ``appends`` holds, per log channel, a JSON array of
    the items this checkpoint appends.
    """

    meta: CheckpointMeta
    values: dict[str, bytes] = field(default_factory=dict)
    appends: dict[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LoadedCheckpoint:
    """A checkpoint read back: every value channel and every log chunk.

    ``logs`` lists, per channel, the JSON arrays of the chunks appended by the
    checkpoint and its ancestors in the thread, oldest first; the engine
    concatenates them and keeps the first ``log_lengths[channel]`` items.
    """

    meta: CheckpointMeta
    values: dict[str, bytes]
    logs: dict[str, list[bytes]]


@dataclass(frozen=True, slots=True)
class TaskWrite:
    """The saved outcome of one finished task of a superstep not yet merged."""

    run_id: str
    checkpoint_id: str
    node: str
    data: bytes
    created_at: datetime


@dataclass(frozen=True, slots=True)
class StepRow:
    """The recorded result of one ``ctx.step`` call."""

    run_id: str
    checkpoint_id: str
    node: str
    name: str
    data: bytes
    created_at: datetime


@dataclass(frozen=True, slots=True)
class RequestRow:
    """A recorded wait of a task: a request to a person, a timer or an event wait.

    Open while ``answer`` is None. ``kind`` says what it waits for; only
    ``request`` rows are in the inbox and can be answered. ``expires_at`` is
    a request's or event wait's deadline, or a timer's wake time; once it
    passed, the next claim of the run closes the row with ``timed_out`` set
    (and ``answer`` the JSON ``null``). For an event wait, ``payload`` is the
    event's name and ``answer`` the delivered event's payload.
    """

    id: str
    run_id: str
    workflow_name: str
    thread: str
    checkpoint_id: str
    node: str
    index: int
    payload: bytes
    response_schema: bytes
    created_at: datetime
    answer: bytes | None = None
    answered_at: datetime | None = None
    kind: WaitKind = "request"
    expires_at: datetime | None = None
    timed_out: bool = False
    approval: bytes | None = None  # who may answer (JSON; see _approval_rows.Approval)
    # asked by a task that may park (``waits="branch"``): answerable while the run runs
    parked: bool = False


@dataclass(frozen=True, slots=True)
class MailRow:
    """An event sent to a run (``Runtime.send_event``), kept in its mailbox.

    ``seq`` orders a run's events as they were sent; ``request_id`` names the
    wait it was delivered to (None while it waits for one).
    """

    run_id: str
    seq: int
    name: str
    payload: bytes
    sent_at: datetime
    request_id: str | None = None
    delivered_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class StatusMark:
    """Change the status (and error) recorded on an existing checkpoint."""

    checkpoint_id: str
    status: RunStatus
    error: ErrorInfo | None = None


@dataclass(frozen=True, slots=True)
class RunUpdate:
    """Change the run row: status, error, head; ``release`` frees the lease.

    ``workflow_version`` and ``signature``, when given, move the run onto
    another version of its workflow (a migration).
    """

    status: RunStatus
    head_checkpoint_id: str | None = None
    error: ErrorInfo | None = None
    release: bool = False
    workflow_version: str | None = None
    signature: str | None = None


@dataclass(frozen=True, slots=True)
class Carry:
    """Move what the superstep in progress at ``source`` recorded onto a new checkpoint.

    Its requests (open and answered, timers and event waits too), task writes
    and step results now belong to the commit's checkpoint, their node ids
    renamed through ``nodes`` (old -> new); request ids stay as they were.
    """

    source: str
    nodes: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitParts:
    """What a superstep commit writes, without the lease it writes under (see ``Commit``).

    The engine builds one; its run context adds the lease (``Commit.of``).
    """

    extends: str | None = None
    checkpoint: CheckpointWrite | None = None
    mark: StatusMark | None = None
    task_writes: Sequence[TaskWrite] = ()
    requests: Sequence[RequestRow] = ()
    answers: dict[str, bytes] = field(default_factory=dict)
    reopen: Sequence[str] = ()
    drop_open_requests: bool = False
    run: RunUpdate | None = None
    carry: Carry | None = None
    nested: Sequence[tuple[CheckpointWrite, Carry]] = ()
    parked_on: Sequence[str] = ()
    #: appended to the run's decision chain in the same transaction (``update_state``)
    decisions: Sequence[DecisionDraft] = ()
    withdraw: Sequence[str] = ()


@dataclass(frozen=True, slots=True)
class Commit(CommitParts):
    """What one transaction writes. Everything in it commits or nothing does.

    ``extends`` is the run's head checkpoint the commit builds on (top-level
    commits name it; a sub-workflow's commits leave it None): the store
    refuses the commit when the head moved. A checkpoint is refused when its
    thread's head is no longer its ``parent_id`` (or, for a first checkpoint,
    when the thread is not empty). Applied in this order: ``answers``
    (record answers to open requests), ``reopen`` (clear the answers of
    these request ids, so they are open again), ``drop_open_requests``
    (delete the run's open requests), ``requests`` (insert new ones; an
    existing id is left as it is), ``task_writes``, ``mark``,
    ``checkpoint``, ``run``, ``carry``, ``nested``: checkpoints of other
    threads (a sub-workflow's thread under ``checkpoint``), each the first of
    its thread (refused when the thread is not empty; its ``parent_id`` may
    name the checkpoint of another thread it continues), each taking over
    what its ``Carry`` names. A commit that leaves the run
    ``waiting`` then delivers the events kept in its mailbox to its open event
    waits (the run is ``queued`` instead when one was delivered) and sets the
    run's ``wake_at`` to the earliest ``expires_at`` of its open waits;
    ``parked_on`` names the requests its parked tasks wait for, as the
    engine last saw them open: one answered since (``respond`` while the run
    ran) makes that commit leave the run ``queued`` instead. ``withdraw``
    (applied after ``requests``) closes these waits, still open, unanswered
    (the run reached an exit while their tasks were parked); each request to
    a person gets a decision of kind ``"withdrawn"``.
    Raises ``LeaseLostError`` (lease gone or head moved),
    ``UnknownRequestError`` (an answered or reopened id that does not exist)
    or ``CheckpointNotFoundError`` (a mark on a missing checkpoint), writing
    nothing.
    """

    lease: Lease

    @classmethod
    def of(cls, lease: Lease, parts: CommitParts) -> Commit:
        """``parts`` written under ``lease``."""
        return cls(lease, **{f.name: getattr(parts, f.name) for f in fields(CommitParts)})


#: The parts of a ``Commit`` that move a run's head: a commit that sets no other
#: part is a plain head move (see ``extra_parts``).
HEAD_PARTS = frozenset({"lease", "extends", "checkpoint", "run"})


def extra_parts(commit: Commit) -> tuple[str, ...]:
    """The names of ``commit``'s parts that are set beyond ``HEAD_PARTS``, in field order.

    Derived from the fields of ``Commit`` (an empty sequence, ``None`` and
    ``False`` are unset), so a part added to ``Commit`` is never missed by a
    backend that writes a plain head move a faster way.
    """
    return tuple(f.name for f in fields(commit)
                 if f.name not in HEAD_PARTS and getattr(commit, f.name))


@dataclass(frozen=True, slots=True)
class Claim:
    """A request to take ownership of a run (see ``RunStore.claim``).

    ``answers`` maps open request ids to encoded answers, recorded in the
    same transaction; ``expect_head`` refuses the claim when the run's head is
    no longer that checkpoint.
    """

    run_id: str
    owner: str
    ttl: float
    answers: Mapping[str, bytes] = field(default_factory=dict)
    expect_head: str | None = None
    answerer: Answerer | None = None  # who answers: checked and recorded with each answer
    # a holder whose process is known to be gone (runtime/_holders.py): its live lease is
    # no bar to this claim; any other live lease still is
    dead_holder: str | None = None


def check_answerable(run_id: str, request_id: str, row: RequestRow | None, answer: bytes,
                     now: datetime) -> bool:
    """Whether ``answer`` is to be recorded for ``row``: True to record, False for a repeat.

    Raises ``UnknownRequestError`` when ``row`` is missing, is not a request
    to a person, is past its deadline or timed out, or holds another answer.
    """
    if row is None or row.kind != "request" or row.timed_out:
        raise UnknownRequestError(run_id, request_id)
    if row.answer is None:
        if row.expires_at is not None and row.expires_at <= now and not escalation_due(row):
            raise UnknownRequestError(run_id, request_id)
        return True
    if row.answer != answer:
        raise UnknownRequestError(run_id, request_id)
    return False


def escalation_due(row: RequestRow) -> bool:
    """Past its deadline but not yet escalated: its people may still answer."""
    from ._approval_rows import approval_of

    return row.approval is not None and approval_of(row).escalates


def answerable_now(row: RequestRow, now: datetime) -> bool:
    """An open request a person may answer at ``now``: before its deadline, or escalating.

    Between the deadline of a request that escalates and the escalation
    being recorded, its first people may still answer it.
    """
    return (row.kind == "request" and row.answer is None and not row.timed_out
            and (row.expires_at is None or row.expires_at > now or escalation_due(row)))


def match_mail(waits: Sequence[RequestRow], mail: Sequence[MailRow],
               names: Mapping[str, str]) -> list[tuple[MailRow, RequestRow]]:
    """Pair kept events with open event waits: each event to one wait, in the order sent.

    ``waits`` are the open event waits, oldest first; ``mail`` the events no
    wait took yet, in ``seq`` order; ``names`` maps a wait's id to the event
    name it waits for. An event goes to the oldest wait for its name; a wait
    whose deadline had passed when the event was sent does not take it.
    """
    pairs: list[tuple[MailRow, RequestRow]] = []
    taken: set[str] = set()
    for event in mail:
        for wait in waits:
            if wait.id in taken or names.get(wait.id) != event.name:
                continue
            if wait.expires_at is not None and wait.expires_at <= event.sent_at:
                continue
            pairs.append((event, wait))
            taken.add(wait.id)
            break
    return pairs


@dataclass(frozen=True, slots=True)
class RunRows:
    """Every stored row of one run, by table, as the columns hold them (``Transfer``).

    ``tables`` maps a table name to its rows (column name -> value: times in
    microseconds since the epoch, payloads as bytes); ``graphs`` holds the
    graph descriptions the run names, shared with other runs. ``decision``
    (an import) is appended to the run's audit chain in the same transaction.
    """

    run_id: str
    tables: Mapping[str, list[dict[str, object]]]
    decision: DecisionDraft | None = None
