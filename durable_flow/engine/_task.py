"""One task of a superstep: calling its node, checking what it returns, and its outcome."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import orjson

from ..errors import LeaseLostError, StateUpdateError
from ..model._frozen import freeze
from ..model._graph import Command, NodeSpec
from ..model._messages import Message
from ..model._send import Send
from ..model._serde import decode
from ..model._task_id import TaskId
from ._context import Interrupt, NodeContext, TaskIO
from ._instances import split_goto
from ._state import DAMAGE, corrupted, encode_field
from ._uses import CURRENT_USES, Gate

if TYPE_CHECKING:
    from ..model._blackboard import StateSchema
    from ..store._protocols import RequestRow, TaskWrite

__all__ = ["TaskFence", "TaskResult", "call_node", "normalize", "stop_tasks", "task_outcome"]

TaskKind = Literal["done", "interrupted", "failed"]


@dataclass
class TaskResult:
    """How one task ended: an update, a pause for input, or an error.

    ``node`` is the task (``summarize[3]`` for an instance of a ``Send``);
    ``sends`` are the ``Send``s of its ``Command`` with their encoded args.
    """

    node: TaskId
    kind: TaskKind
    update: dict[str, Any] = field(default_factory=dict)
    encoded: dict[str, bytes] = field(default_factory=dict)
    history: list[Message] = field(default_factory=list)
    history_bytes: bytes | None = None
    goto: tuple[str, ...] | None = None
    reason: str | None = None
    requests: list[RequestRow] = field(default_factory=list)
    reopen: dict[str, str] = field(default_factory=dict)
    error: BaseException | None = None
    sends: tuple[Send, ...] = ()
    send_bytes: tuple[bytes, ...] = ()

    def to_bytes(self) -> bytes:
        """The task write saved when the task finishes before its siblings."""
        parts = [orjson.dumps(k) + b":" + v for k, v in sorted(self.encoded.items())]
        head = b'{"update":{' + b",".join(parts) + b"}"
        extra = orjson.dumps({"goto": self.goto, "reason": self.reason})[1:-1]
        hist = b',"history":' + (self.history_bytes or b"[]")
        if self.sends:  # [[node, arg], ...] with each arg's own bytes spliced in
            hist += b',"sends":[' + b",".join(
                b"[" + orjson.dumps(s.node) + b"," + data + b"]"
                for s, data in zip(self.sends, self.send_bytes, strict=True)) + b"]"
        return head + b"," + extra + hist + b"}"

    @classmethod
    def from_write(cls, write: TaskWrite, schema: StateSchema) -> TaskResult:
        """Rebuild a saved task write, validating it against the schema again.

        Damaged data raises ``CheckpointCorruptedError`` naming the run and the
        superstep's base checkpoint.
        """
        try:
            return cls._from_bytes(TaskId.parse(write.node), write.data, schema)
        except (*DAMAGE, StateUpdateError) as exc:
            raise corrupted(write.run_id, write.checkpoint_id, exc,
                            f"the task write of {write.node!r}") from None

    @classmethod
    def _from_bytes(cls, task: TaskId, data: bytes, schema: StateSchema) -> TaskResult:
        node = str(task)
        raw = decode(data)
        if not isinstance(raw, dict) or not isinstance(raw.get("update"), dict):
            raise TypeError("expected a JSON object with an 'update' object")
        update = {f: schema.validate_update(node, f, v) for f, v in raw["update"].items()}
        history = [Message.model_validate(m) for m in _list(raw.get("history") or [])]
        goto = raw.get("goto")
        if goto is not None and not all(isinstance(g, str) for g in _list(goto)):
            raise TypeError("'goto' is not a list of node ids")
        reason = raw.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise TypeError("'reason' is not text")
        sends = tuple(_send(s) for s in _list(raw.get("sends") or []))
        result = cls(node=task, kind="done", update=update, history=history,
                     goto=tuple(goto) if goto is not None else None, reason=reason,
                     sends=sends, send_bytes=tuple(encode_field(node, "arg", s.arg)
                                                   for s in sends))
        result.encoded = {f: encode_field(node, f, v) for f, v in update.items()}
        result.history_bytes = encode_field(node, "history", history) if history else None
        return result


class TaskFence:
    """The running tasks of one run execution, stopped together when its lease is lost.

    Every task of the run (sub-workflows' included) is tracked; ``lose``
    cancels them all at once, so no node keeps running, and producing side
    effects, after another runtime took the run over. ``lost`` is the error
    that stopped them; the engine raises it once the tasks are done.
    """

    def __init__(self) -> None:
        self.lost: LeaseLostError | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    def track(self, task: asyncio.Task[Any]) -> None:
        """Follow ``task`` until it ends (cancelled at once if the lease is already lost)."""
        if self.lost is not None:
            task.cancel()
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def lose(self, exc: LeaseLostError) -> None:
        """The lease is gone: cancel every tracked task."""
        if self.lost is None:
            self.lost = exc
        for task in list(self._tasks):
            task.cancel()

    def check(self) -> None:
        """Raise the ``LeaseLostError`` if the lease was lost."""
        if self.lost is not None:
            raise self.lost


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"expected a JSON array, got {type(value).__name__}")
    return value


def _send(value: Any) -> Send:
    if not (isinstance(value, list) and len(value) == 2 and isinstance(value[0], str)):
        raise TypeError("a saved Send is not a [node, arg] pair")
    return Send(value[0], value[1])


async def call_node(
    spec: NodeSpec, takes_ctx: bool, state: Any, ctx: NodeContext,
    subworkflow: Callable[[], Any] | None = None, *, gate: Gate | None = None,
    run_id: str = "",
) -> Any:
    """Call the node's function (sync functions run in a worker thread).

    A node with ``uses=`` first waits for its grants from ``gate`` (when
    there is one) and holds them while it runs.
    """
    if subworkflow is not None:
        return await subworkflow()
    fn = spec.fn
    if fn is None:
        raise TypeError(f"node {spec.id!r} has nothing to run")
    args = (state, ctx) if takes_ctx else (state,)
    if not spec.uses or gate is None:
        return await _call(fn, args)
    async with gate.hold(spec.uses, run_id, ctx.node) as uses:
        token = CURRENT_USES.set(uses)
        try:
            return await _call(fn, args)
        finally:
            CURRENT_USES.reset(token)


async def _call(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    if inspect.iscoroutinefunction(fn):
        return await fn(*args)
    result = await asyncio.to_thread(fn, *args)
    if inspect.isawaitable(result):
        result = await result
    return result


def normalize(
    task: TaskId, spec: NodeSpec, schema: StateSchema, out: Any, ctx: NodeContext
) -> TaskResult:
    """Validate and encode what the node of ``task`` returned; errors name node and field."""
    targets: tuple[str | Send, ...] | None = None
    reason: str | None = None
    if out is None:
        update: Mapping[str, Any] = {}
    elif isinstance(out, Command):
        update, targets, reason = out.update or {}, out.targets(), out.reason
    elif isinstance(out, Mapping):
        update = out
    else:
        raise StateUpdateError(ctx.node, "<return value>",
                               f"a node returns a dict, a Command or None, not {type(out).__name__}")
    goto, sends, send_bytes = split_goto(ctx.node, spec, targets)
    # frozen now, while the snapshot's logs are as the task saw them: a log it
    # wrote elsewhere is copied before the barrier grows it
    validated = {str(f): freeze(schema.validate_update(ctx.node, str(f), v))
                 for f, v in update.items()}
    encoded = {f: encode_field(ctx.node, f, v) for f, v in validated.items()}
    history = list(ctx.remembered)
    if "messages" in validated:
        history.extend(validated["messages"])
    hist_bytes = encode_field(ctx.node, "history", history) if history else None
    return TaskResult(node=task, kind="done", update=validated,
                      encoded=encoded, history=history, history_bytes=hist_bytes, goto=goto,
                      reason=reason, sends=sends, send_bytes=send_bytes)


def interrupted(node: TaskId, exc: Interrupt) -> TaskResult:
    """A task that paused for input."""
    return TaskResult(node=node, kind="interrupted", requests=list(exc.requests),
                      reopen=dict(exc.reopen))


def failed(node: TaskId, exc: BaseException) -> TaskResult:
    """A task that raised."""
    return TaskResult(node=node, kind="failed", error=exc)


def make_context(io: TaskIO, node: str, superstep: int, history: list[Message],
                 log: Any, arg: Any = None) -> NodeContext:
    """A fresh context for one attempt (``arg``: an instance's ``ctx.arg``)."""
    ctx = NodeContext(io=io, node=node, superstep=superstep, history=history, log=log)
    ctx.arg = arg
    return ctx


def task_outcome(fut: asyncio.Task[TaskResult], fence: TaskFence) -> TaskResult:
    """A finished task's result; a task stopped by a lost lease raises the ``LeaseLostError``."""
    if fut.cancelled():
        fence.check()
    elif isinstance(exc := fut.exception(), LeaseLostError):
        fence.lose(exc)
    return fut.result()


async def stop_tasks(pending: set[asyncio.Task[TaskResult]], flusher: asyncio.Task[None] | None) -> None:
    """Cancel the tasks still running and wait until they have stopped.

    A failed flusher's error was already acted on (a lost lease stopped the
    tasks); it is read here so it is not reported as never retrieved.
    """
    tasks: list[asyncio.Task[Any]] = [*pending]
    if flusher is not None:
        tasks.append(flusher)
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks)
    if flusher is not None and not flusher.cancelled():
        flusher.exception()
