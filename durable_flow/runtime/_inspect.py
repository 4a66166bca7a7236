"""Read-only views of runs: snapshots, history, run listings, the inbox.

Listing runs needs neither the engine nor pydantic: decoding checkpoints and
requests (``engine/_state.py``) is imported by the views that decode.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import orjson

from ..errors import (
    CheckpointCorruptedError,
    CheckpointNotFoundError,
    InvalidInputError,
    RunNotFoundError,
)
from ..model._approvals import default_title
from ..model._clock import utcnow
from ..model._records import (
    CheckpointInfo,
    ParkedKind,
    ParkedTask,
    PendingRequest,
    RunInfo,
    RunStatus,
    Snapshot,
)
from ..model._serde import as_bytes, decode
from ..store._approval_rows import approval_of
from ..store._protocols import CheckpointMeta, CheckpointStore, RequestRow, RunRecord
from ..store._rows import escalation_due
from ._signals import signals_for

__all__ = ["Inspector", "asks", "response_schema", "settled", "to_pending"]


def asks(rows: list[RequestRow]) -> list[RequestRow]:
    """The requests a person can answer now among recorded waits.

    Timers and event waits are no one's to answer, nor a request past its
    deadline, unless it escalates and was not escalated yet.
    """
    now = utcnow()
    return [r for r in rows if r.kind == "request" and r.answer is None
            and (r.expires_at is None or r.expires_at > now or escalation_due(r))]


def to_pending(row: RequestRow, schemas: dict[bytes, dict[str, Any]] | None = None
               ) -> PendingRequest:
    """The public view of a request row; damaged data raises ``CheckpointCorruptedError``.

    ``schemas`` caches decoded response schemas across a listing: an inbox of
    thousands of requests usually holds a handful of distinct schemas.
    """
    try:
        if schemas is None:
            schema = response_schema(row.response_schema)
        elif (cached := schemas.get(row.response_schema)) is not None:
            schema = cached
        else:
            schema = schemas[row.response_schema] = response_schema(row.response_schema)
        payload = decode(row.payload)
        approval = approval_of(row)
    except Exception as exc:
        from ..engine import DAMAGE, corrupted  # imported when data is damaged

        if isinstance(exc, DAMAGE):
            raise corrupted(row.run_id, row.checkpoint_id, exc, f"request {row.id!r}") from None
        raise
    return PendingRequest(
        id=row.id, run_id=row.run_id, node=row.node, payload=payload,
        response_schema=schema, created_at=row.created_at, workflow_name=row.workflow_name,
        expires_at=row.expires_at, title=approval.title or default_title(payload, row.node),
        assignees=approval.assignees, roles=approval.roles, escalated=approval.escalated)


def response_schema(data: bytes) -> dict[str, Any]:
    """A stored response schema (a JSON object); ``ValueError`` if it is not one."""
    schema = orjson.loads(as_bytes(data))
    if not isinstance(schema, dict):
        raise ValueError(f"the response schema is a {type(schema).__name__}, not an object")
    return schema


def to_info(meta: CheckpointMeta) -> CheckpointInfo:
    """The public view of checkpoint metadata."""
    return CheckpointInfo(
        id=meta.id, run_id=meta.run_id, namespace=meta.namespace, parent_id=meta.parent_id,
        superstep=meta.superstep, created_at=meta.created_at, status=meta.status,
        source=meta.source, nodes=meta.nodes, routing_reason=meta.routing_reason,
        size=meta.size, parked=tuple(p.task for p in meta.parked))


class Inspector:
    """Builds snapshots and listings from a store; needs no workflow code."""

    def __init__(self, store: CheckpointStore) -> None:
        self.store = store

    async def record(self, run_id: str) -> RunRecord:
        """The run row or ``RunNotFoundError``."""
        record = await self.store.get_run(run_id)
        if record is None:
            raise RunNotFoundError(run_id)
        return record

    @staticmethod
    def info(record: RunRecord) -> RunInfo:
        """The public view of a run row."""
        return RunInfo(
            run_id=record.run_id, workflow_name=record.workflow_name, status=record.status,
            created_at=record.created_at, updated_at=record.updated_at,
            head_checkpoint_id=record.head_checkpoint_id, error=record.error,
            forked_from=record.forked_from, workflow_ref=record.workflow_ref,
            workflow_version=record.workflow_version, wake_at=record.wake_at,
            priority=record.priority, usage=record.usage, budget=record.budget,
            started_by=record.started_by,
            pause_reason=record.pause_reason if record.status is RunStatus.PAUSED else None,
            labels=dict(record.labels), concurrency_key=record.concurrency_key)

    async def runs(self, status: RunStatus | str | None, workflow: str | None,
                   labels: Mapping[str, str] | None = None, since: datetime | None = None,
                   until: datetime | None = None, limit: int | None = None) -> list[RunInfo]:
        """Runs, newest first."""
        from ._fleet import check_labels, run_filters

        st = run_filters(status, workflow, since, until, limit)
        found = await self.store.list_runs(status=st, workflow_name=workflow,
                                           labels=check_labels(labels) or None, since=since,
                                           until=until, limit=limit)
        return [self.info(r) for r in found]

    async def history(self, run_id: str, namespace: str, limit: int | None = None,
                      before: str | None = None) -> list[CheckpointInfo]:
        """Checkpoint infos of one namespace, newest first; ``before`` and ``limit`` page it."""
        _check_history_args(run_id, namespace, limit, before)
        await self.record(run_id)
        if before is not None:
            mark = await self.store.get_checkpoint(run_id, before)
            if mark is None or mark.namespace != namespace:
                raise CheckpointNotFoundError(run_id, before)
        # one page read from the store (an index range), however long the run
        metas = await self.store.list_checkpoints(run_id, namespace=namespace, before=before,
                                                  limit=limit)
        return [to_info(m) for m in metas]

    async def snapshot(self, run_id: str, checkpoint_id: str | None, namespace: str) -> Snapshot:
        """The state at a checkpoint, nested sub-workflows included."""
        record = await self.record(run_id)
        meta = await self._locate(record, checkpoint_id, namespace)
        if meta.thread == "" and meta.id == record.head_checkpoint_id:
            return await self._snapshot(record, meta)
        then = _Then(self.store, run_id, meta.created_at)
        if meta.thread and not await then.children(meta.id):
            return await self._snapshot(record, meta)  # the head of a sub-workflow's history
        then.rows = await self.store.get_requests(run_id)
        return await self._snapshot(record, meta, then=then)

    async def _locate(self, record: RunRecord, checkpoint_id: str | None,
                      namespace: str) -> CheckpointMeta:
        meta: CheckpointMeta | None
        if checkpoint_id is not None:
            meta = await self.store.get_checkpoint(record.run_id, checkpoint_id)
        elif namespace == "":
            head = record.head_checkpoint_id or ""
            meta = await self.store.get_checkpoint(record.run_id, head)
            if meta is None:
                raise CheckpointCorruptedError(record.run_id, head or "-",
                                               "the run's head checkpoint is missing")
        else:
            metas = await self.store.list_checkpoints(record.run_id, namespace=namespace, limit=1)
            meta = metas[0] if metas else None
        if meta is None:
            raise CheckpointNotFoundError(record.run_id, checkpoint_id or f"<head of {namespace!r}>")
        return meta

    async def _snapshot(self, record: RunRecord, meta: CheckpointMeta,
                        prefix: str = "", then: _Then | None = None) -> Snapshot:
        from ..engine import plain_state

        loaded = await self.store.load_checkpoint(record.run_id, meta.id)
        values, histories = await plain_state(loaded)  # a row at a time: other tasks run
        is_head = meta.thread == "" and meta.id == record.head_checkpoint_id
        subs: dict[str, Snapshot] = {}
        threads = [(node, meta.id, f"{prefix}{node}@{meta.superstep + 1}/")
                   for node in meta.next_tasks]
        threads += [(p.task, p.anchor, f"{prefix}{p.task}@{p.superstep}/") for p in meta.parked]
        for node, anchor, inner in threads:
            head = await self.store.thread_head(record.run_id, f"{anchor}/{node}")
            if head is not None and head.status is not RunStatus.COMPLETED:
                subs[node] = await self._snapshot(record, head, inner, then)
        parked, waits = await parked_tasks(self.store, meta, prefix)
        if then is None:
            own = await self.store.get_requests(record.run_id, open_only=True,
                                                checkpoint_id=meta.id)
            pending = [to_pending(r) for r in asks([*own, *waits])]
        else:
            pending = [to_pending(r) for r in await then.asked(meta)]
        for sub in subs.values():
            pending.extend(sub.pending_requests)
        return Snapshot(
            run_id=record.run_id, checkpoint_id=meta.id, superstep=meta.superstep,
            status=record.status if is_head else meta.status, values=values,
            error=(record.error if is_head else None) or meta.error,
            node_histories=histories, next_tasks=meta.next_tasks,
            pending_requests=tuple(pending), subworkflows=subs, namespace=meta.namespace,
            created_at=meta.created_at, parked=parked)


class _Then:
    """What was open at an older checkpoint: the requests answered after ``at`` or never.

    A checkpoint's own requests are those its superstep asked before the next
    checkpoint was written; a parked task's, those asked before the checkpoint
    (``ParkedTask.waits_for`` as it was). A superstep's rows move with it when
    a run goes on from a copy of its checkpoint (a ``"resume"`` child, same
    superstep): they are looked up at the checkpoint and at each such copy.
    A checkpoint's children are read from the store's index when needed
    (``child_checkpoints``), never the run's whole history.
    """

    def __init__(self, store: CheckpointStore, run_id: str, at: datetime) -> None:
        self.store, self.run_id, self.at = store, run_id, at
        self.rows: list[RequestRow] = []
        self._children: dict[str, list[CheckpointMeta]] = {}

    async def children(self, checkpoint_id: str) -> list[CheckpointMeta]:
        """The checkpoints written on ``checkpoint_id`` (read once)."""
        found = self._children.get(checkpoint_id)
        if found is None:
            found = await self.store.child_checkpoints(self.run_id, checkpoint_id)
            self._children[checkpoint_id] = found
        return found

    async def _end(self, checkpoint_id: str) -> datetime | None:
        """When the first checkpoint after ``checkpoint_id`` was written (None: none yet)."""
        return min((m.created_at for m in await self.children(checkpoint_id)), default=None)

    async def _moved(self, checkpoint_id: str) -> set[str]:
        """``checkpoint_id`` and the copies a run went on from, copies of copies too."""
        out, todo = set(), [checkpoint_id]
        while todo:
            if (cid := todo.pop()) not in out:
                out.add(cid)
                todo += [m.id for m in await self.children(cid) if m.source == "resume"]
        return out

    async def asked(self, meta: CheckpointMeta) -> list[RequestRow]:
        """The requests to people of ``meta``'s tasks and parked tasks open at ``at``."""
        quals: dict[str, set[str]] = {meta.id: set()}
        for p in meta.parked:
            names = {f"{meta.namespace}.{n}" if meta.namespace else n for n in p.names}
            quals.setdefault(p.anchor, set()).update(names)
        found: dict[str, RequestRow] = {}
        for anchor, nodes in quals.items():
            ids, own = await self._moved(anchor), anchor == meta.id
            end = await self._end(meta.id) if own else meta.created_at
            for r in self.rows:
                if (r.checkpoint_id in ids and r.kind == "request"
                        and (own or r.node in nodes)
                        and (end is None or r.created_at <= end)
                        and (r.answered_at is None or r.answered_at > self.at)):
                    found.setdefault(r.id, r)
        return sorted(found.values(), key=lambda r: (r.created_at, r.id))


def _check_history_args(run_id: object, namespace: object, limit: object,
                        before: object) -> None:
    if not isinstance(run_id, str):
        raise InvalidInputError(f"run_id must be a string, got {run_id!r}")
    if not isinstance(namespace, str):
        raise InvalidInputError(f"namespace must be a string, got {namespace!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InvalidInputError(f"limit must be a positive int, got {limit!r}")
    if before is not None and not isinstance(before, str):
        raise InvalidInputError(f"before must be a checkpoint id, got {before!r}")


async def settled(store: CheckpointStore, inspect: Inspector, run_id: str,
                  limit: float | None) -> RunInfo:
    """Poll the run until it is waiting, completed, failed or cancelled (``Runtime.wait``).

    A ``submit``/``respond`` of this process wakes the poll early; ``TimeoutError``
    after ``limit`` seconds (None: no limit).
    """
    from ._inputs import SETTLED

    loop = asyncio.get_running_loop()
    deadline = None if limit is None else loop.time() + limit
    delay = 0.01
    while True:
        record = await store.get_run(run_id)
        if record is None:
            raise RunNotFoundError(run_id)
        if record.status in SETTLED:
            return inspect.info(record)
        left = None if deadline is None else deadline - loop.time()
        if left is not None and left <= 0:
            raise TimeoutError(f"run {run_id} is still {record.status.value} after {limit:g}s")
        await signals_for(store).wait(delay if left is None else min(delay, left))
        delay = min(delay * 1.5, 0.5)


def _event_name(row: RequestRow) -> str:
    """The name of the event an event wait waits for (stored as its payload)."""
    name = decode(row.payload)
    return name if isinstance(name, str) else str(name)


async def parked_tasks(store: CheckpointStore, meta: CheckpointMeta,
                       prefix: str) -> tuple[tuple[ParkedTask, ...], list[RequestRow]]:
    """``Snapshot.parked`` of a checkpoint, and the open waits of its plain parked tasks.

    A plain task's waits are recorded at its anchor under its path; a
    sub-workflow node's are the waits inside it (their ids start with the
    node's request prefix), listed in its nested snapshot. ``waits_for``
    holds the waits open when the checkpoint was written; the plain tasks'
    waits returned are those still open (pending) now.
    """
    if not meta.parked:
        return (), []
    at = meta.created_at
    rows = [r for r in await store.get_requests(meta.run_id)
            if r.created_at <= at and (r.answered_at is None or r.answered_at > at)]
    out: list[ParkedTask] = []
    plain: list[RequestRow] = []
    for p in meta.parked:
        inside = f"{prefix}{p.task}@{p.superstep}/"
        quals = {f"{meta.namespace}.{n}" if meta.namespace else n for n in p.names}
        mine = [r for r in rows if r.checkpoint_id == p.anchor and r.node in quals]
        plain += [r for r in mine if r.answer is None]
        mine += [r for r in rows if r.id.startswith(inside)]
        kinds = {r.kind for r in mine}
        kind: ParkedKind = "event" if "request" not in kinds and "event" in kinds else \
            "timer" if kinds == {"timer"} else "request"
        due = [r.expires_at for r in mine if r.expires_at is not None]
        out.append(ParkedTask(node=p.task, kind=kind,
                              waits_for=tuple(r.id for r in mine),
                              since_superstep=p.superstep, wake_at=min(due, default=None),
                              events=tuple(_event_name(r) for r in mine if r.kind == "event")))
    return tuple(out), plain
