"""The rules of approvals every store applies: who may answer a request, what a decision records.

A request's approval (``RequestRow.approval``, JSON) holds its ``title``,
``assignees``, ``roles``, ``escalate_to`` and whether it was ``escalated``.
:func:`check_permitted` is the rule an answer passes in the transaction that
records it; :func:`decision_for` drafts the decision that transaction writes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from ..errors import NotAuthorizedError
from ..model._approvals import Principal, permits, who_may
from ..model._decisions import DecisionKind, DecisionVia
from ..model._serde import decode
from ._rows import RequestRow

__all__ = ["Answerer", "Approval", "DecisionDraft", "approval_from", "approval_of", "check_permitted",
           "decision_for"]


@dataclass(frozen=True, slots=True)
class Approval:
    """Who a request is for, decoded from ``RequestRow.approval``."""

    title: str | None = None
    assignees: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    escalate_to: tuple[str, ...] = ()
    escalated: bool = False
    window: float | None = None  # the deadline's length in seconds (an escalation gets it again)
    #: (assignees, roles) it had before each reassignment or escalation: they stay
    #: participants of the run (``model/_access.py``)
    before: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = ()

    def encode(self) -> bytes:
        """The JSON stored in ``requests.approval``."""
        data: dict[str, Any] = {
            "title": self.title, "assignees": list(self.assignees), "roles": list(self.roles),
            "escalate_to": list(self.escalate_to), "escalated": self.escalated,
            "window": self.window}
        if self.before:
            data["before"] = [[list(people), list(roles)] for people, roles in self.before]
        return orjson.dumps(data)

    def moved_to(self, assignees: tuple[str, ...], roles: tuple[str, ...], **changes: Any
                 ) -> Approval:
        """The approval given to others, remembering who had it."""
        return dataclasses.replace(self, assignees=assignees, roles=roles,
                                   before=(*self.before, (self.assignees, self.roles)), **changes)

    @property
    def escalates(self) -> bool:
        """Whether its deadline reassigns it rather than closing it (once)."""
        return bool(self.escalate_to) and not self.escalated

    @property
    def assigned(self) -> bool:
        """Whether only some principals may answer."""
        return bool(self.assignees or self.roles)


def approval_of(row: RequestRow) -> Approval:
    """The approval of a request row (an empty one when it has none)."""
    return approval_from(row.approval)


def approval_from(stored: bytes | None) -> Approval:
    """An approval from its stored JSON (``requests.approval``; None: an empty one)."""
    if stored is None:
        return Approval()
    data: dict[str, Any] = orjson.loads(stored)
    return Approval(title=data.get("title"), assignees=tuple(data.get("assignees", ())),
                    roles=tuple(data.get("roles", ())), escalate_to=tuple(data.get("escalate_to", ())),
                    escalated=bool(data.get("escalated", False)), window=data.get("window"),
                    before=tuple((tuple(p), tuple(r)) for p, r in data.get("before", ())))


@dataclass(frozen=True, slots=True)
class Answerer:
    """Who gives answers and how: recorded in each answer's decision."""

    principal: Principal | None = None
    via: DecisionVia = "api"
    comment: str | None = None
    kind: DecisionKind = "answer"

    @property
    def by(self) -> str | None:
        """The principal id recorded (None when nobody was named)."""
        return None if self.principal is None else self.principal.id


def check_permitted(run_id: str, row: RequestRow, answerer: Answerer | None) -> None:
    """Raise ``NotAuthorizedError`` unless ``answerer`` may answer ``row``."""
    approval = approval_of(row)
    principal = None if answerer is None else answerer.principal
    if not permits(principal, approval.assignees, approval.roles):
        raise NotAuthorizedError(None if principal is None else principal.id, "answer this request",
                                 run_id=run_id, request_id=row.id,
                                 allowed=who_may(approval.assignees, approval.roles))


@dataclass(frozen=True, slots=True)
class DecisionDraft:
    """A decision before the store chains it (``seq`` and ``digest`` come from the store)."""

    request_id: str
    node: str
    kind: DecisionKind
    answer: Any
    by: str | None
    via: DecisionVia
    at: datetime
    comment: str | None
    payload: Any = field(repr=False)


def decision_for(row: RequestRow, answer: bytes, answerer: Answerer | None, at: datetime) -> DecisionDraft:
    """The decision recording ``answer`` (encoded) to ``row``."""
    who = answerer or Answerer()
    return DecisionDraft(row.id, row.node, who.kind, orjson.loads(answer), who.by, who.via, at,
                         who.comment, decode(row.payload))
