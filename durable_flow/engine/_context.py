"""NodeContext: what a running node can do besides returning an update."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar, cast, get_type_hints, overload

import orjson
from pydantic import TypeAdapter, ValidationError

from ..errors import (
    DuplicateStepError,
    DurableFlowError,
    InvalidInputError,
    LeaseLostError,
    SerializationError,
)
from ..model._clock import utcnow
from ..model._messages import Message
from ..model._records import StreamKind
from ..model._serde import decode, encode
from ..store._protocols import RequestRow, StepRow, WaitKind
from ._state import DAMAGE, corrupted, decode_plain

if TYPE_CHECKING:
    import structlog

    from ..model._approvals import Policy
    from ..model._effects import InDoubt
    from ._loop import RunContext

__all__ = ["NO_DEFAULT", "Interrupt", "NodeContext", "TaskCalls", "TaskIO", "own", "task_calls"]

T = TypeVar("T")
E = TypeVar("E", bound=DurableFlowError)


class _NoDefault:
    """The ``default`` of a request that has none (None is a default like any other)."""

    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()


class Interrupt(BaseException):
    """Raised inside a node to pause it; user code must not swallow it.

    A ``BaseException`` so ``except Exception`` in a node does not catch it.
    """

    def __init__(self, requests: list[RequestRow], *, reopen: dict[str, str] | None = None) -> None:
        super().__init__("waiting for input")
        self.requests = requests
        self.reopen = reopen or {}


@dataclass
class TaskIO:
    """Per-task durable records: recorded answers and step results."""

    run: RunContext
    checkpoint_id: str
    thread: str
    request_prefix: str
    namespace: str = ""
    answered: dict[int, RequestRow] = field(default_factory=dict)
    steps: dict[str, bytes] = field(default_factory=dict)
    writes: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    # a parked task run again: the superstep it first ran in, which its request ids name
    origin: int | None = None
    # its thread (or one above it) parks waiting tasks: requests are answerable while it runs
    parks: bool = False

    def request_id(self, node: str, superstep: int, index: int) -> str:
        """The deterministic id of the task's ``index``-th wait (``node`` its path)."""
        step = self.origin if self.origin is not None else superstep
        return f"{self.request_prefix}{node.rsplit('.', 1)[-1]}@{step}#{index}"

    def has_step(self, name: str) -> bool:
        """True once a result for ``name`` is recorded or being recorded."""
        return name in self.steps or name in self.writes

    def record_step(self, row: StepRow) -> None:
        """Start writing a step result in a task of its own.

        The write runs to its end even when the attempt that started it is
        cancelled (a node timeout): ``fn`` has run, so its result must not be
        lost, and a later attempt reads it instead of calling ``fn`` again.
        """
        async def write() -> None:
            try:
                await self.run.put_step(row)
            except LeaseLostError as exc:
                self.run.fence.lose(exc)
                raise
            self.steps[row.name] = row.data

        task = asyncio.create_task(write())
        # an attempt that was cancelled never reads the outcome; settle() does
        task.add_done_callback(_retrieve)
        self.writes[row.name] = task

    async def step_result(self, name: str) -> bytes:
        """The recorded result of ``name``, once its write (if any) has finished."""
        write = self.writes.get(name)
        if write is not None:
            await asyncio.shield(write)
        return self.steps[name]

    async def settle(self) -> None:
        """Wait for every step write still running; their errors were raised to the node."""
        for write in list(self.writes.values()):
            with contextlib.suppress(Exception):
                await asyncio.shield(write)

    async def run_input(self) -> dict[str, Any]:
        """Plain values of this thread's oldest checkpoint, read once per run execution."""
        cache = _RUN_INPUTS.setdefault(self.run, {})
        if self.thread not in cache:
            store, run_id = self.run.store, self.run.run_id
            first = await store.first_checkpoint(run_id, self.thread)
            values: dict[str, Any] = {}
            if first is not None:
                values, _ = decode_plain(await store.load_checkpoint(run_id, first.id))
            cache[self.thread] = values
        return cache[self.thread]


def _retrieve(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()


def own(exc: E) -> E:
    """Mark an error as the runtime's own, so no ``RetryPolicy`` retries it."""
    exc.raised_by_runtime = True
    return exc


# Keyed weakly by the run execution, so the cache lives exactly as long as the run.
_RUN_INPUTS: weakref.WeakKeyDictionary[RunContext, dict[str, dict[str, Any]]] = \
    weakref.WeakKeyDictionary()


class TaskCalls:
    """One attempt's durable calls: the shared call index, new wait rows, recorded values.

    Internal to the engine and the agents built on it: a :class:`NodeContext`
    owns one, and the modules behind its methods (requests, waits, in-doubt
    steps, budgets, tool approvals) work through it (:func:`task_calls`)
    rather than through the context. A task's requests, timers and event
    waits share one call index, so a node mixing them keeps a stable order.
    """

    def __init__(self, io: TaskIO, node: str, superstep: int,
                 log: structlog.typing.FilteringBoundLogger) -> None:
        self.io = io
        self.node = node
        self.superstep = superstep
        self.log = log
        self.run_id = io.run.run_id
        self.index = 0

    def next_index(self) -> int:
        """The call index of the attempt's next request, timer or event wait."""
        index = self.index
        self.index += 1
        return index

    def recorded(self, index: int, kind: WaitKind, call: str) -> RequestRow | None:
        """The wait this call recorded before, if any; another kind means the code changed."""
        row = self.io.answered.get(index)
        if row is not None and row.kind != kind:
            raise own(InvalidInputError(
                f"node {self.node!r} called {call} where it recorded a {row.kind} ({row.id!r}) "
                "before; a node's requests, sleeps and event waits must come in the same order"))
        return row

    def new_wait(self, index: int, kind: WaitKind, payload: bytes, schema: bytes,
                 expires_at: datetime | None) -> RequestRow:
        """A new timer or event wait of this task at call ``index``."""
        return self._row(index, payload, schema, kind=kind, expires_at=expires_at)

    def new_request(self, index: int, payload: Any, adapter: TypeAdapter[Any]) -> RequestRow:
        """A new request of this task at call ``index``, answered by ``adapter``'s type."""
        try:
            data = encode(payload)
        except TypeError as exc:
            raise own(SerializationError(self.node, "request payload", str(exc))) from None
        return self._row(index, data, orjson.dumps(adapter.json_schema()), parked=self.io.parks)

    def _row(self, index: int, payload: bytes, schema: bytes, *, kind: WaitKind = "request",
             expires_at: datetime | None = None, parked: bool = False) -> RequestRow:
        io = self.io
        return RequestRow(
            id=io.request_id(self.node, self.superstep, index), run_id=self.run_id,
            workflow_name=io.run.workflow_name, thread=io.thread,
            checkpoint_id=io.checkpoint_id, node=self.node, index=index, payload=payload,
            response_schema=schema, created_at=utcnow(), kind=kind, expires_at=expires_at,
            parked=parked)

    def decode_recorded(self, data: bytes, checkpoint_id: str, what: str) -> Any:
        """A recorded value; damaged data raises ``CheckpointCorruptedError``."""
        try:
            return decode(data)
        except DAMAGE as exc:
            raise corrupted(self.run_id, checkpoint_id, exc, what) from None


def task_calls(ctx: NodeContext) -> TaskCalls:
    """The durable calls of the attempt ``ctx`` belongs to (the engine's and agents' use)."""
    return ctx._calls


class NodeContext:
    """Passed to a node as its second argument.

    ``run_id``, ``node`` (qualified path such as ``review.legal.approve``),
    ``superstep``, ``history`` (this node's own messages) and ``log`` (a
    structlog logger bound to run, node and superstep). ``arg`` is the
    argument of the ``Send`` that started this instance (read-only, validated
    into the node's ``arg_type``), None for a task no ``Send`` started.
    """

    arg: Any = None

    def __init__(
        self,
        *,
        io: TaskIO,
        node: str,
        superstep: int,
        history: list[Message],
        log: structlog.typing.FilteringBoundLogger,
    ) -> None:
        self._calls = TaskCalls(io, node, superstep, log)
        self._io = io
        self.run_id = io.run.run_id
        self.node = node
        self.superstep = superstep
        self._history = history
        self.remembered: list[Message] = []
        self.log = log
        self._step_names: set[str] = set()

    async def run_input(self) -> dict[str, Any]:
        """The plain values this run started with (its input checkpoint), read once per run.

        Inside a sub-workflow these are the sub-workflow's input values.
        """
        try:
            return await self._io.run_input()
        except DurableFlowError as exc:
            own(exc)
            raise

    @property
    def history(self) -> list[Message]:
        """The node's own messages so far (including ``remember``-ed ones)."""
        return [*self._history, *self.remembered]

    def remember(self, *messages: Message) -> None:
        """Append messages to this node's own history only."""
        for m in messages:
            self.remembered.append(m if isinstance(m, Message) else Message.model_validate(m))

    def publish(self, kind: StreamKind, **data: Any) -> None:
        """Report progress inside this node (agent nodes: model deltas, tool calls).

        The event reaches ``Runtime.stream`` listeners and the run's durable
        stream log (``Runtime.read_stream``); ``data`` must be plain JSON.
        """
        run, namespace = self._io.run, self._io.namespace
        run.stream_log.add(kind, namespace, self.superstep, self.node, data)
        run.emit(kind, namespace, self.superstep, self.node, **data)

    @overload
    async def request(self, payload: Any, response_type: type[T], *,
                      timeout: float | timedelta | None = None, default: Any = ...,
                      title: str | None = None, assignees: Sequence[str] = (),
                      roles: Sequence[str] = (), escalate_to: Sequence[str] = (),
                      policy: Policy | None = None) -> T: ...

    @overload
    async def request(self, payload: Any, *, timeout: float | timedelta | None = None,
                      default: Any = ..., title: str | None = None, assignees: Sequence[str] = (),
                      roles: Sequence[str] = (), escalate_to: Sequence[str] = (),
                      policy: Policy | None = None) -> Any: ...

    async def request(self, payload: Any, response_type: Any = Any, *,
                      timeout: float | timedelta | None = None,
                      default: Any = NO_DEFAULT, title: str | None = None,
                      assignees: Sequence[str] = (), roles: Sequence[str] = (),
                      escalate_to: Sequence[str] = (), policy: Policy | None = None) -> Any:
        """Ask a person; returns the answer, coerced into ``response_type``.

        The first time, the node stops here and the run waits. When the run is
        resumed with an answer the node runs again from the top, and each
        ``request`` call returns its recorded answer in order. ``timeout``
        (seconds or a ``timedelta``) gives the request a deadline
        (``PendingRequest.expires_at``): unanswered by then, the node runs
        again and ``request`` returns ``default``, or raises
        ``RequestTimeoutError`` when no default was given; later answers are
        refused with ``UnknownRequestError``.

        ``title`` is the line a person reads first (by default the payload's
        ``question`` or ``title`` key, else the node path). ``assignees``
        (principal ids) and ``roles`` (role names): when either is given,
        only a principal named there or holding one of the roles may answer
        (``Runtime.respond(..., by=...)``). ``escalate_to`` (principal ids and
        ``role:NAME``; needs ``timeout``): at the deadline the request is
        reassigned once to them with a new deadline of the same length; at the
        second one ``default``/``RequestTimeoutError`` apply. ``policy``: when
        ``Policy.when`` holds over the payload the request is answered at once
        with ``Policy.answer``, by ``policy:NAME``, and nobody is asked.
        """
        from ._approvals import answer_by_policy, with_approval
        from ._waits import timed_out_request, with_deadline

        calls = self._calls
        index = calls.next_index()
        adapter: TypeAdapter[Any] = TypeAdapter(response_type)
        row = calls.recorded(index, "request", "ctx.request")
        if row is not None and row.timed_out:
            return timed_out_request(calls, row, default)
        if row is not None and row.answer is not None:
            answer = calls.decode_recorded(row.answer, row.checkpoint_id,
                                           f"the answer to {row.id!r}")
            try:
                return adapter.validate_python(answer)
            except ValidationError as exc:
                # the answer fit the request's JSON Schema but not the node's own type
                # (a custom validator): ask again rather than failing the node for good
                reason = "; ".join(
                    ".".join(str(p) for p in e["loc"]) + f": {e['msg']}" if e["loc"] else e["msg"]
                    for e in exc.errors())
                raise Interrupt([], reopen={row.id: reason}) from None
        if row is None:
            row = with_deadline(calls.new_request(index, payload, adapter), timeout)
            row = with_approval(row, payload, title, assignees, roles, escalate_to)
            if policy is not None and policy.applies(payload):
                return await answer_by_policy(calls, row, policy, adapter)
        raise Interrupt([row])

    async def sleep(self, duration: float | timedelta) -> None:
        """Wait durably for ``duration`` (seconds or a ``timedelta``).

        The first time, the task stops, the superstep is saved with a timer
        and the run becomes ``waiting`` (``RunInfo.wake_at``), holding no
        lease; a ``Worker`` (or a ``resume`` after the wake time) continues
        it, and the call then returns at once. Zero or less returns at once.
        """
        from ._waits import sleep

        await sleep(self._calls, duration)

    async def sleep_until(self, when: datetime) -> None:
        """Wait durably until ``when`` (a naive datetime is UTC); see :meth:`sleep`."""
        from ._waits import sleep_until

        await sleep_until(self._calls, when)

    @overload
    async def wait_event(self, name: str, response_type: type[T], *,
                         timeout: float | timedelta | None = None) -> T: ...

    @overload
    async def wait_event(self, name: str, *,
                         timeout: float | timedelta | None = None) -> Any: ...

    async def wait_event(self, name: str, response_type: Any = Any, *,
                         timeout: float | timedelta | None = None) -> Any:
        """Wait for the next event ``name`` sent to this run (``Runtime.send_event``).

        Returns its payload validated into ``response_type``. An event sent
        before this call is kept for it; each event goes to exactly one
        wait, in the order sent. Until one comes the run is ``waiting``;
        with ``timeout`` (seconds or a ``timedelta``), none by then raises
        ``EventTimeoutError`` here.
        """
        from ._waits import wait_event

        return await wait_event(self._calls, name, response_type, timeout)

    async def step(self, name: str, fn: Callable[..., T | Awaitable[T]], *args: Any,
                   in_doubt: InDoubt = "rerun", reconcile: Callable[..., Any] | None = None,
                   **kwargs: Any) -> T:
        """Run a durable side effect once; later runs of this task get the recorded result.

        ``fn`` may be sync or async; its result must be storable. If ``fn``
        has a return annotation, the recorded result is validated into it.
        The result is written to the store before ``step`` returns; an error
        the runtime raises here (a duplicate name, a result that cannot be
        stored, a failed write, a lost lease) is never retried by the node's
        ``RetryPolicy``, while an error ``fn`` raises is the node's own.

        ``in_doubt="rerun"`` (the default): an effect cut off before its
        result was recorded runs again. ``in_doubt="ask"``: the step records
        that it started before ``fn`` is called; finding a start without a
        result, it does not call ``fn`` but ``reconcile(*args, **kwargs)``
        (its result recorded as the step's; ``NOT_DONE``: ``fn`` runs), or,
        without one (or when it raises), asks a person with a request of
        kind ``in_doubt`` answered by an ``InDoubtDecision``.
        """
        if name in self._step_names:
            raise own(DuplicateStepError(self.node, name))
        if in_doubt != "rerun" or reconcile is not None:
            from ._doubt import check_options

            check_options(name, in_doubt, reconcile)
        ordinal = len(self._step_names)  # the same on every execution of the task
        self._step_names.add(name)
        adapter = _return_adapter(fn)
        if not self._io.has_step(name):
            try:  # no side effect starts once the lease is lost or past its local deadline
                self._io.run.guard()
            except LeaseLostError as exc:
                raise own(exc) from None
            if in_doubt == "ask":
                from ._doubt import run_in_doubt

                result = await run_in_doubt(self._calls, name, ordinal, fn, args, kwargs,
                                             reconcile)
            else:
                result = fn(*args, **kwargs)
                if inspect.isawaitable(result):
                    result = await result
            try:
                data = encode(result)
            except TypeError as exc:
                raise own(SerializationError(self.node, f"step {name!r}", str(exc))) from None
            self._io.record_step(StepRow(
                run_id=self.run_id, checkpoint_id=self._io.checkpoint_id, node=self.node,
                name=name, data=data, created_at=utcnow()))
        try:
            recorded = await self._io.step_result(name)
        except DurableFlowError as exc:
            own(exc)
            raise
        value = self._calls.decode_recorded(recorded, self._io.checkpoint_id,
                                            f"the step {name!r} of {self.node!r}")
        if adapter is None:
            return cast(T, value)
        try:
            return cast(T, adapter.validate_python(value))
        except ValidationError:
            return cast(T, value)


def _return_adapter(fn: Callable[..., Any]) -> TypeAdapter[Any] | None:
    try:
        hints = get_type_hints(fn)
    except Exception:
        return None
    ret = hints.get("return")
    if ret is None or ret is type(None):
        return None
    origin = getattr(ret, "__origin__", None)
    if origin is not None and getattr(origin, "__name__", "") in ("Awaitable", "Coroutine"):
        ret = ret.__args__[-1]
    try:
        return TypeAdapter(ret)
    except Exception:
        return None
