"""Public records: run status, results, snapshots, checkpoint info, events.

Field names here are part of the public contract.
"""

from __future__ import annotations

import traceback as _tb
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal

from ..errors import RunFailedError
from ._budget import Budget, RunUsage

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._blackboard import Blackboard
    from ._messages import Message

__all__ = [
    "CheckpointInfo",
    "CheckpointRef",
    "CheckpointSource",
    "ErrorInfo",
    "Event",
    "EventKind",
    "ParkedKind",
    "ParkedTask",
    "PendingRequest",
    "RunInfo",
    "RunResult",
    "RunStatus",
    "Snapshot",
    "StreamEntry",
    "StreamKind",
]


class RunStatus(str, Enum):
    """Where a run stands. A crashed run stays ``running`` until resumed.

    ``queued`` runs wait for a ``Worker`` (submitted, answered through
    ``Runtime.respond``, sent an event they wait for, or given back by a
    worker that stopped). A ``waiting`` run waits for answers, events or a
    time (``RunInfo.wake_at``); it holds no lease. A ``paused`` run is never
    claimed until ``Runtime.unpause`` (``RunInfo.pause_reason`` says why;
    ``RunInfo.error`` is set when a node failed with ``on_failure="pause"``).
    """

    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    PAUSED = "paused"

    @property
    def is_final(self) -> bool:
        """True for statuses a run never leaves (completed, cancelled)."""
        return self in (RunStatus.COMPLETED, RunStatus.CANCELLED)


CheckpointSource = Literal["input", "loop", "update", "fork", "migrate", "resume"]


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """What went wrong in a failed run."""

    type: str
    message: str
    node: str | None = None
    traceback: str | None = None

    @classmethod
    def from_exception(cls, exc: BaseException, node: str | None = None) -> ErrorInfo:
        """Describe ``exc`` (raised in ``node``, if any)."""
        tb = "".join(_tb.format_exception(type(exc), exc, exc.__traceback__))
        return cls(type=type(exc).__name__, message=str(exc), node=node, traceback=tb)

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form for storage and JSON output."""
        return {"type": self.type, "message": self.message, "node": self.node,
                "traceback": self.traceback}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ErrorInfo:
        """Inverse of :meth:`to_dict`."""
        return cls(type=str(data["type"]), message=str(data["message"]),
                   node=data.get("node"), traceback=data.get("traceback"))


@dataclass(frozen=True, slots=True)
class PendingRequest:
    """A question a node asked a person; answered through ``Runtime.resume``.

    ``expires_at`` is its deadline (``ctx.request(..., timeout=...)``), None
    without one. ``title`` is the line a person reads first; ``assignees``
    and ``roles`` say who may answer (both empty: anyone); ``escalated`` is
    set once the request was reassigned at its deadline.
    """

    id: str
    run_id: str
    node: str
    payload: Any
    response_schema: dict[str, Any]
    created_at: datetime
    workflow_name: str = ""
    expires_at: datetime | None = None
    title: str = ""
    assignees: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    escalated: bool = False


ParkedKind = Literal["request", "timer", "event"]


@dataclass(frozen=True, slots=True)
class ParkedTask:
    """A task that waits while the rest of its run goes on (``waits="branch"``).

    ``node`` is the task's id at its level, as in ``next_tasks`` (``approve``,
    ``summarize[1]``; a sub-workflow node whose inner task waits is parked
    under its own id, its inner state in ``Snapshot.subworkflows``).
    ``waits_for`` holds the ids of the open waits it waits for (a request's
    is its ``PendingRequest.id``; timers and event waits have ids too);
    ``kind`` is ``request`` when one of them is a request, else ``event`` or
    ``timer``. ``wake_at`` is the earliest timer or deadline among them.
    ``events`` names the events its open event waits wait for (``"paid"``
    for ``ctx.wait_event("paid")``), in the order waited.
    ``since_superstep`` is the superstep it first ran in; it runs again from
    the top in the superstep after its answer, event or timer comes.
    """

    node: str
    kind: ParkedKind
    waits_for: tuple[str, ...]
    since_superstep: int
    wake_at: datetime | None = None
    events: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CheckpointRef:
    """Points at one checkpoint of one run."""

    run_id: str
    checkpoint_id: str


@dataclass(frozen=True, slots=True)
class CheckpointInfo:
    """Metadata of one checkpoint (no blackboard decoding needed)."""

    id: str
    run_id: str
    namespace: str
    parent_id: str | None
    superstep: int
    created_at: datetime
    status: RunStatus
    source: CheckpointSource
    nodes: tuple[str, ...]
    routing_reason: str | None
    size: int = 0
    #: the tasks parked at this checkpoint (``waits="branch"``), by task id
    parked: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RunInfo:
    """One run as listed by ``Runtime.list_runs``."""

    run_id: str
    workflow_name: str
    status: RunStatus
    created_at: datetime
    updated_at: datetime
    head_checkpoint_id: str | None
    error: ErrorInfo | None = None
    forked_from: CheckpointRef | None = None
    workflow_ref: str | None = None
    workflow_version: str = "1"
    wake_at: datetime | None = None
    priority: int = 0
    #: what the run's model calls used so far, and its spending limit (None: none)
    usage: RunUsage = field(default_factory=RunUsage)
    budget: Budget | None = None
    #: the principal id that started it (``by=`` of ``run``/``submit``/``fork``), or None
    started_by: str | None = None
    #: why the run is paused (``Runtime.pause(reason=)``); None unless it is paused
    pause_reason: str | None = None
    #: the run's labels (``run``/``submit`` ``labels=``), string keys and values
    labels: Mapping[str, str] = field(default_factory=dict)
    #: the key of ``submit(..., concurrency_key=)``: workers execute at most the
    #: workflow's ``max_runs_per_key`` runs of it at once (None: none)
    concurrency_key: str | None = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The readable state of a run at one checkpoint.

    Read straight from the stored JSON, without the workflow's code:
    ``values`` are plain JSON values, and each of ``node_histories`` is a
    sequence whose items become ``Message`` objects when read.
    ``pending_requests`` of the head are the requests open now; of an older
    checkpoint, those that were open at it (answered since or not).
    """

    run_id: str
    checkpoint_id: str
    superstep: int
    status: RunStatus
    values: dict[str, Any]
    error: ErrorInfo | None
    node_histories: dict[str, Sequence[Message]]
    next_tasks: tuple[str, ...]
    pending_requests: tuple[PendingRequest, ...]
    subworkflows: dict[str, Snapshot] = field(default_factory=dict)
    namespace: str = ""
    created_at: datetime | None = None
    #: tasks parked at this checkpoint (``waits="branch"``), in path order; empty otherwise
    parked: tuple[ParkedTask, ...] = ()


@dataclass(frozen=True, slots=True)
class RunResult:
    """What ``run``/``resume``/``fork`` return: the run's state when it stopped."""

    run_id: str
    status: RunStatus
    state: Blackboard
    pending_requests: tuple[PendingRequest, ...]
    checkpoint_id: str
    error: ErrorInfo | None = None

    def raise_for_status(self) -> RunResult:
        """Raise :class:`RunFailedError` if the run failed; otherwise return self."""
        if self.status is RunStatus.FAILED:
            err = self.error or ErrorInfo(type="Error", message="unknown failure")
            raise RunFailedError(self.run_id, err.type, err.message, err.node)
        return self


EventKind = Literal[
    "run_started", "superstep_started", "node_started", "node_completed",
    "node_retrying", "node_failed", "request_issued", "request_answered",
    "checkpoint_saved", "subworkflow_failed", "run_waiting", "run_paused", "run_completed",
    "run_failed", "run_cancelled", "model_delta", "tool_started", "tool_finished",
]
# the events a node publishes itself (``NodeContext.publish``), kept in the run's stream log
StreamKind = Literal["model_delta", "tool_started", "tool_finished"]


@dataclass(frozen=True, slots=True)
class Event:
    """One thing that happened during a run, as yielded by ``Runtime.stream``."""

    kind: EventKind
    run_id: str
    namespace: str
    superstep: int
    node: str | None
    ts: datetime
    data: dict[str, Any] = field(default_factory=dict)
    result: RunResult | None = None


@dataclass(frozen=True, slots=True)
class StreamEntry:
    """One entry of a run's durable stream log (``Runtime.read_stream``).

    ``seq`` numbers a run's entries from 1 (read on with ``after=seq``);
    ``kind`` is ``model_delta`` (``data["text"]``, ``data["round"]``,
    ``data["attempt"]``), ``tool_started`` or ``tool_finished``; ``node`` is
    the node's path. ``epoch`` is the execution that wrote it; ``cut`` is True
    for deltas of a model attempt that never finished (a crash, a lost
    connection): the model was asked again, and the checkpoint's answer is
    the one that counts.
    """

    run_id: str
    seq: int
    kind: StreamKind
    node: str
    namespace: str
    superstep: int
    ts: datetime
    data: dict[str, Any] = field(default_factory=dict)
    epoch: int = 0
    cut: bool = False
