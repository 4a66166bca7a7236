"""The JSON API's bodies: pydantic models, so ``/api/openapi.json`` describes them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from ..model._decisions import Decision
from ..model._records import (
    CheckpointInfo,
    ErrorInfo,
    ParkedTask,
    PendingRequest,
    RunInfo,
    RunStatus,
    Snapshot,
)
from ._views import plain

__all__ = [
    "CheckpointOut",
    "ErrorOut",
    "ForkIn",
    "HistoryOut",
    "InboxOut",
    "ParkedOut",
    "PauseIn",
    "ProblemOut",
    "ReassignIn",
    "RequestOut",
    "RespondIn",
    "RunOut",
    "RunsOut",
    "SnapshotOut",
]


class ErrorOut(BaseModel):
    """Why a run failed."""

    type: str
    message: str
    node: str | None = None
    traceback: str | None = None

    @classmethod
    def of(cls, error: ErrorInfo | None) -> ErrorOut | None:
        """The API form of an ``ErrorInfo``."""
        if error is None:
            return None
        return cls(type=error.type, message=error.message, node=error.node,
                   traceback=error.traceback)


class RunOut(BaseModel):
    """A run (``RunInfo``)."""

    run_id: str
    workflow_name: str
    workflow_version: str
    status: RunStatus
    created_at: datetime
    updated_at: datetime
    head_checkpoint_id: str | None
    error: ErrorOut | None = None
    forked_from_run_id: str | None = None
    forked_from_checkpoint_id: str | None = None
    wake_at: datetime | None = None
    priority: int = 0
    pause_reason: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    concurrency_key: str | None = None

    @classmethod
    def of(cls, info: RunInfo) -> RunOut:
        """The API form of a ``RunInfo``."""
        ref = info.forked_from
        return cls(run_id=info.run_id, workflow_name=info.workflow_name,
                   workflow_version=info.workflow_version, status=info.status,
                   created_at=info.created_at, updated_at=info.updated_at,
                   head_checkpoint_id=info.head_checkpoint_id, error=ErrorOut.of(info.error),
                   forked_from_run_id=ref.run_id if ref else None,
                   forked_from_checkpoint_id=ref.checkpoint_id if ref else None,
                   wake_at=info.wake_at, priority=info.priority,
                   pause_reason=info.pause_reason, labels=dict(info.labels),
                   concurrency_key=info.concurrency_key)


class RunsOut(BaseModel):
    """A page of runs, newest first."""

    runs: list[RunOut]
    total: int
    next_offset: int | None = Field(description="pass as offset for the next page")


class CheckpointOut(BaseModel):
    """One checkpoint of the superstep timeline (``CheckpointInfo``)."""

    id: str
    run_id: str
    namespace: str
    parent_id: str | None
    superstep: int
    created_at: datetime
    status: RunStatus
    source: str
    nodes: list[str]
    routing_reason: str | None
    size: int
    parked: list[str] = Field([], description="tasks parked at this checkpoint")

    @classmethod
    def of(cls, cp: CheckpointInfo) -> CheckpointOut:
        """The API form of a ``CheckpointInfo``."""
        return cls(id=cp.id, run_id=cp.run_id, namespace=cp.namespace, parent_id=cp.parent_id,
                   superstep=cp.superstep, created_at=cp.created_at, status=cp.status,
                   source=cp.source, nodes=list(cp.nodes), routing_reason=cp.routing_reason,
                   size=cp.size, parked=list(cp.parked))


class HistoryOut(BaseModel):
    """A page of checkpoints, newest first."""

    checkpoints: list[CheckpointOut]
    next_before: str | None = Field(description="pass as before for the next (older) page")


class RequestOut(BaseModel):
    """An open request for a person (``PendingRequest``)."""

    id: str
    run_id: str
    workflow_name: str
    node: str
    payload: Any
    response_schema: dict[str, Any]
    created_at: datetime
    expires_at: datetime | None = None
    title: str = Field("", description="the line a person reads first")
    assignees: list[str] = Field([], description="principal ids that may answer")
    roles: list[str] = Field([], description="roles whose holders may answer")
    escalated: bool = False

    @classmethod
    def of(cls, req: PendingRequest) -> RequestOut:
        """The API form of a ``PendingRequest``."""
        return cls(id=req.id, run_id=req.run_id, workflow_name=req.workflow_name, node=req.node,
                   payload=plain(req.payload), response_schema=req.response_schema,
                   created_at=req.created_at, expires_at=getattr(req, "expires_at", None),
                   title=req.title, assignees=list(req.assignees), roles=list(req.roles),
                   escalated=req.escalated)


class DecisionOut(BaseModel):
    """One decision on a run's requests (``Decision``): who, when, via what."""

    seq: int
    request_id: str
    node: str
    kind: str = Field(description="answer, policy, escalation, reassign, timeout, withdrawn, or "
                      "an act on the run (import, cancel, fork, update, pause, unpause)")
    answer: Any
    by: str | None
    via: str
    at: datetime
    comment: str | None
    payload_digest: str
    digest: str

    @classmethod
    def of(cls, d: Decision) -> DecisionOut:
        """The API form of a ``Decision``."""
        return cls(seq=d.seq, request_id=d.request_id, node=d.node, kind=d.kind,
                   answer=d.answer, by=d.by, via=d.via, at=d.at, comment=d.comment,
                   payload_digest=d.payload_digest, digest=d.digest)


class InboxOut(BaseModel):
    """A page of the inbox, oldest first."""

    requests: list[RequestOut]
    next_after: str | None = Field(description="pass as after for the next page")


class ParkedOut(BaseModel):
    """A task waiting while its run goes on (``ParkedTask``, ``waits="branch"``)."""

    node: str = Field(description="the task's path at its level")
    kind: str = Field(description="request, event or timer")
    waits_for: list[str] = Field(description="the ids of its open waits (requests, timers, "
                                 "event waits)")
    since_superstep: int = Field(description="the superstep it parked in")
    wake_at: datetime | None = Field(None, description="a timer's wake time")
    events: list[str] = Field([], description="the names of the events it waits for")

    @classmethod
    def of(cls, task: ParkedTask) -> ParkedOut:
        """The API form of a ``ParkedTask``."""
        return cls(node=task.node, kind=task.kind, waits_for=list(task.waits_for),
                   since_superstep=task.since_superstep, wake_at=task.wake_at,
                   events=list(task.events))


class SnapshotOut(BaseModel):
    """The state of a run at one checkpoint (``Snapshot``)."""

    run_id: str
    checkpoint_id: str
    namespace: str
    superstep: int
    status: RunStatus
    created_at: datetime | None
    values: dict[str, Any]
    error: ErrorOut | None
    next_tasks: list[str]
    parked: list[ParkedOut] = Field([], description="tasks waiting while the run goes on")
    pending_requests: list[RequestOut]
    node_histories: dict[str, list[dict[str, Any]]]
    subworkflows: dict[str, SnapshotOut]

    @classmethod
    def of(cls, snap: Snapshot) -> SnapshotOut:
        """The API form of a ``Snapshot``."""
        return cls(
            run_id=snap.run_id, checkpoint_id=snap.checkpoint_id, namespace=snap.namespace,
            superstep=snap.superstep, status=snap.status, created_at=snap.created_at,
            values={k: plain(v) for k, v in snap.values.items()}, error=ErrorOut.of(snap.error),
            next_tasks=list(snap.next_tasks), parked=[ParkedOut.of(p) for p in snap.parked],
            pending_requests=[RequestOut.of(r) for r in snap.pending_requests],
            node_histories={n: [plain(m) for m in ms] for n, ms in snap.node_histories.items()},
            subworkflows={n: cls.of(s) for n, s in snap.subworkflows.items()})


class RespondIn(BaseModel):
    """Answers to open requests of one run, by request id, and why (recorded with each)."""

    responses: dict[str, Any] = Field(min_length=1)
    comment: str | None = Field(None, description="recorded with the decisions (see /decisions)")


class ReassignIn(BaseModel):
    """Who an open request goes to instead (principal ids and role names; one at least)."""

    request_id: str
    assignees: list[str] = Field([], description="principal ids that may answer")
    roles: list[str] = Field([], description="roles whose holders may answer")


class ForkIn(BaseModel):
    """Where to fork from, and blackboard values to apply first."""

    checkpoint_id: str
    update: dict[str, Any] | None = None


class PauseIn(BaseModel):
    """Why a run is paused (recorded with the ``pause`` decision)."""

    reason: str | None = None


class ProblemOut(BaseModel):
    """Why a request was refused."""

    error: str = Field(description="the error's class name, e.g. InvalidResponseError")
    message: str
    request_id: str | None = None
