"""The rules of deadlines, the outbox and users that every store applies.

:func:`at_deadline` decides what a request's deadline does: an approval with
``escalate_to`` not yet escalated is reassigned to those targets with a new
deadline of the same length (a decision of kind ``"escalation"`` and an
``"escalated"`` notification); anything else closes (timed out; a request
to a person records a ``"timeout"`` decision). :func:`notice_for` builds the
outbox row written in the transaction that opens, escalates or reassigns a
request; its id is fixed by what it tells, so writing it twice keeps one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

import orjson

from ..model._approvals import default_title, split_targets
from ..model._decisions import DecisionVia
from ..model._serde import decode
from ._approval_rows import Approval, DecisionDraft, approval_of
from ._rows import RequestRow

__all__ = [
    "CLOSED",
    "DeadlineOutcome",
    "NoticeKind",
    "NotificationRow",
    "SessionRow",
    "UserRow",
    "at_deadline",
    "notice_for",
    "opened_notices",
    "reassigned",
    "retry_delay",
]

#: The answer a wait closed by its time holds (with ``timed_out`` set).
CLOSED = b"null"

NoticeKind = Literal["opened", "escalated", "reassigned"]


@dataclass(frozen=True, slots=True)
class NotificationRow:
    """One row of the outbox: what to tell (``body``, JSON) and how its delivery goes."""

    id: str
    run_id: str
    request_id: str
    kind: NoticeKind
    body: bytes
    created_at: datetime
    due_at: datetime
    attempts: int = 0
    delivered_at: datetime | None = None
    last_error: str | None = None

    def fields(self) -> dict[str, Any]:
        """The body's fields (title, assignees, roles, workflow, ...)."""
        data: dict[str, Any] = orjson.loads(self.body)
        return data


@dataclass(frozen=True, slots=True)
class UserRow:
    """A person of the web app: name, argon2 hash, roles, optional email."""

    name: str
    password_hash: str
    roles: tuple[str, ...] = ()
    email: str | None = None
    created_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class SessionRow:
    """A web login: the sha256 of its id, its user (None: the admin token), its lifetime."""

    id_hash: str
    user_name: str | None
    created_at: datetime
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class DeadlineOutcome:
    """What a deadline did to a request: its new row, the decision and notification to write."""

    row: RequestRow
    closed: bool
    decision: DecisionDraft | None
    notice: NotificationRow | None


def notice_for(row: RequestRow, approval: Approval, kind: NoticeKind, now: datetime,
               suffix: str = "") -> NotificationRow:
    """The outbox row telling that ``row`` opened, escalated or was reassigned."""
    title = approval.title or default_title(_payload(row), row.node)
    body = {"kind": kind, "run_id": row.run_id, "request_id": row.id, "node": row.node,
            "workflow_name": row.workflow_name, "title": title,
            "assignees": list(approval.assignees), "roles": list(approval.roles)}
    return NotificationRow(id=f"{row.run_id}.{row.id}.{kind}{suffix}", run_id=row.run_id,
                           request_id=row.id, kind=kind, body=orjson.dumps(body), created_at=now,
                           due_at=now)


def opened_notices(rows: list[RequestRow] | tuple[RequestRow, ...], now: datetime
                   ) -> list[NotificationRow]:
    """The notifications of requests to people that a commit opens."""
    return [notice_for(r, approval_of(r), "opened", now) for r in rows if r.kind == "request"]


def at_deadline(row: RequestRow, now: datetime) -> DeadlineOutcome:
    """Escalate ``row`` (once, when it names ``escalate_to``) or close it."""
    approval = approval_of(row)
    if row.kind == "request" and approval.escalates:
        people, roles = split_targets(approval.escalate_to)
        new = approval.moved_to(people, roles, escalated=True)
        window = timedelta(seconds=approval.window or 0.0)
        moved = dataclasses.replace(row, approval=new.encode(), expires_at=now + window)
        answer = {"assignees": list(people), "roles": list(roles)}
        return DeadlineOutcome(moved, False, _draft(row, "escalation", answer, now),
                               notice_for(moved, new, "escalated", now))
    closed = dataclasses.replace(row, answer=CLOSED, answered_at=now, timed_out=True)
    decision = _draft(row, "timeout", None, now) if row.kind == "request" else None
    return DeadlineOutcome(closed, True, decision, None)


def reassigned(row: RequestRow, assignees: tuple[str, ...], roles: tuple[str, ...],
               by: str | None, seq: int, now: datetime,
               via: DecisionVia = "api") -> DeadlineOutcome:
    """``row`` given to other people by ``by`` (an admin) ``via`` a channel: decision, notice."""
    new = approval_of(row).moved_to(assignees, roles)
    moved = dataclasses.replace(row, approval=new.encode())
    draft = dataclasses.replace(
        _draft(row, "reassign", {"assignees": list(assignees), "roles": list(roles)}, now),
        by=by, via=via)
    return DeadlineOutcome(moved, False, draft, notice_for(moved, new, "reassigned", now,
                                                            f".{seq}"))


def retry_delay(attempts: int) -> timedelta:
    """How long a failed notification waits before its next try (1 s doubling, at most 5 min)."""
    return timedelta(seconds=min(300.0, 2.0 ** max(0, attempts - 1)))


def _draft(row: RequestRow, kind: Any, answer: Any, now: datetime) -> DecisionDraft:
    return DecisionDraft(row.id, row.node, kind, answer, None, "runtime", now, None, _payload(row))


def _payload(row: RequestRow) -> Any:
    try:
        return decode(row.payload)
    except (ValueError, TypeError):
        return None
