"""The SQLModel table models of the checkpoint store, and their indexes.

The models live in a private registry (:data:`METADATA`) so that an
application calling ``SQLModel.metadata.create_all`` never creates
durable-flow's tables. Migrations (``migrations/versions``) create the same
schema; a test checks that the two agree. How values are encoded in these
columns, and the statements over them, are in :mod:`._tables`.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Float, Index, LargeBinary, MetaData, Text, false, text
from sqlalchemy.orm import registry
from sqlmodel import Field, SQLModel

__all__ = [
    "METADATA",
    "RESUMED",
    "ChannelValueTable",
    "CheckpointTable",
    "DecisionTable",
    "GrantTable",
    "GraphTable",
    "LimitTable",
    "LogChunkTable",
    "MailTable",
    "NotificationTable",
    "RequestTable",
    "RunLabelTable",
    "RunTable",
    "ScheduleTable",
    "SessionTable",
    "StepTable",
    "StreamTable",
    "TaskWriteTable",
    "UserTable",
]

METADATA = MetaData()
_OPEN = text("answer IS NULL")
#: The checkpoints ``ix_checkpoints_resumed`` holds: copies a run went on from.
RESUMED = "source = 'resume'"


class _TableModel(SQLModel, registry=registry(metadata=METADATA)):
    """Base of durable-flow's tables: its own metadata, not ``SQLModel.metadata``."""


class RunTable(_TableModel, table=True):
    """One row per run, with its lease (owner, epoch, expiry)."""

    __tablename__ = "runs"
    __table_args__ = (
        Index("ix_runs_created", "created_at", "run_id"),
        Index("ix_runs_status", "status", "created_at", "run_id"),
        Index("ix_runs_claim", "workflow_name", "status", "priority", "created_at", "run_id"),
        Index("ix_runs_workflow", "workflow_name", "created_at", "run_id"),
        # workers find waiting runs whose timer or deadline has come without a scan
        Index("ix_runs_wake", "status", "wake_at"),
        # a claim counts the running runs of a key (migration 0020)
        Index("ix_runs_concurrency_key", "concurrency_key", "status"),
    )

    run_id: str = Field(primary_key=True)
    workflow_name: str
    status: str
    created_at: int = Field(sa_type=BigInteger)
    updated_at: int = Field(sa_type=BigInteger)
    head_checkpoint_id: str | None
    signature: str
    max_supersteps: int
    error: str | None = Field(sa_type=Text)
    forked_from: str | None = Field(sa_type=Text)
    workflow_ref: str | None
    lease_owner: str | None
    lease_epoch: int
    lease_expires_at: int | None = Field(sa_type=BigInteger)
    # added by migration 0002, so they come last
    input_digest: str | None = None
    workflow_version: str = Field(default="1", sa_column_kwargs={"server_default": "1"})
    priority: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    wake_at: int | None = Field(default=None, sa_type=BigInteger)
    # added by migration 0006: the claim that took the lease, failed starts and their backoff
    claim_token: str | None = None
    start_attempts: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    start_after: int | None = Field(default=None, sa_type=BigInteger)
    # added by migration 0007: what the run's model calls used, and its budget
    input_tokens: int = Field(default=0, sa_type=BigInteger,
                              sa_column_kwargs={"server_default": "0"})
    output_tokens: int = Field(default=0, sa_type=BigInteger,
                               sa_column_kwargs={"server_default": "0"})
    usd: float = Field(default=0.0, sa_type=Float, sa_column_kwargs={"server_default": "0"})
    budget_tokens: int | None = Field(default=None, sa_type=BigInteger)
    budget_usd: float | None = Field(default=None, sa_type=Float)
    # added by migration 0012: who started it, and the roles that operate and read it
    started_by: str | None = None
    access: str | None = Field(default=None, sa_type=Text)
    # added by migration 0014: the audit chain's anchor (decisions recorded, the last one's
    # digest, written with each decision) and the digest it starts from (a fork: its source's)
    audit_count: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    audit_head: str = Field(default="", sa_type=Text, sa_column_kwargs={"server_default": ""})
    audit_root: str = Field(default="", sa_type=Text, sa_column_kwargs={"server_default": ""})
    # added by migration 0017: where a paused run goes back to, why it was paused, its labels
    paused_from: str | None = None
    pause_reason: str | None = Field(default=None, sa_type=Text)
    labels: str | None = Field(default=None, sa_type=Text)
    # added by migration 0020: the run's concurrency key and how many runs of it may execute
    concurrency_key: str | None = None
    max_per_key: int | None = None


class CheckpointTable(_TableModel, table=True):
    """Checkpoint metadata; ``(run_id, thread, seq)`` orders each thread's chain."""

    __tablename__ = "checkpoints"
    __table_args__ = (
        Index("ux_checkpoints_thread_seq", "run_id", "thread", "seq", unique=True),
        Index("ix_checkpoints_namespace", "run_id", "namespace", "checkpoint_id"),
        # added by migration 0022: the copies a run went on from, by the checkpoint they copy
        # (a checkpoint's other child is the next of its thread); partial: the supersteps'
        # own checkpoints pay nothing for it
        Index("ix_checkpoints_resumed", "run_id", "parent_id",
              sqlite_where=text(RESUMED), postgresql_where=text(RESUMED)),
    )

    run_id: str = Field(primary_key=True)
    checkpoint_id: str = Field(primary_key=True)
    thread: str
    namespace: str
    parent_id: str | None
    seq: int
    superstep: int
    created_at: int = Field(sa_type=BigInteger)
    status: str
    source: str
    nodes: str = Field(sa_type=Text)
    routing_reason: str | None = Field(sa_type=Text)
    next_tasks: str = Field(sa_type=Text)
    joins: str = Field(sa_type=Text)
    value_versions: str = Field(sa_type=Text)
    log_lengths: str = Field(sa_type=Text)
    error: str | None = Field(sa_type=Text)
    size: int
    # added by migration 0003, so it comes last: {task id: arg JSON} of Send instances
    task_args: str | None = Field(default=None, sa_type=Text)
    # added by migration 0009: the tasks parked at this checkpoint (JSON list), NULL for none
    parked: str | None = Field(default=None, sa_type=Text)
    # added by migration 0011: {channel: [crc32, length]} of the bytes the engine wrote
    digests: str | None = Field(default=None, sa_type=Text)
    # added by migration 0019: a CRC-32 of the columns above but status and error, and
    # one of those two, set with them when a commit marks the checkpoint
    row_digest: int | None = Field(default=None, sa_type=BigInteger)
    status_digest: int | None = Field(default=None, sa_type=BigInteger)


class ChannelValueTable(_TableModel, table=True):
    """The bytes of one value channel as written at one ``seq`` of a thread."""

    __tablename__ = "channel_values"

    run_id: str = Field(primary_key=True)
    thread: str = Field(primary_key=True)
    channel: str = Field(primary_key=True)
    seq: int = Field(primary_key=True)
    data: bytes = Field(sa_type=LargeBinary)


class LogChunkTable(_TableModel, table=True):
    """The items one checkpoint appended to one log channel (a JSON array)."""

    __tablename__ = "log_chunks"

    run_id: str = Field(primary_key=True)
    thread: str = Field(primary_key=True)
    seq: int = Field(primary_key=True)
    channel: str = Field(primary_key=True)
    data: bytes = Field(sa_type=LargeBinary)


class TaskWriteTable(_TableModel, table=True):
    """A finished task's writes, saved against the superstep's base checkpoint."""

    __tablename__ = "task_writes"

    run_id: str = Field(primary_key=True)
    checkpoint_id: str = Field(primary_key=True)
    node: str = Field(primary_key=True)
    data: bytes = Field(sa_type=LargeBinary)
    created_at: int = Field(sa_type=BigInteger)


class StepTable(_TableModel, table=True):
    """A recorded ``ctx.step`` result."""

    __tablename__ = "steps"

    run_id: str = Field(primary_key=True)
    checkpoint_id: str = Field(primary_key=True)
    node: str = Field(primary_key=True)
    name: str = Field(primary_key=True)
    data: bytes = Field(sa_type=LargeBinary)
    created_at: int = Field(sa_type=BigInteger)


class RequestTable(_TableModel, table=True):
    """A human-input request; open while ``answer`` is NULL."""

    __tablename__ = "requests"
    __table_args__ = (
        Index("ix_requests_checkpoint", "run_id", "checkpoint_id"),
        # The inbox reads only open requests, oldest first: partial indexes keep
        # it proportional to what is open, however much history is answered.
        Index("ix_requests_open", "created_at", "run_id", "request_id",
              sqlite_where=_OPEN, postgresql_where=_OPEN),
        Index("ix_requests_open_workflow", "workflow_name", "created_at", "run_id",
              "request_id", sqlite_where=_OPEN, postgresql_where=_OPEN),
    )

    run_id: str = Field(primary_key=True)
    request_id: str = Field(primary_key=True)
    workflow_name: str
    thread: str
    checkpoint_id: str
    node: str
    request_index: int
    payload: bytes = Field(sa_type=LargeBinary)
    response_schema: bytes = Field(sa_type=LargeBinary)
    created_at: int = Field(sa_type=BigInteger)
    answer: bytes | None = Field(sa_type=LargeBinary)
    answered_at: int | None = Field(sa_type=BigInteger)
    # added by migration 0003 (timers, event waits, deadlines), so they come last
    kind: str = Field(default="request", sa_column_kwargs={"server_default": "request"})
    expires_at: int | None = Field(default=None, sa_type=BigInteger)
    timed_out: bool = Field(default=False, sa_type=Boolean,
                            sa_column_kwargs={"server_default": false()})
    # added by migration 0008 (approvals): title, assignees, roles, escalation as JSON
    approval: bytes | None = Field(default=None, sa_type=LargeBinary)
    # added by migration 0009: asked by a task that may park, so answerable while the run runs
    parked: bool = Field(default=False, sa_type=Boolean,
                         sa_column_kwargs={"server_default": false()})


class MailTable(_TableModel, table=True):
    """An event sent to a run, in the order sent; ``request_id`` is the wait that took it."""

    __tablename__ = "mailbox"

    run_id: str = Field(primary_key=True)
    seq: int = Field(primary_key=True)
    name: str
    payload: bytes = Field(sa_type=LargeBinary)
    sent_at: int = Field(sa_type=BigInteger)
    request_id: str | None = None
    delivered_at: int | None = Field(default=None, sa_type=BigInteger)


class RunLabelTable(_TableModel, table=True):
    """One label of a run (``RunInfo.labels``), so that runs are found by label through an index."""

    __tablename__ = "run_labels"
    __table_args__ = (Index("ix_run_labels_key_value", "key", "value", "run_id"),)

    run_id: str = Field(primary_key=True)
    key: str = Field(primary_key=True)
    value: str


class GraphTable(_TableModel, table=True):
    """The description (JSON) of a graph runs were started with, by its signature."""

    __tablename__ = "graphs"

    signature: str = Field(primary_key=True)
    workflow_name: str
    workflow_version: str
    description: str = Field(sa_type=Text)
    created_at: int = Field(sa_type=BigInteger)


class StreamTable(_TableModel, table=True):
    """One entry of a run's stream log (``Runtime.read_stream``), numbered per run."""

    __tablename__ = "stream_entries"

    run_id: str = Field(primary_key=True)
    seq: int = Field(primary_key=True)
    epoch: int
    namespace: str
    node: str
    superstep: int
    kind: str
    data: bytes = Field(sa_type=LargeBinary)
    created_at: int = Field(sa_type=BigInteger)


# -- approvals (migration 0008) ----------------------------------------------------------


class DecisionTable(_TableModel, table=True):
    """A run's decisions, append-only and hash-chained (``seq`` 1, 2, 3, ... per run)."""

    __tablename__ = "decisions"

    run_id: str = Field(primary_key=True)
    seq: int = Field(primary_key=True)
    request_id: str
    node: str
    kind: str
    answer: str = Field(sa_type=Text)
    by: str | None = None
    via: str
    at: int = Field(sa_type=BigInteger)
    comment: str | None = Field(default=None, sa_type=Text)
    payload_digest: str
    digest: str


class NotificationTable(_TableModel, table=True):
    """The outbox: notifications written with the request that opened or escalated.

    Delivered at least once: a row stays until every notifier took it
    (``delivered_at``); ``due_at`` puts off the next try after a failure.
    """

    __tablename__ = "notifications"
    __table_args__ = (Index("ix_notifications_due", "delivered_at", "due_at"),)

    id: str = Field(primary_key=True)
    run_id: str
    request_id: str
    kind: str
    body: str = Field(sa_type=Text)
    created_at: int = Field(sa_type=BigInteger)
    attempts: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    due_at: int = Field(sa_type=BigInteger)
    delivered_at: int | None = Field(default=None, sa_type=BigInteger)
    last_error: str | None = Field(default=None, sa_type=Text)


class UserTable(_TableModel, table=True):
    """A person of the web app: an argon2 password hash, roles (JSON list), an optional email."""

    __tablename__ = "users"

    name: str = Field(primary_key=True)
    password_hash: str
    roles: str = Field(sa_type=Text)
    email: str | None = None
    created_at: int = Field(sa_type=BigInteger)


class SessionTable(_TableModel, table=True):
    """A web login: the sha256 of its random id (never the id), whose it is, until when.

    ``user_name`` is NULL for a login with the admin token. Removing a user,
    changing their roles or password deletes their rows.
    """

    __tablename__ = "sessions"
    __table_args__ = (Index("ix_sessions_user", "user_name"),)

    id_hash: str = Field(primary_key=True)
    user_name: str | None = None
    created_at: int = Field(sa_type=BigInteger)
    expires_at: int = Field(sa_type=BigInteger)
# -- schedules and limits (migration 0016) -----------------------------------------------


class ScheduleTable(_TableModel, table=True):
    """A cron schedule: workers start a run of it for every due tick, once.

    ``next_tick`` is the first tick not started yet (microseconds, UTC);
    ``input`` and ``labels`` are JSON text.
    """

    __tablename__ = "schedules"
    __table_args__ = (Index("ix_schedules_due", "paused", "next_tick"),)

    schedule_id: str = Field(primary_key=True)
    workflow_name: str
    workflow_version: str
    cron: str
    timezone: str
    catch_up: str
    input: str = Field(sa_type=Text)
    labels: str = Field(sa_type=Text)
    paused: bool = Field(default=False, sa_type=Boolean,
                         sa_column_kwargs={"server_default": false()})
    next_tick: int = Field(sa_type=BigInteger)
    last_tick: int | None = Field(default=None, sa_type=BigInteger)
    created_at: int = Field(sa_type=BigInteger)
    updated_at: int = Field(sa_type=BigInteger)


class LimitTable(_TableModel, table=True):
    """One row per named limit: locked while a grant is decided; holds a provider's pause."""

    __tablename__ = "limits"

    name: str = Field(primary_key=True)
    paced_until: int | None = Field(default=None, sa_type=BigInteger)
    updated_at: int = Field(sa_type=BigInteger)


class GrantTable(_TableModel, table=True):
    """A task's use of a limit: waiting (``granted_at`` NULL), held, or released.

    ``expires_at`` is a lease: the row of a worker that died stops counting
    once it passed. Released rows are kept for a while for the rate windows.
    """

    __tablename__ = "limit_grants"
    __table_args__ = (Index("ix_grants_live", "name", "released_at", "expires_at"),
                      Index("ix_grants_rate", "name", "granted_at"),
                      Index("ix_grants_run", "run_id"))

    id: str = Field(primary_key=True)
    name: str
    run_id: str
    task: str
    owner: str
    requested_at: int = Field(sa_type=BigInteger)
    granted_at: int | None = Field(default=None, sa_type=BigInteger)
    expires_at: int = Field(sa_type=BigInteger)
    released_at: int | None = Field(default=None, sa_type=BigInteger)
    # the concurrency the request was made under, to show a wait ("2 of 2 in use")
    capacity: int | None = None
