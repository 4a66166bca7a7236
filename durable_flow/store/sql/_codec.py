"""Rows to records and back: the encoding rules every SQL backend shares.

* times are ``BIGINT`` microseconds since the Unix epoch, UTC: exact for
  :class:`datetime.datetime`, sortable, and free of driver date handling;
* payloads (channel values, log chunks, task writes, steps, request
  payloads and answers) are the engine's orjson bytes, stored as BLOBs;
* small structured metadata (nodes, next tasks, joins, versions, lengths,
  errors, fork origin, the arguments of ``Send`` instances) is JSON text
  written with orjson.

A row that cannot be read back raises ``CheckpointCorruptedError`` naming its
run and checkpoint. A checkpoint row carries ``row_digest`` (migration 0019), a
CRC-32 of its columns as written but ``status`` and ``error``, which a later commit
marks and which ``status_digest`` covers, set with them: a changed item count,
version, next task or digest is damage every read reports, never a state that
loads short.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, get_args

import orjson

from ...errors import CheckpointCorruptedError
from ...model._budget import Budget, RunUsage
from ...model._records import CheckpointRef, CheckpointSource, ErrorInfo, RunStatus
from ...model._serde import as_bytes
from .._protocols import CheckpointMeta, ParkedRow, RequestRow, RunRecord, TaskWrite, WaitKind

__all__ = [
    "checkpoint_from_row",
    "checkpoint_params",
    "decode_versions",
    "error_json",
    "from_us",
    "parked_rows",
    "request_from_row",
    "request_params",
    "requests_from_tuples",
    "row_digest",
    "run_from_row",
    "run_params",
    "status_digest",
    "task_write_from_row",
    "to_us",
]


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


def _count(raw: object) -> int:
    """An integer column a checkpoint counts with (``seq``, ``superstep``, ``size``)."""
    if type(raw) is not int or raw < 0:
        raise TypeError(f"expected a non-negative integer, got {raw!r:.40}")
    return raw


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
        "claim_token": run.claim_token, "start_attempts": run.start_attempts,
        "start_after": _maybe_us(run.start_after),
        "input_tokens": run.usage.input_tokens, "output_tokens": run.usage.output_tokens,
        "usd": run.usage.usd,
        "budget_tokens": None if run.budget is None else run.budget.max_tokens,
        "budget_usd": None if run.budget is None else run.budget.max_usd,
        "started_by": run.started_by,
        "access": access_json(run.operators, run.viewers),
        "audit_count": 0, "audit_head": "", "audit_root": "",  # set with the run's decisions
        "paused_from": None if run.paused_from is None else run.paused_from.value,
        "pause_reason": run.pause_reason, "labels": labels_json(run.labels),
        "concurrency_key": run.concurrency_key, "max_per_key": run.max_per_key,
    }


def access_json(operators: tuple[str, ...], viewers: tuple[str, ...]) -> str | None:
    """The ``runs.access`` column: the roles that operate and read the run (None: none)."""
    if not operators and not viewers:
        return None
    return _dumps({"operators": list(operators), "viewers": list(viewers)})


def _access(raw: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if raw is None:
        return (), ()
    data = orjson.loads(raw)
    if not isinstance(data, dict) or not all(
            isinstance(data.get(k), list) and all(isinstance(n, str) for n in data[k])
            for k in ("operators", "viewers")):
        raise TypeError("access is not a JSON object of operators and viewers role lists")
    return tuple(data["operators"]), tuple(data["viewers"])


def labels_json(labels: Mapping[str, str]) -> str | None:
    """A run's labels as the ``runs.labels`` column holds them (NULL for none)."""
    return _dumps(dict(sorted(labels.items()))) if labels else None


def labels_of(raw: str | None) -> dict[str, str]:
    """A run's labels from its ``runs.labels`` column; ``TypeError`` unless strings to strings."""
    if raw is None:
        return {}
    data = orjson.loads(raw)
    if not isinstance(data, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise TypeError("labels is not a JSON object of strings")
    return data


def _key_of(raw: Any) -> str | None:
    if raw is not None and (not isinstance(raw, str) or not raw):
        raise TypeError("concurrency_key is not a non-empty string")
    return raw


def _per_key_of(raw: Any) -> int | None:
    if raw is not None and (isinstance(raw, bool) or not isinstance(raw, int) or raw < 1):
        raise TypeError("max_per_key is not a positive integer")
    return raw


def budget_of(tokens: Any, usd: Any) -> Budget | None:
    """A run's ``Budget`` from its two columns (both NULL: none)."""
    if tokens is None and usd is None:
        return None
    return Budget(max_tokens=None if tokens is None else int(tokens),
                  max_usd=None if usd is None else float(usd))


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
            claim_token=row["claim_token"], start_attempts=row["start_attempts"],
            start_after=_maybe_from_us(row["start_after"]),
            usage=RunUsage(int(row["input_tokens"]), int(row["output_tokens"]),
                           float(row["usd"])),
            budget=budget_of(row["budget_tokens"], row["budget_usd"]),
            started_by=row.get("started_by"),
            operators=_access(row.get("access"))[0], viewers=_access(row.get("access"))[1],
            paused_from=None if row["paused_from"] is None else _status(row["paused_from"]),
            pause_reason=row["pause_reason"], labels=labels_of(row["labels"]),
            concurrency_key=_key_of(row["concurrency_key"]),
            max_per_key=_per_key_of(row["max_per_key"]),
        )
    except (ValueError, TypeError, KeyError, OverflowError) as exc:
        raise _unreadable(row.get("run_id"), row.get("head_checkpoint_id"), "the run row",
                          exc) from exc


# -- checkpoints ----------------------------------------------------------------------


def checkpoint_params(meta: CheckpointMeta) -> dict[str, object]:
    """The ``checkpoints`` columns of a checkpoint's metadata, its ``row_digest`` last."""
    params: dict[str, object] = {
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
        "task_args": _task_args_json(meta.task_args),
        "parked": _parked_json(meta.parked),
        "digests": _dumps({k: list(v) for k, v in meta.digests.items()}) if meta.digests else None,
    }
    params["row_digest"] = row_digest(params)
    params["status_digest"] = status_digest(meta.run_id, meta.id, params["status"],
                                            params["error"])
    return params


# the columns a checkpoint's digest covers: every one but those a later commit marks
_SEALED = ("run_id", "checkpoint_id", "thread", "namespace", "parent_id", "seq", "superstep",
           "created_at", "source", "nodes", "routing_reason", "next_tasks", "joins",
           "value_versions", "log_lengths", "size", "task_args", "parked", "digests")


def row_digest(row: Mapping[str, Any]) -> int:
    """The CRC-32 of a checkpoint row's sealed columns, as written (text, ints, NULLs)."""
    return zlib.crc32(orjson.dumps([row[c] for c in _SEALED]))


def status_digest(run_id: str, checkpoint_id: str, status: object, error: object) -> int:
    """The CRC-32 of a checkpoint's ``status`` and ``error`` cells, set with them on a mark."""
    return zlib.crc32(orjson.dumps([run_id, checkpoint_id, status, error]))


def _parked_json(parked: Sequence[ParkedRow]) -> str | None:
    """The parked tasks as a JSON list (None when there are none); args spliced in as JSON."""
    if not parked:
        return None
    return orjson.dumps([{"task": p.task, "anchor": p.anchor, "superstep": p.superstep,
                          "arg": orjson.Fragment(p.arg) if p.arg is not None else None,
                          **({"recorded": p.recorded} if p.recorded is not None else {})}
                         for p in parked]).decode()


def parked_rows(raw: str | None) -> tuple[ParkedRow, ...]:
    """The ``checkpoints.parked`` column read back (empty for NULL)."""
    return _parked(raw)


def _parked(raw: str | None) -> tuple[ParkedRow, ...]:
    data = [] if raw is None else orjson.loads(raw)
    if not isinstance(data, list):
        raise TypeError("expected a JSON list")
    return tuple(ParkedRow(task=str(d["task"]), anchor=str(d["anchor"]),
                           superstep=_count(d["superstep"]),
                           arg=None if d.get("arg") is None else orjson.dumps(d["arg"]),
                           recorded=None if d.get("recorded") is None else str(d["recorded"]))
                 for d in data)


def _task_args_json(args: Mapping[str, bytes]) -> str | None:
    """``{task id: arg}`` as JSON text, the args' own bytes spliced in (None when empty)."""
    return (b"{" + b",".join(orjson.dumps(k) + b":" + v for k, v in args.items())
            + b"}").decode() if args else None


def _digests(raw: str | None) -> dict[str, tuple[int, int]]:
    data = {} if raw is None else orjson.loads(raw)
    if not isinstance(data, dict):
        raise TypeError("expected a JSON object")
    out: dict[str, tuple[int, int]] = {}
    for k, v in data.items():
        if not (type(v) is list and len(v) == 2 and all(type(x) is int and x >= 0 for x in v)):
            raise TypeError("expected [crc32, length] pairs")
        out[str(k)] = (v[0], v[1])
    return out


def _task_args(raw: str | None) -> dict[str, bytes]:
    data = {} if raw is None else orjson.loads(raw)
    if not isinstance(data, dict):
        raise TypeError("expected a JSON object")
    return {str(k): orjson.dumps(v) for k, v in data.items()}


_CHECKPOINT_DECODERS: dict[str, Callable[[Any], object]] = {
    "seq": _count, "superstep": _count, "size": _count, "created_at": from_us,
    "status": _status, "source": _source, "nodes": _str_tuple,
    "next_tasks": _str_tuple, "joins": _joins, "value_versions": _int_map,
    "log_lengths": _int_map, "error": _decode_error, "task_args": _task_args,
    "parked": _parked,
    "digests": _digests,
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
    # every cell reads: the row as a whole must be the one written
    sealed = row.get("row_digest")
    if sealed is not None:  # NULL: written before migration 0019
        try:
            same = row_digest(row) == sealed
        except (TypeError, KeyError) as exc:  # a cell a driver hands back as no JSON type
            raise CheckpointCorruptedError(
                run_id, checkpoint_id, f"the checkpoint row cannot be read: {exc}") from exc
        if same and row.get("status_digest") is not None:
            same = status_digest(run_id, checkpoint_id, row["status"],
                                 row["error"]) == row["status_digest"]
        if not same:
            raise CheckpointCorruptedError(
                run_id, checkpoint_id,
                "the checkpoint row does not match its digest: a column was changed after "
                "it was written")
    return CheckpointMeta(
        id=checkpoint_id, run_id=run_id, thread=row["thread"], namespace=row["namespace"],
        parent_id=row["parent_id"], routing_reason=row["routing_reason"],
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
        "approval": req.approval, "parked": req.parked,
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
            approval=_maybe_blob(row["approval"]), parked=bool(row.get("parked", False)),
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
                expires_at=_maybe_from_us(r[due]), approval=_maybe_blob(r[at["approval"]]),
                parked=bool(r[at["parked"]]) if "parked" in at else False)
                for r in rows]
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
