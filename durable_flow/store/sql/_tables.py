"""The SQL schema of the checkpoint store: table models, row codecs, statements.

The tables mirror the rows of :mod:`durable_flow.store._protocols` (kept apart from
those records on purpose: the records are the engine's vocabulary, these are
storage layout). Encoding rules, the same on every SQL backend:

* times are ``BIGINT`` microseconds since the Unix epoch, UTC: exact for
  :class:`datetime.datetime`, sortable, and free of driver date handling;
* payloads (channel values, log chunks, task writes, steps, request
  payloads and answers) are the engine's orjson bytes, stored as BLOBs;
* small structured metadata (nodes, next tasks, joins, versions, lengths,
  errors, fork origin) is JSON text written with orjson.

The models live in a private registry so that an application calling
``SQLModel.metadata.create_all`` never creates durable-flow's tables.
Migrations (``migrations/versions``) create the same schema; a test checks
that the two agree.

The statements over these tables are here too (:class:`Queries`): SQLAlchemy
Core, compiled once per dialect into SQL text with positional bound
parameters, so values never reach SQL text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from sqlalchemy import (
    BigInteger,
    Delete,
    Index,
    Insert,
    LargeBinary,
    MetaData,
    Select,
    Table,
    Text,
    Update,
    bindparam,
    case,
    delete,
    func,
    literal_column,
    select,
    text,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import registry
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ClauseElement, ColumnElement
from sqlmodel import Field, SQLModel

from ...model._records import RunStatus
from ._codec import (
    Statement,
    checkpoint_from_row,
    checkpoint_params,
    decode_versions,
    error_json,
    from_us,
    request_from_row,
    request_params,
    run_from_row,
    run_params,
    task_write_from_row,
    to_us,
)
from ._queries import Queries as CompiledQueries
from ._queries import SqlDialect, queries_for

__all__ = [
    "CHANNEL_VALUES",
    "CHECKPOINTS",
    "LOG_CHUNKS",
    "METADATA",
    "REQUESTS",
    "RUNS",
    "STEPS",
    "TASK_WRITES",
    "Queries",
    "SqlDialect",
    "Statement",
    "checkpoint_from_row",
    "checkpoint_params",
    "compile_queries",
    "compile_statement",
    "decode_versions",
    "error_json",
    "from_us",
    "queries_for",
    "request_from_row",
    "request_params",
    "run_from_row",
    "run_params",
    "sqlalchemy_for",
    "task_write_from_row",
    "to_us",
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


RUNS: Table = METADATA.tables["runs"]
CHECKPOINTS: Table = METADATA.tables["checkpoints"]
CHANNEL_VALUES: Table = METADATA.tables["channel_values"]
LOG_CHUNKS: Table = METADATA.tables["log_chunks"]
TASK_WRITES: Table = METADATA.tables["task_writes"]
STEPS: Table = METADATA.tables["steps"]
REQUESTS: Table = METADATA.tables["requests"]

# -- statements -------------------------------------------------------------------


def compile_statement(stmt: ClauseElement, dialect: Dialect) -> Statement:
    """Compile Core once: literals SQLAlchemy turned into binds become constants."""
    compiled = cast(SQLCompiler, stmt.compile(dialect=dialect))
    names = tuple(compiled.positiontup or ())
    constants = {name: bp.value for name, bp in compiled.binds.items()
                 if name in names and not bp.required}
    columns = tuple(str(c.key) for c in stmt.selected_columns) if isinstance(stmt, Select) else ()
    return Statement(compiled.string, names, constants, columns)


def sqlalchemy_for(d: SqlDialect) -> tuple[Dialect, Callable[[Table], sqlite.Insert | postgresql.Insert]]:
    """SQLAlchemy's dialect and INSERT construct for ``d``."""
    if d.name == "postgresql":
        # asyncpg's dialect: ``$1`` parameters; SQLAlchemy leaves its constructor unannotated
        return postgresql.asyncpg.dialect(), postgresql.insert  # type: ignore[no-untyped-call]
    return sqlite.dialect(), sqlite.insert


def _where(table: Table, *names: str) -> list[ColumnElement[bool]]:
    return [table.c[name] == bindparam(name) for name in names]


def _binds(table: Table) -> dict[str, Any]:
    return {c.name: bindparam(c.name) for c in table.c}


def _variants(
    base: Select[Any], filters: Sequence[ColumnElement[bool]]
) -> dict[tuple[bool, ...], Select[Any]]:
    """One query per combination of optional filters, so each can use its index."""
    out: dict[tuple[bool, ...], Select[Any]] = {}
    for mask in range(2 ** len(filters)):
        key = tuple(bool(mask >> i & 1) for i in range(len(filters)))
        out[key] = base.where(*[f for f, on in zip(filters, key, strict=True) if on])
    return out


class Queries(CompiledQueries):
    """Every statement of the store, built with SQLAlchemy Core and compiled for one dialect."""

    def __init__(self, d: SqlDialect) -> None:
        dialect, insert = sqlalchemy_for(d)

        def c(stmt: ClauseElement) -> Statement:
            if d.returning and isinstance(stmt, Insert | Update | Delete):
                stmt = stmt.returning(literal_column("1"))
            return compile_statement(stmt, dialect)

        self._runs(insert, c)
        self._checkpoints(c)
        self._channels(c)
        self._tasks(insert, c)
        self._requests(insert, c)

    def _runs(self, insert: Callable[[Table], Any], c: Callable[[ClauseElement], Statement]) -> None:
        runs = RUNS
        lease = [*_where(runs, "run_id"), runs.c.lease_epoch == bindparam("epoch"),
                 runs.c.lease_owner == bindparam("owner")]
        self.run_insert = c(insert(runs).values(_binds(runs)))
        self.run_get = c(select(runs).where(*_where(runs, "run_id")))
        listing = select(runs).order_by(runs.c.created_at.desc(), runs.c.run_id.desc())
        self.run_list = {k: c(s) for k, s in _variants(listing, [
            runs.c.status == bindparam("status"),
            runs.c.workflow_name == bindparam("workflow_name")]).items()}
        # Only write transactions read the lease, to decide on a write: on
        # PostgreSQL the row stays locked until then (see lease_check).
        self.run_lease = c(select(runs.c.lease_owner, runs.c.lease_epoch,
                                  runs.c.lease_expires_at).where(*_where(runs, "run_id"))
                           .with_for_update())
        self.lease_renew = c(update(runs).where(*lease).values(
            lease_expires_at=bindparam("expires")))
        self.lease_release = c(update(runs).where(*lease).values(
            lease_owner=None, lease_expires_at=None))
        # FOR UPDATE locks the row on PostgreSQL until the write commits; SQLite
        # already holds the database write lock (BEGIN IMMEDIATE) and ignores it.
        self.lease_check = c(select(runs.c.run_id).where(*lease).with_for_update())
        self.run_cancel = c(update(runs).where(*_where(runs, "run_id")).values(
            status=RunStatus.CANCELLED.value, lease_owner=None, lease_expires_at=None,
            lease_epoch=runs.c.lease_epoch + 1, updated_at=bindparam("now")))
        self.run_touch = c(update(runs).where(*lease).values(updated_at=bindparam("now")))
        changes: dict[str, Any] = {
            "updated_at": bindparam("now"), "status": bindparam("new_status"),
            "error": bindparam("new_error"),
            "head_checkpoint_id": func.coalesce(bindparam("new_head"),
                                                runs.c.head_checkpoint_id)}
        self.run_update = c(update(runs).where(*lease).values(changes))
        self.run_update_release = c(update(runs).where(*lease).values(
            {**changes, "lease_owner": None, "lease_expires_at": None}))
        # the same three, refused when the run's head is not the one the commit extends
        head = runs.c.head_checkpoint_id == bindparam("expect_head")
        self.run_touch_cas = c(update(runs).where(*lease, head).values(
            updated_at=bindparam("now")))
        self.run_update_cas = c(update(runs).where(*lease, head).values(changes))
        self.run_update_release_cas = c(update(runs).where(*lease, head).values(
            {**changes, "lease_owner": None, "lease_expires_at": None}))
        # a worker's claim: the oldest runs of one workflow version a worker may take,
        # highest priority first; rows another transaction locked are skipped
        expired = runs.c.lease_expires_at.is_(None) | (runs.c.lease_expires_at < bindparam("now"))
        claimable = (runs.c.status == RunStatus.QUEUED.value) | (
            (runs.c.status == RunStatus.RUNNING.value) & expired)
        self.run_claimable = c(select(runs).where(
            *_where(runs, "workflow_name", "workflow_version"), claimable)
            .order_by(runs.c.priority.desc(), runs.c.created_at, runs.c.run_id)
            .limit(bindparam("n")).with_for_update(skip_locked=True))
        self.run_set_status = c(update(runs).where(*_where(runs, "run_id")).values(
            status=bindparam("new_status"), updated_at=bindparam("now")))
        self.lease_release_requeue = c(update(runs).where(*lease).values(
            lease_owner=None, lease_expires_at=None, updated_at=bindparam("now"),
            status=case((runs.c.status == RunStatus.RUNNING.value, RunStatus.QUEUED.value),
                        else_=runs.c.status)))
        # a claim: the row is locked (FOR UPDATE on PostgreSQL; SQLite holds the
        # database write lock) and updated only if its epoch is still the one read
        self.run_get_locked = c(select(runs).where(*_where(runs, "run_id")).with_for_update())
        self.run_claim = c(update(runs).where(
            *_where(runs, "run_id"), runs.c.lease_epoch == bindparam("old_epoch")).values(
            lease_owner=bindparam("owner"), lease_epoch=bindparam("epoch"),
            lease_expires_at=bindparam("expires"), status=bindparam("new_status"),
            error=bindparam("new_error"), updated_at=bindparam("now")))

    def _checkpoints(self, c: Callable[[ClauseElement], Statement]) -> None:
        cps = CHECKPOINTS
        self.cp_insert = c(cps.insert().values(_binds(cps)))
        self.cp_get = c(select(cps).where(*_where(cps, "run_id", "checkpoint_id")))
        self.cp_head = c(select(cps).where(*_where(cps, "run_id", "thread"))
                         .order_by(cps.c.seq.desc()).limit(1))
        listing = select(cps).where(*_where(cps, "run_id")).order_by(cps.c.checkpoint_id.desc())
        self.cp_list = {k: c(s) for k, s in _variants(
            listing, _where(cps, "namespace") + _where(cps, "thread")).items()}
        self.cp_mark = c(update(cps).where(*_where(cps, "run_id", "checkpoint_id")).values(
            status=bindparam("new_status"), error=bindparam("new_error")))
        self.cp_delete = c(delete(cps).where(*_where(cps, "run_id", "checkpoint_id")))
        # Prune decides from this scan and later reads; on PostgreSQL it locks
        # the rows of the runs it covers (in run_id order, so two prunes cannot
        # deadlock) so that no commit of those runs lands in between.
        scan = (select(cps.c.run_id, cps.c.thread, cps.c.checkpoint_id, cps.c.created_at,
                       cps.c.status)
                .join(RUNS, RUNS.c.run_id == cps.c.run_id)
                .order_by(cps.c.run_id, cps.c.thread, cps.c.seq).with_for_update(of=RUNS))
        self.cp_scan = {k: c(s) for k, s in _variants(scan, _where(cps, "run_id")).items()}
        self.cp_versions = c(select(cps.c.value_versions).where(*_where(cps, "run_id", "thread")))

    def _channels(self, c: Callable[[ClauseElement], Statement]) -> None:
        vals, logs = CHANNEL_VALUES, LOG_CHUNKS
        self.value_insert = c(vals.insert().values(_binds(vals)))
        self.value_get = c(select(vals.c.data).where(
            *_where(vals, "run_id", "thread", "channel", "seq")))
        self.value_keys = c(select(vals.c.channel, vals.c.seq).where(
            *_where(vals, "run_id", "thread")))
        self.value_delete = c(delete(vals).where(
            *_where(vals, "run_id", "thread", "channel", "seq")))
        self.chunk_insert = c(logs.insert().values(_binds(logs)))
        self.chunk_delete_thread = c(delete(logs).where(*_where(logs, "run_id", "thread")))
        self.chunk_upto = c(select(logs.c.channel, logs.c.data).where(
            *_where(logs, "run_id", "thread"), logs.c.seq <= bindparam("upto"))
            .order_by(logs.c.seq, logs.c.channel))

    def _tasks(self, insert: Callable[[Table], Any], c: Callable[[ClauseElement], Statement]) -> None:
        tws, steps = TASK_WRITES, STEPS
        ins = insert(tws)
        self.tw_upsert = c(ins.values(_binds(tws)).on_conflict_do_update(
            index_elements=list(tws.primary_key),
            set_={"data": ins.excluded.data, "created_at": ins.excluded.created_at}))
        self.tw_get = c(select(tws).where(*_where(tws, "run_id", "checkpoint_id"))
                        .order_by(tws.c.node))
        self.tw_delete = c(delete(tws).where(*_where(tws, "run_id", "checkpoint_id")))
        ins = insert(steps)
        self.step_upsert = c(ins.values(_binds(steps)).on_conflict_do_update(
            index_elements=list(steps.primary_key),
            set_={"data": ins.excluded.data, "created_at": ins.excluded.created_at}))
        self.step_get = c(select(steps.c.name, steps.c.data).where(
            *_where(steps, "run_id", "checkpoint_id", "node")))
        self.step_delete = c(delete(steps).where(*_where(steps, "run_id", "checkpoint_id")))

    def _requests(self, insert: Callable[[Table], Any], c: Callable[[ClauseElement], Statement]) -> None:
        reqs = REQUESTS
        is_open = reqs.c.answer.is_(None)
        self.req_insert = c(insert(reqs).values(_binds(reqs)).on_conflict_do_nothing(
            index_elements=list(reqs.primary_key)))
        self.req_answer = c(update(reqs).where(*_where(reqs, "run_id", "request_id")).values(
            answer=bindparam("new_answer"), answered_at=bindparam("now")))
        self.req_get_answer = c(select(reqs.c.answer).where(
            *_where(reqs, "run_id", "request_id")))
        self.req_reopen = c(update(reqs).where(*_where(reqs, "run_id", "request_id")).values(
            answer=None, answered_at=None))
        self.req_drop_open = c(delete(reqs).where(*_where(reqs, "run_id"), is_open))
        listing = select(reqs).where(*_where(reqs, "run_id")).order_by(
            reqs.c.created_at, reqs.c.request_id)
        self.req_list = {k: c(s) for k, s in _variants(
            listing, [is_open, *_where(reqs, "checkpoint_id")]).items()}
        inbox = select(reqs).where(is_open).order_by(
            reqs.c.created_at, reqs.c.run_id, reqs.c.request_id)
        self.req_inbox = {k: c(s) for k, s in _variants(
            inbox, _where(reqs, "workflow_name")).items()}
        self.req_delete = c(delete(reqs).where(*_where(reqs, "run_id", "checkpoint_id")))
        anchors = select(reqs.c.run_id, reqs.c.checkpoint_id).where(is_open).distinct()
        self.req_anchors = {k: c(s) for k, s in _variants(anchors, _where(reqs, "run_id")).items()}


def compile_queries(dialect: SqlDialect) -> Queries:
    """Build and compile every statement for ``dialect`` (what :mod:`._compiled` holds)."""
    return Queries(dialect)
