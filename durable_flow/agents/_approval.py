"""Agent tools a person approves: ``durable_flow.tool(approval=..., in_doubt=...)`` and the call.

``tool`` marks a tool function (it returns a wrapper that calls it, so one
function can be used plainly elsewhere). Before each call of a tool with an
``approval``, the agent asks a person: a request of kind ``tool_approval``
whose payload holds the tool's name and the exact arguments that would run
(validated by the tool's parameters), and whose answer is a
:class:`~durable_flow.ToolDecision` (its ``arguments`` field is typed by the
tool's parameters, so the web inbox shows each argument as an editable field,
filled in with the proposed value). The request goes through the approvals
machinery like any ``ctx.request``: assignees, roles, escalation, links,
notifications, decisions.

The answer is recorded with the arguments that will run and their digest
(``arguments_digest``), so the decision chain names exactly what ran. The
call is then one ``ctx.step``: approved, the tool runs once with those
arguments; refused (or unanswered past its deadline), the step records a
refusal the model reads, and the tool is never called. After a crash the
recorded answer and the recorded step are read back, so a refused call never
runs and an approved one runs once (with ``in_doubt="ask"``, not even twice
across a crash inside the tool: see ``ctx.step``).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, overload

from pydantic import BaseModel, Field, TypeAdapter, ValidationError, create_model

from ..engine._context import Interrupt
from ..errors import InvalidInputError
from ..model._effects import Approval, InDoubt, ToolDecision, arguments_digest
from ..model._messages import ToolCall
from ..model._serde import decode

if TYPE_CHECKING:
    from ..engine._context import TaskCalls
    from ._tools import Tool

__all__ = ["TOOL_INDEX", "ToolOptions", "approved_call", "options_of",
           "tool"]

F = TypeVar("F", bound=Callable[..., Any])

#: Tool approval requests' call indexes start here (one per model round and call position).
TOOL_INDEX = 1 << 23
_ATTR = "__durable_flow_tool__"


@dataclass(frozen=True, slots=True)
class ToolOptions:
    """How an agent calls a tool: who approves each call, and what a cut-off call does."""

    approval: Approval | None = None
    in_doubt: InDoubt = "rerun"


@overload
def tool(fn: F, *, approval: bool | Approval | None = None, in_doubt: InDoubt = "rerun") -> F: ...


@overload
def tool(fn: None = None, *, approval: bool | Approval | None = None,
         in_doubt: InDoubt = "rerun") -> Callable[[F], F]: ...


def tool(fn: Callable[..., Any] | None = None, *, approval: bool | Approval | None = None,
         in_doubt: InDoubt = "rerun") -> Any:
    """Mark an agent tool: ``@tool(approval=True)``, ``@tool(in_doubt="ask")`` or ``tool(f, ...)``.

    ``approval=True`` (anyone may approve) or an :class:`~durable_flow.Approval`
    (title, assignees, roles, timeout, escalation): a person approves each
    call, with its exact arguments, before it runs (see the module). A
    refused call is never made; the model is told. ``in_doubt="ask"``: a call
    cut off by a crash after it started is not run again without a person
    saying so (as ``ctx.step(..., in_doubt="ask")``). Returns a function that
    calls ``fn``; ``fn`` itself is unchanged.
    """
    if approval is True:
        approval = Approval()
    elif approval is False:
        approval = None
    if approval is not None and not isinstance(approval, Approval):
        raise InvalidInputError(f"approval= takes True or an Approval, not {approval!r}")
    if in_doubt not in ("rerun", "ask"):
        raise InvalidInputError(f"in_doubt must be 'rerun' or 'ask', not {in_doubt!r}")
    options = ToolOptions(approval, in_doubt)

    def mark(f: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(f):
            raise InvalidInputError(f"tool() marks a function, not {f!r}")
        if inspect.iscoroutinefunction(f):
            @functools.wraps(f)
            async def call_async(*args: Any, **kwargs: Any) -> Any:
                return await f(*args, **kwargs)
            wrapper: Callable[..., Any] = call_async
        else:
            @functools.wraps(f)
            def call(*args: Any, **kwargs: Any) -> Any:
                return f(*args, **kwargs)
            wrapper = call
        setattr(wrapper, _ATTR, options)
        return wrapper

    return mark if fn is None else mark(fn)


def options_of(fn: Callable[..., Any]) -> ToolOptions:
    """The options ``tool`` gave ``fn`` (the defaults for a plain function)."""
    found = getattr(fn, _ATTR, None)
    return found if isinstance(found, ToolOptions) else ToolOptions()


def _decision_type(spec: Tool, proposed: dict[str, Any]) -> type[BaseModel]:
    """``ToolDecision`` with ``arguments`` typed by the tool's parameters, the proposal filled in."""
    typed: Any = spec.args | None
    field: Any = Field(default=proposed, title=f"Arguments of {spec.spec.name}",
                       description="the arguments to run (edit to change)")
    return create_model("Decision", __base__=ToolDecision, arguments=(typed, field))


def refusal(tool_name: str, comment: str | None) -> str:
    """What the model reads for a refused call."""
    why = f": {comment}" if comment else ""
    return f"refused: a person did not approve this call of {tool_name!r}{why}. It was not run."


async def approved_call(calls: TaskCalls, spec: Tool, call: ToolCall, key: int,
                        arguments: dict[str, Any]) -> ToolCall | str:
    """The call to run (with the approved arguments), or the refusal text for the model.

    ``key`` (the model round and the call's position) finds the request
    again on every execution of the task.
    """
    from ..engine._approvals import with_approval
    from ..engine._waits import with_deadline

    approval = spec.approval or Approval()
    index = TOOL_INDEX + key
    row = calls.recorded(index, "request", "a tool approval")
    if row is None:
        payload = {"kind": "tool_approval", "tool": call.name, "call_id": call.id,
                   "arguments": arguments}
        adapter: TypeAdapter[Any] = TypeAdapter(_decision_type(spec, arguments))
        row = calls.new_request(index, payload, adapter)
        row = with_deadline(dataclasses.replace(row, id=_rid(row.id, key)), approval.timeout)
        title = approval.title or f"Approve {call.name}"
        raise Interrupt([with_approval(row, payload, title, approval.assignees, approval.roles,
                                       approval.escalate_to)])
    if row.timed_out:
        return refusal(call.name, "no one approved it in time")
    if row.answer is None:
        raise Interrupt([row])
    decision = ToolDecision.model_validate(decode(row.answer))
    if not decision.approve:
        return refusal(call.name, decision.comment)
    chosen = decision.arguments if decision.arguments is not None else arguments
    try:
        checked = spec.args.model_validate(chosen).model_dump(mode="json")
    except ValidationError as exc:
        return f"error: the approved arguments do not fit {call.name!r}: {exc.errors()[:3]}"
    if decision.arguments_digest is not None and \
            decision.arguments_digest != arguments_digest(chosen):
        return refusal(call.name, "the approved arguments do not match their recorded digest")
    return call.model_copy(update={"arguments": checked})


def _rid(rid: str, key: int) -> str:
    return f"{rid.rpartition('#')[0]}#tool{key}"
