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
    "ChannelValueTable",
    "CheckpointTable",
    "DecisionTable",
    "GraphTable",
    "LogChunkTable",
    "MailTable",
    "NotificationTable",
    "RequestTable",
    "RunTable",
    "StepTable",
    "StreamTable",
    "TaskWriteTable",
    "UserTable",
]

METADATA = MetaData()
_OPEN = text("answer IS NULL")


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


class CheckpointTable(_TableModel, table=True):
    """Checkpoint metadata; ``(run_id, thread, seq)`` orders each thread's chain."""

    __tablename__ = "checkpoints"
    __table_args__ = (
        Index("ux_checkpoints_thread_seq", "run_id", "thread", "seq", unique=True),
        Index("ix_checkpoints_namespace", "run_id", "namespace", "checkpoint_id"),
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
    # added by migration 0011: {channel: [crc32, length]} of the bytes the engine wrote
    digests: str | None = Field(default=None, sa_type=Text)


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
