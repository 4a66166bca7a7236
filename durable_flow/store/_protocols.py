"""The checkpoint store interface and the rows it persists.

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

Every write that belongs to a run being executed carries the run's
:class:`Lease`; a store must refuse it with ``LeaseLostError`` (writing
nothing) when the run's lease epoch or owner no longer match.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, runtime_checkable

from ..model._records import CheckpointRef, CheckpointSource, ErrorInfo, RunStatus

__all__ = [
    "CheckpointMeta",
    "CheckpointStore",
    "CheckpointWrite",
    "Commit",
    "Lease",
    "LoadedCheckpoint",
    "RequestRow",
    "RunRecord",
    "RunUpdate",
    "StatusMark",
    "StepRow",
    "TaskWrite",
]


@dataclass(frozen=True, slots=True)
class Lease:
    """The right to write to one run: whoever holds the current epoch."""

    run_id: str
    owner: str
    epoch: int
    expires_at: datetime


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
    lease_owner: str | None = None
    lease_epoch: int = 0
    lease_expires_at: datetime | None = None


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
    """A human-input request; open while ``answer`` is None."""

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


@dataclass(frozen=True, slots=True)
class StatusMark:
    """Change the status (and error) recorded on an existing checkpoint."""

    checkpoint_id: str
    status: RunStatus
    error: ErrorInfo | None = None


@dataclass(frozen=True, slots=True)
class RunUpdate:
    """Change the run row: status, error, head; ``release`` frees the lease."""

    status: RunStatus
    head_checkpoint_id: str | None = None
    error: ErrorInfo | None = None
    release: bool = False


@dataclass(frozen=True, slots=True)
class Commit:
    """What one transaction writes. Everything in it commits or nothing does.

    Applied in this order: ``answers`` (record answers to open requests),
    ``reopen`` (clear the answers of these request ids, so they are open
    again), ``drop_open_requests`` (delete the run's open requests),
    ``requests`` (insert new ones; an existing id is left as it is),
    ``task_writes``, ``mark``, ``checkpoint``, ``run``. Raises
    ``LeaseLostError`` (lease gone), ``UnknownRequestError`` (an answered or
    reopened id that does not exist) or ``CheckpointNotFoundError`` (a mark
    on a missing checkpoint), writing nothing.
    """

    lease: Lease
    checkpoint: CheckpointWrite | None = None
    mark: StatusMark | None = None
    task_writes: Sequence[TaskWrite] = ()
    requests: Sequence[RequestRow] = ()
    answers: dict[str, bytes] = field(default_factory=dict)
    reopen: Sequence[str] = ()
    drop_open_requests: bool = False
    run: RunUpdate | None = None


@runtime_checkable
class CheckpointStore(Protocol):
    """Durable home of runs, checkpoints, task writes, steps and requests.

    All methods are coroutines. Times are timezone-aware UTC datetimes.
    """

    async def setup(self) -> None:
        """Create or upgrade the schema; idempotent. Raises ``SchemaVersionError``."""
        ...

    async def close(self) -> None:
        """Release connections. The store may be set up again afterwards."""
        ...

    async def create_run(
        self, run: RunRecord, checkpoints: Sequence[CheckpointWrite], lease: Lease | None,
        *, task_writes: Sequence[TaskWrite] = (), steps: Sequence[StepRow] = (),
        requests: Sequence[RequestRow] = (),
    ) -> None:
        """Insert a run with its first checkpoint(s) (and lease, if given) atomically.

        ``task_writes``, ``steps`` and ``requests`` (open or answered, saved as
        given) are inserted in the same transaction: a fork copies with them
        what was recorded for the supersteps it continues.
        """
        ...

    async def get_run(self, run_id: str) -> RunRecord | None:
        """Return the run row, or None."""
        ...

    async def list_runs(
        self, *, status: RunStatus | None = None, workflow_name: str | None = None
    ) -> list[RunRecord]:
        """Runs matching the filters, newest first."""
        ...

    async def acquire_lease(self, run_id: str, owner: str, ttl: float) -> Lease:
        """Take the run's lease with a higher epoch.

        Raises ``RunNotFoundError`` for an unknown run and ``RunLockedError``
        when another owner holds a lease that has not expired.
        """
        ...

    async def renew_lease(self, lease: Lease, ttl: float) -> Lease:
        """Extend a held lease. Raises ``LeaseLostError`` if it was taken over."""
        ...

    async def release_lease(self, lease: Lease) -> None:
        """Give the lease up; does nothing if it is no longer ours."""
        ...

    async def cancel_run(self, run_id: str) -> RunRecord:
        """Mark the run cancelled, fence out any holder (epoch + 1), close its requests."""
        ...

    async def commit(self, commit: Commit) -> None:
        """Write a :class:`Commit` in one transaction. Raises ``LeaseLostError``."""
        ...

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

    async def load_checkpoint(self, run_id: str, checkpoint_id: str) -> LoadedCheckpoint:
        """Read one checkpoint back exactly. Raises ``CheckpointNotFoundError``."""
        ...

    async def get_checkpoint(self, run_id: str, checkpoint_id: str) -> CheckpointMeta | None:
        """Metadata of one checkpoint, or None."""
        ...

    async def thread_head(self, run_id: str, thread: str) -> CheckpointMeta | None:
        """The newest checkpoint of a thread, or None if the thread is empty."""
        ...

    async def list_checkpoints(
        self, run_id: str, *, namespace: str | None = None, thread: str | None = None
    ) -> list[CheckpointMeta]:
        """Checkpoint metadata of a run (optionally one namespace/thread), newest first."""
        ...

    async def get_requests(
        self, run_id: str, *, open_only: bool = False, checkpoint_id: str | None = None
    ) -> list[RequestRow]:
        """Requests of a run, oldest first."""
        ...

    async def pending_requests(self, *, workflow_name: str | None = None) -> list[RequestRow]:
        """Every open request across all runs, oldest first (the inbox)."""
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
        every chunk of the thread).
        """
        ...
