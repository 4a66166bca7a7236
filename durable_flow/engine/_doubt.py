"""``ctx.step(..., in_doubt="ask")``: a start recorded before the effect, and what a restart does.

Before ``fn`` runs, the step writes a start record: a step row of its own
(``#started:<name>:<attempt>``, holding when it started and a preview of the
arguments), in a write of its own that returns before ``fn`` is called.
When the task runs again and finds the latest start without a result, the
effect is in doubt and ``fn`` is not called: ``reconcile`` (if given) says
what happened (its result is recorded as the step's; :data:`NOT_DONE` means
the effect did not happen), else a person answers a request of kind
``in_doubt`` with an :class:`InDoubtDecision`. When ``fn`` runs again
(``NOT_DONE``, or ``done=False``) it is a new attempt with a new start
record, so an attempt cut off again is in doubt again and asks again: an
in-doubt effect never runs twice unless a person or ``reconcile`` said so.

An error ``fn`` raises also leaves the step in doubt (a payment call that
timed out may have gone through): the node's retry asks the same way.
The requests use call indexes of their own (``IN_DOUBT_INDEX`` up), one
block per ``ctx.step`` call of the task (its place among them, the same on
every execution), so they never mix with the node's ``ctx.request`` calls.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import to_json

from ..errors import DurableFlowError, InvalidInputError, LeaseLostError, SerializationError
from ..model._clock import utcnow
from ..model._effects import NOT_DONE, InDoubtDecision
from ..model._serde import decode, encode
from ..store._protocols import StepRow
from ._context import Interrupt, own

if TYPE_CHECKING:
    from ._context import TaskCalls

__all__ = ["IN_DOUBT_INDEX", "MARK", "check_options", "run_in_doubt"]

#: In-doubt requests' call indexes start here (budget requests use ``1 << 20`` up, tool
#: approvals ``1 << 23`` up): a block of ``_ATTEMPTS`` per step call of the task, in order.
IN_DOUBT_INDEX = 1 << 24
#: Start records are step rows named ``MARK + name + ":" + attempt``.
MARK = "#started:"
_ATTEMPTS = 1000  # attempts of one step a person may send back to run again
_PREVIEW = 500
_DECISION: TypeAdapter[InDoubtDecision] = TypeAdapter(InDoubtDecision)


def check_options(name: str, in_doubt: str, reconcile: Callable[..., Any] | None) -> None:
    """``InvalidInputError`` for an unknown ``in_doubt``, or a reserved step name."""
    if in_doubt not in ("rerun", "ask"):
        raise own(InvalidInputError(f"in_doubt must be 'rerun' or 'ask', not {in_doubt!r}"))
    if reconcile is not None and in_doubt != "ask":
        raise own(InvalidInputError("reconcile= is used only with in_doubt='ask'"))
    if reconcile is not None and not callable(reconcile):
        raise own(InvalidInputError(f"reconcile must be a function, not {reconcile!r}"))
    if isinstance(name, str) and name.startswith(MARK):
        raise own(InvalidInputError(f"step names starting with {MARK!r} are reserved"))


def marker(name: str, attempt: int) -> str:
    """The step name of attempt ``attempt``'s start record."""
    return f"{MARK}{name}:{attempt}"


def _last_attempt(calls: TaskCalls, name: str) -> int:
    io = calls.io
    attempt = 0
    while io.has_step(marker(name, attempt + 1)):
        attempt += 1
    return attempt


def preview(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """The step's arguments as short JSON text (what a person sees)."""
    from ._context import NodeContext

    shown = [a for a in args if not isinstance(a, NodeContext)]  # a tool's context: not data
    text = to_json({"args": shown, "kwargs": kwargs}, fallback=repr).decode()
    return text if len(text) <= _PREVIEW else text[:_PREVIEW - 3] + "..."


async def _call(fn: Callable[..., Any | Awaitable[Any]], args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Any:
    result = fn(*args, **kwargs)
    if inspect.isawaitable(result):
        result = await result
    return result


async def run_in_doubt(calls: TaskCalls, name: str, ordinal: int,
                       fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                       reconcile: Callable[..., Any] | None) -> Any:
    """The step's outcome when no result is recorded: settle a doubt, or start an attempt.

    Returns the value to record as the step's result.
    """
    attempt = _last_attempt(calls, name)
    if attempt:
        started = await _recorded(calls, marker(name, attempt))
        outcome = await _settle(calls, name, ordinal, attempt, started, args, kwargs, reconcile)
        if outcome is not NOT_DONE:
            return outcome
    if attempt + 1 >= _ATTEMPTS:
        raise own(InvalidInputError(f"step {name!r} of {calls.node!r} was started "
                                    f"{_ATTEMPTS} times"))
    await _mark(calls, name, attempt + 1, args, kwargs)
    return await _call(fn, args, kwargs)


async def _mark(calls: TaskCalls, name: str, attempt: int, args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> None:
    """Write the start record of an attempt, and wait until it is stored.

    The write is the step machinery's own (a task of its own that finishes
    even when this attempt is cancelled, known to the task's next attempt).
    """
    io = calls.io
    data = encode({"started_at": utcnow(), "attempt": attempt, "arguments": preview(args, kwargs)})
    io.record_step(StepRow(run_id=calls.run_id, checkpoint_id=io.checkpoint_id, node=calls.node,
                           name=marker(name, attempt), data=data, created_at=utcnow()))
    await _recorded(calls, marker(name, attempt))


async def _recorded(calls: TaskCalls, step: str) -> Any:
    """A start record, once its write (if still running) has finished."""
    try:
        data = await calls.io.step_result(step)
    except DurableFlowError as exc:
        raise own(exc) from None
    return calls.decode_recorded(data, calls.io.checkpoint_id, f"the start of step {step!r}")


async def _settle(calls: TaskCalls, name: str, ordinal: int, attempt: int, started: Any,
                  args: tuple[Any, ...], kwargs: dict[str, Any],
                  reconcile: Callable[..., Any] | None) -> Any:
    """What happened to attempt ``attempt``: reconcile's word, or a person's."""
    if reconcile is not None:
        try:
            calls.io.run.guard()
            return await _call(reconcile, args, kwargs)
        except LeaseLostError as exc:
            raise own(exc) from None
        except Exception as exc:  # a failed reconcile asks a person instead
            calls.log.warning("reconcile_failed", step=name, error=f"{type(exc).__name__}: {exc}")
    return _asked(calls, name, ordinal, attempt, started)


def _asked(calls: TaskCalls, name: str, ordinal: int, attempt: int, started: Any) -> Any:
    """A person's decision on attempt ``attempt``, or the request that asks for it."""
    from ._approvals import with_approval

    index = IN_DOUBT_INDEX + ordinal * _ATTEMPTS + attempt
    row = calls.recorded(index, "request", "an in-doubt step")
    if row is None:
        payload = {"kind": "in_doubt", "node": calls.node, "step": name,
                   "started_at": started.get("started_at"), "attempt": attempt,
                   "arguments": started.get("arguments", "")}
        row = calls.new_request(index, payload, _DECISION)
        row = dataclasses.replace(row, id=f"{row.id.rpartition('#')[0]}#doubt{ordinal}-{attempt}")
        title = f"In doubt: did step {name!r} of {calls.node!r} happen?"
        raise Interrupt([with_approval(row, payload, title, (), ())])
    if row.answer is None:
        raise Interrupt([row])
    try:
        decision = _DECISION.validate_python(decode(row.answer))
    except ValidationError as exc:
        raise own(SerializationError(calls.node, f"the answer to {row.id!r}", str(exc))) from None
    return decision.result if decision.done else NOT_DONE
