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

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any, cast, get_args

import orjson
from sqlalchemy import (
    Delete,
    Insert,
    Select,
    Table,
    Update,
    bindparam,
    case,
    delete,
    func,
    literal_column,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ClauseElement, ColumnElement

from ...errors import CheckpointCorruptedError
from ...model._records import CheckpointRef, CheckpointSource, ErrorInfo, RunStatus
from ...model._serde import as_bytes
from .._protocols import CheckpointMeta, RequestRow, RunRecord, TaskWrite, WaitKind
from ._schema import METADATA

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
    "compile_statement",
    "decode_versions",
    "error_json",
    "from_us",
    "queries_for",
    "request_from_row",
    "request_params",
    "run_from_row",
    "run_params",
    "task_write_from_row",
    "to_us",
]

RUNS: Table = METADATA.tables["runs"]
CHECKPOINTS: Table = METADATA.tables["checkpoints"]
CHANNEL_VALUES: Table = METADATA.tables["channel_values"]
LOG_CHUNKS: Table = METADATA.tables["log_chunks"]
TASK_WRITES: Table = METADATA.tables["task_writes"]
STEPS: Table = METADATA.tables["steps"]
REQUESTS: Table = METADATA.tables["requests"]

# -- time -----------------------------------------------------------------------

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def to_us(moment: datetime) -> int:
    """Microseconds since the epoch; a naive datetime is taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _MICROSECOND


def from_us(micros: int) -> datetime:
    """Inverse of :func:`to_us`: an aware UTC datetime."""
    if not isinstance(micros, int) or isinstance(micros, bool):
        raise TypeError(f"expected integer microseconds, got {type(micros).__name__}")
    return _EPOCH + timedelta(microseconds=micros)


def _maybe_us(moment: datetime | None) -> int | None:
    return None if moment is None else to_us(moment)


def _maybe_from_us(micros: int | None) -> datetime | None:
    return None if micros is None else from_us(micros)


# -- JSON metadata ----------------------------------------------------------------

_SOURCES = frozenset(get_args(CheckpointSource))
_KINDS = frozenset(get_args(WaitKind))


def _dumps(value: object) -> str:
    return orjson.dumps(value).decode()


def error_json(error: ErrorInfo | None) -> str | None:
    """The JSON text of an optional error."""
    return None if error is None else _dumps(error.to_dict())


def _decode_error(raw: str | None) -> ErrorInfo | None:
    if raw is None:
        return None
    data = orjson.loads(raw)
    if not isinstance(data, dict) or not all(
            isinstance(data.get(k), str) for k in ("type", "message")) or not all(
            isinstance(data.get(k), str | None) for k in ("node", "traceback")):
        raise TypeError("error is not a JSON object of type, message, node and traceback")
    return ErrorInfo.from_dict(data)


def _strings(data: object) -> tuple[str, ...]:
    if not isinstance(data, list) or not all(isinstance(x, str) for x in data):
        raise TypeError("expected a JSON array of strings")
    return tuple(data)


def _str_tuple(raw: str) -> tuple[str, ...]:
    return _strings(orjson.loads(raw))


def _int_map(raw: str) -> dict[str, int]:
    data = orjson.loads(raw)
    if not isinstance(data, dict) or not all(type(v) is int and v >= 0 for v in data.values()):
        raise TypeError("expected a JSON object of non-negative integers")
    return {str(k): int(v) for k, v in data.items()}


def _joins(raw: str) -> dict[str, tuple[str, ...]]:
    data = orjson.loads(raw)
    if not isinstance(data, dict):
        raise TypeError("expected a JSON object")
    return {str(k): _strings(v) for k, v in data.items()}


def _status(raw: str) -> RunStatus:
    return RunStatus(raw)


def _source(raw: str) -> CheckpointSource:
    if raw not in _SOURCES:
        raise ValueError(f"unknown source {raw!r}")
    return raw  # type: ignore[return-value]  # narrowed by the membership test


def decode_versions(raw: str) -> dict[str, int]:
    """Decode a ``value_versions`` column (used by prune's sweep)."""
    return _int_map(raw)


# -- runs -----------------------------------------------------------------------


def run_params(run: RunRecord) -> dict[str, object]:
    """The ``runs`` columns of a record."""
    origin = run.forked_from
    return {
        "run_id": run.run_id, "workflow_name": run.workflow_name,
        "status": run.status.value, "created_at": to_us(run.created_at),
        "updated_at": to_us(run.updated_at), "head_checkpoint_id": run.head_checkpoint_id,
        "signature": run.signature, "max_supersteps": run.max_supersteps,
        "error": error_json(run.error),
        "forked_from": None if origin is None else _dumps(
            {"run_id": origin.run_id, "checkpoint_id": origin.checkpoint_id}),
        "workflow_ref": run.workflow_ref, "input_digest": run.input_digest,
        "workflow_version": run.workflow_version, "priority": run.priority,
        "wake_at": _maybe_us(run.wake_at),
        "lease_owner": run.lease_owner,
        "lease_epoch": run.lease_epoch, "lease_expires_at": _maybe_us(run.lease_expires_at),
    }


def _forked_from(raw: str | None) -> CheckpointRef | None:
    if raw is None:
        return None
    data = orjson.loads(raw)
    if not isinstance(data, dict) or not all(
            isinstance(data.get(k), str) for k in ("run_id", "checkpoint_id")):
        raise TypeError("forked_from is not a JSON object of run_id and checkpoint_id")
    return CheckpointRef(run_id=data["run_id"], checkpoint_id=data["checkpoint_id"])


def _maybe_blob(value: object) -> bytes | None:
    return None if value is None else as_bytes(value)


def _unreadable(run_id: object, checkpoint_id: object, what: str,
                exc: BaseException) -> CheckpointCorruptedError:
    return CheckpointCorruptedError(str(run_id), str(checkpoint_id or "-"),
                                    f"{what} cannot be read: {type(exc).__name__}: {exc}")


def run_from_row(row: Mapping[str, Any]) -> RunRecord:
    """Rebuild a :class:`RunRecord`; raises ``CheckpointCorruptedError`` naming run and head."""
    try:
        return RunRecord(
            run_id=row["run_id"], workflow_name=row["workflow_name"],
            status=_status(row["status"]), created_at=from_us(row["created_at"]),
            updated_at=from_us(row["updated_at"]),
            head_checkpoint_id=row["head_checkpoint_id"], signature=row["signature"],
            max_supersteps=row["max_supersteps"], error=_decode_error(row["error"]),
            forked_from=_forked_from(row["forked_from"]), workflow_ref=row["workflow_ref"],
            input_digest=row["input_digest"], workflow_version=row["workflow_version"],
            priority=row["priority"], wake_at=_maybe_from_us(row["wake_at"]),
            lease_owner=row["lease_owner"], lease_epoch=row["lease_epoch"],
            lease_expires_at=_maybe_from_us(row["lease_expires_at"]),
        )
    except (ValueError, TypeError, KeyError, OverflowError) as exc:
        raise _unreadable(row.get("run_id"), row.get("head_checkpoint_id"), "the run row",
                          exc) from exc


# -- checkpoints ----------------------------------------------------------------------


def checkpoint_params(meta: CheckpointMeta) -> dict[str, object]:
    """The ``checkpoints`` columns of a checkpoint's metadata."""
    return {
        "run_id": meta.run_id, "checkpoint_id": meta.id, "thread": meta.thread,
        "namespace": meta.namespace, "parent_id": meta.parent_id, "seq": meta.seq,
        "superstep": meta.superstep, "created_at": to_us(meta.created_at),
        "status": meta.status.value, "source": meta.source,
        "nodes": _dumps(list(meta.nodes)), "routing_reason": meta.routing_reason,
        "next_tasks": _dumps(list(meta.next_tasks)),
        "joins": _dumps({k: list(v) for k, v in meta.joins.items()}),
        "value_versions": _dumps(meta.value_versions),
        "log_lengths": _dumps(meta.log_lengths),
        "error": error_json(meta.error), "size": meta.size,
    }


_CHECKPOINT_DECODERS: dict[str, Callable[[Any], object]] = {
    "created_at": from_us, "status": _status, "source": _source, "nodes": _str_tuple,
    "next_tasks": _str_tuple, "joins": _joins, "value_versions": _int_map,
    "log_lengths": _int_map, "error": _decode_error,
}


def checkpoint_from_row(row: Mapping[str, Any]) -> CheckpointMeta:
    """Rebuild :class:`CheckpointMeta`; raises ``CheckpointCorruptedError``."""
    run_id, checkpoint_id = row["run_id"], row["checkpoint_id"]
    decoded: dict[str, object] = {}
    for column, decode in _CHECKPOINT_DECODERS.items():
        try:
            decoded[column] = decode(row[column])
        except (ValueError, TypeError, KeyError, OverflowError) as exc:
            raise CheckpointCorruptedError(
                run_id, checkpoint_id, f"column {column!r} cannot be read: {exc}") from exc
    return CheckpointMeta(
        id=checkpoint_id, run_id=run_id, thread=row["thread"], namespace=row["namespace"],
        parent_id=row["parent_id"], seq=row["seq"], superstep=row["superstep"],
        routing_reason=row["routing_reason"], size=row["size"],
        **decoded,  # type: ignore[arg-type]  # each decoder returns its field's type
    )


# -- requests and task writes -------------------------------------------------------


def request_params(req: RequestRow, run_id: str) -> dict[str, object]:
    """The ``requests`` columns of a request saved under ``run_id``."""
    return {
        "run_id": run_id, "request_id": req.id, "workflow_name": req.workflow_name,
        "thread": req.thread, "checkpoint_id": req.checkpoint_id, "node": req.node,
        "request_index": req.index, "payload": req.payload,
        "response_schema": req.response_schema, "created_at": to_us(req.created_at),
        "answer": req.answer, "answered_at": _maybe_us(req.answered_at), "kind": req.kind,
        "expires_at": _maybe_us(req.expires_at), "timed_out": req.timed_out,
    }


def _kind(raw: str) -> WaitKind:
    if raw not in _KINDS:
        raise ValueError(f"unknown kind of wait {raw!r}")
    return raw  # type: ignore[return-value]  # narrowed by the membership test


def request_from_row(row: Mapping[str, Any]) -> RequestRow:
    """Rebuild a :class:`RequestRow`; raises ``CheckpointCorruptedError``."""
    try:
        return RequestRow(
            id=row["request_id"], run_id=row["run_id"], workflow_name=row["workflow_name"],
            thread=row["thread"], checkpoint_id=row["checkpoint_id"], node=row["node"],
            index=row["request_index"], payload=as_bytes(row["payload"]),
            response_schema=as_bytes(row["response_schema"]),
            created_at=from_us(row["created_at"]), answer=_maybe_blob(row["answer"]),
            answered_at=_maybe_from_us(row["answered_at"]), kind=_kind(row["kind"]),
            expires_at=_maybe_from_us(row["expires_at"]), timed_out=bool(row["timed_out"]),
        )
    except (ValueError, TypeError, KeyError, OverflowError) as exc:
        raise _unreadable(row.get("run_id"), row.get("checkpoint_id"),
                          f"request {row.get('request_id')!r}", exc) from exc


def requests_from_tuples(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[RequestRow]:
    """Rebuild many :class:`RequestRow` from raw result tuples in ``columns`` order.

    The inbox can be long, so rows are built inline; any unreadable row is
    rebuilt through :func:`request_from_row` to name it.
    """
    at = {name: i for i, name in enumerate(columns)}
    rid, run, wf, thread, cp, node, idx, payload, schema, created, answer, answered, due = (
        at[n] for n in ("request_id", "run_id", "workflow_name", "thread", "checkpoint_id", "node",
                        "request_index", "payload", "response_schema", "created_at", "answer",
                        "answered_at", "expires_at"))
    rows = list(rows)
    # the inbox holds open requests to people: answers are None, the kind is "request"
    if all(type(r[payload]) is bytes and type(r[schema]) is bytes and r[answer] is None
           and r[at["kind"]] == "request" for r in rows):
        try:
            return [RequestRow(
                id=r[rid], run_id=r[run], workflow_name=r[wf], thread=r[thread],
                checkpoint_id=r[cp], node=r[node], index=r[idx], payload=r[payload],
                response_schema=r[schema], created_at=from_us(r[created]),
                answer=None, answered_at=_maybe_from_us(r[answered]),
                expires_at=_maybe_from_us(r[due])) for r in rows]
        except (ValueError, TypeError, OverflowError):
            pass  # rebuilt one by one below, so the damaged row is named
    return [request_from_row(dict(zip(columns, r, strict=True))) for r in rows]


def task_write_from_row(row: Mapping[str, Any]) -> TaskWrite:
    """Rebuild a :class:`TaskWrite`; raises ``CheckpointCorruptedError``."""
    try:
        return TaskWrite(run_id=row["run_id"], checkpoint_id=row["checkpoint_id"],
                         node=row["node"], data=as_bytes(row["data"]),
                         created_at=from_us(row["created_at"]))
    except (ValueError, TypeError, KeyError, OverflowError) as exc:
        raise _unreadable(row.get("run_id"), row.get("checkpoint_id"),
                          f"the task write of {row.get('node')!r}", exc) from exc


# -- statements -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Statement:
    """A compiled statement: SQL text and the order of its named parameters."""

    sql: str
    names: tuple[str, ...]
    constants: Mapping[str, object]
    columns: tuple[str, ...] = ()

    def bind(self, params: Mapping[str, object]) -> tuple[object, ...]:
        """Positional parameters, in SQL order, from named ones."""
        if self.constants:
            params = {**self.constants, **params}
        return tuple([params[name] for name in self.names])


def compile_statement(stmt: ClauseElement, dialect: Dialect) -> Statement:
    """Compile Core once: literals SQLAlchemy turned into binds become constants."""
    compiled = cast(SQLCompiler, stmt.compile(dialect=dialect))
    names = tuple(compiled.positiontup or ())
    constants = {name: bp.value for name, bp in compiled.binds.items()
                 if name in names and not bp.required}
    columns = tuple(str(c.key) for c in stmt.selected_columns) if isinstance(stmt, Select) else ()
    return Statement(compiled.string, names, constants, columns)


@dataclass(frozen=True, slots=True)
class SqlDialect:
    """What differs between SQL backends at the statement level.

    ``returning``: every INSERT, UPDATE and DELETE ends in ``RETURNING 1``,
    one row per row it changed, for a driver whose batch call reports no row
    count (asyncpg's ``executemany``): it counts the rows instead.
    """

    dialect: Dialect
    insert: Callable[[Table], sqlite.Insert | postgresql.Insert]
    returning: bool = False


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


class Queries:
    """Every statement of the store, compiled for one dialect."""

    def __init__(self, d: SqlDialect) -> None:
        self.dialect = d

        def c(stmt: ClauseElement) -> Statement:
            if d.returning and isinstance(stmt, Insert | Update | Delete):
                stmt = stmt.returning(literal_column("1"))
            return compile_statement(stmt, d.dialect)

        self._runs(d, c)
        self._checkpoints(c)
        self._channels(c)
        self._tasks(d, c)
        self._requests(d, c)

    def _runs(self, d: SqlDialect, c: Callable[[ClauseElement], Statement]) -> None:
        runs = RUNS
        lease = [*_where(runs, "run_id"), runs.c.lease_epoch == bindparam("epoch"),
                 runs.c.lease_owner == bindparam("owner")]
        self.run_insert = c(d.insert(runs).values(_binds(runs)))
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
            lease_epoch=runs.c.lease_epoch + 1, updated_at=bindparam("now"), wake_at=None))
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
            status=bindparam("new_status"), updated_at=bindparam("now"), wake_at=None))
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
            error=bindparam("new_error"), updated_at=bindparam("now"),
            wake_at=bindparam("new_wake")))

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

    def _tasks(self, d: SqlDialect, c: Callable[[ClauseElement], Statement]) -> None:
        tws, steps = TASK_WRITES, STEPS
        ins = d.insert(tws)
        self.tw_upsert = c(ins.values(_binds(tws)).on_conflict_do_update(
            index_elements=list(tws.primary_key),
            set_={"data": ins.excluded.data, "created_at": ins.excluded.created_at}))
        self.tw_get = c(select(tws).where(*_where(tws, "run_id", "checkpoint_id"))
                        .order_by(tws.c.node))
        self.tw_delete = c(delete(tws).where(*_where(tws, "run_id", "checkpoint_id")))
        ins = d.insert(steps)
        self.step_upsert = c(ins.values(_binds(steps)).on_conflict_do_update(
            index_elements=list(steps.primary_key),
            set_={"data": ins.excluded.data, "created_at": ins.excluded.created_at}))
        self.step_get = c(select(steps.c.name, steps.c.data).where(
            *_where(steps, "run_id", "checkpoint_id", "node")))
        self.step_delete = c(delete(steps).where(*_where(steps, "run_id", "checkpoint_id")))

    def _requests(self, d: SqlDialect, c: Callable[[ClauseElement], Statement]) -> None:
        reqs = REQUESTS
        is_open = reqs.c.answer.is_(None)
        self.req_insert = c(d.insert(reqs).values(_binds(reqs)).on_conflict_do_nothing(
            index_elements=list(reqs.primary_key)))
        self.req_answer = c(update(reqs).where(*_where(reqs, "run_id", "request_id")).values(
            answer=bindparam("new_answer"), answered_at=bindparam("now")))
        self.req_get = c(select(reqs).where(*_where(reqs, "run_id", "request_id")))
        self.req_reopen = c(update(reqs).where(*_where(reqs, "run_id", "request_id")).values(
            answer=None, answered_at=None))
        self.req_drop_open = c(delete(reqs).where(*_where(reqs, "run_id"), is_open))
        listing = select(reqs).where(*_where(reqs, "run_id")).order_by(
            reqs.c.created_at, reqs.c.request_id)
        self.req_list = {k: c(s) for k, s in _variants(
            listing, [is_open, *_where(reqs, "checkpoint_id")]).items()}
        inbox = select(reqs).where(is_open, reqs.c.kind == "request", reqs.c.expires_at.is_(None)
                                   | (reqs.c.expires_at > bindparam("now"))).order_by(
            reqs.c.created_at, reqs.c.run_id, reqs.c.request_id)
        self.req_inbox = {k: c(s) for k, s in _variants(
            inbox, _where(reqs, "workflow_name")).items()}
        self.req_delete = c(delete(reqs).where(*_where(reqs, "run_id", "checkpoint_id")))
        anchors = select(reqs.c.run_id, reqs.c.checkpoint_id).where(is_open).distinct()
        self.req_anchors = {k: c(s) for k, s in _variants(anchors, _where(reqs, "run_id")).items()}


@cache
def queries_for(dialect: SqlDialect) -> Queries:
    """The compiled statements of a dialect (compiled on first use, then shared)."""
    return Queries(dialect)
