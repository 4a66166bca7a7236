"""Effects in doubt and tool approvals: the records a person answers with, and ``NOT_DONE``.

A ``ctx.step(..., in_doubt="ask")`` whose start was recorded but whose result
was not (a crash in between) is *in doubt*: its ``reconcile`` says what
happened (returning :data:`NOT_DONE` when the effect did not happen), or a
person answers a request of kind ``in_doubt`` with an :class:`InDoubtDecision`.
An agent tool marked ``approval=`` (an :class:`Approval`, or True) asks a
person before each call (a request of kind ``tool_approval``), answered with
a :class:`ToolDecision`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict
from pydantic.json_schema import SkipJsonSchema

from ..errors import InvalidInputError

__all__ = ["NOT_DONE", "Approval", "InDoubt", "InDoubtDecision", "ToolDecision",
           "arguments_digest", "complete_decision"]

InDoubt = Literal["rerun", "ask"]
"""What a step does when it finds its start recorded without a result."""


class _NotDone:
    """What a ``reconcile`` function returns when the effect did not happen."""

    _instance: _NotDone | None = None

    def __new__(cls) -> _NotDone:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NOT_DONE"

    def __bool__(self) -> bool:
        return False


NOT_DONE: Any = _NotDone()
"""Returned by a step's ``reconcile`` when the effect did not happen: the step's ``fn`` runs."""


class InDoubtDecision(BaseModel):
    """A person's answer to an in-doubt step (a request of kind ``in_doubt``).

    ``done=True``: the effect happened; ``result`` is recorded as the step's
    result and ``fn`` is not called. ``done=False``: it did not; ``fn`` runs
    (once: should that attempt be cut off too, the step is in doubt again
    and asks again).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    done: bool
    result: Any = None


class ToolDecision(BaseModel):
    """A person's answer to a tool call (a request of kind ``tool_approval``).

    ``approve=True`` runs the tool once, with ``arguments`` when given (an
    edit: every argument the tool takes, checked against its parameters),
    else with the arguments the model proposed. ``approve=False`` never runs
    it: the model is told the call was refused, with ``comment``. The
    recorded answer carries ``arguments`` (those that run) and
    ``arguments_digest`` (sha256 of their canonical JSON), filled in when the
    answer is recorded, so the decision names exactly what ran.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    approve: bool
    arguments: dict[str, Any] | None = None
    comment: str | None = None
    # filled in when the answer is recorded; not part of what a person answers
    arguments_digest: SkipJsonSchema[str | None] = None


@dataclass(frozen=True, slots=True)
class Approval:
    """Who approves each call of a tool (``durable_flow.tool(approval=Approval(...))``).

    ``title`` is the line a person reads first (default: "Approve <tool>"),
    ``assignees`` principal ids and ``roles`` role names that may answer
    (none: anyone); ``timeout`` (seconds) and ``escalate_to`` work as on
    ``ctx.request``: at the deadline the request goes to ``escalate_to``
    once; with no escalation left an unanswered call is refused.
    """

    title: str | None = None
    assignees: Sequence[str] = ()
    roles: Sequence[str] = ()
    timeout: float | None = None
    escalate_to: Sequence[str] = ()

    def __post_init__(self) -> None:
        for name in ("assignees", "roles", "escalate_to"):
            value = getattr(self, name)
            if isinstance(value, str):
                raise InvalidInputError(f"Approval({name}=...) takes a list, not the string "
                                        f"{value!r}")
            object.__setattr__(self, name, tuple(value))


def arguments_digest(arguments: Any) -> str:
    """sha256 (hex) of the canonical JSON (sorted keys) of a tool call's arguments."""
    return hashlib.sha256(orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS)).hexdigest()


def complete_decision(payload: Any, answer: Any) -> Any:
    """An answer to a tool approval with the arguments that will run and their digest.

    Called when the answer is recorded (``Runtime.respond``/``resume``), so
    the stored answer, and the decision that seals it, name what runs.
    Other answers, and refusals, are returned as they are.
    """
    if not isinstance(payload, dict) or payload.get("kind") != "tool_approval" or \
            not isinstance(answer, dict) or answer.get("approve") is not True:
        return answer
    arguments = answer.get("arguments")
    if arguments is None:
        arguments = payload.get("arguments", {})
    return {**answer, "arguments": arguments, "arguments_digest": arguments_digest(arguments)}
