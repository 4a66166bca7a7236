"""Deadlines, policy answers, reassignments, the notification outbox and users on SQL.

Every transaction here that changes a request writes its decision and its
notification in the same transaction (the rules are
:mod:`durable_flow.store._outbox_rows`, shared with the memory store), so a
crash after an escalation loses neither.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import orjson

from ...errors import InvalidInputError, RunNotFoundError, RunNotResumableError, UnknownRequestError
from ...model._clock import utcnow
from ...model._decisions import DecisionVia
from .._approval_rows import DecisionDraft
from .._outbox_rows import (
    CLOSED,
    NotificationRow,
    UserRow,
    at_deadline,
    opened_notices,
    reassigned,
    retry_delay,
)
from .._protocols import Lease, RequestRow
from . import _codec as t
from ._decisions import approvals_of, record_decisions_tx
from ._ops import Tx, execute, execute_many, fetch, lock_run
from ._sessions import end_user_sessions_tx
from ._shared import check_lease

if TYPE_CHECKING:
    from ._tables import Queries

__all__ = [
    "add_user_tx", "answer_by_policy_tx", "deadlines_tx", "due_notices_tx", "get_user_tx",
    "list_users_tx", "notice_done_tx", "notice_failed_tx", "notices_of_tx", "notices_tx", "opened_tx",
    "prune_notices_tx", "reassign_tx", "remove_user_tx", "set_roles_tx",
]


def deadlines_tx(q: Queries, run_id: str, now: datetime) -> Tx[bool]:
    """Escalate or close the run's requests past their deadline; True if any changed."""
    a = approvals_of(q)
    due = [t.request_from_row(r) for r in (yield from fetch(a.req_due, run_id=run_id,
                                                             now=t.to_us(now)))]
    drafts: list[DecisionDraft] = []
    notices: list[NotificationRow] = []
    for row in due:
        out = at_deadline(row, now)
        if out.closed:
            yield from execute(a.req_close, run_id=run_id, request_id=row.id, closed=CLOSED,
                               now=t.to_us(now))
        else:
            yield from execute(a.req_set_approval, run_id=run_id, request_id=row.id,
                               new_approval=out.row.approval,
                               new_expires=None if out.row.expires_at is None
                               else t.to_us(out.row.expires_at))
        drafts.extend([out.decision] if out.decision else [])
        notices.extend([out.notice] if out.notice else [])
    yield from record_decisions_tx(q, run_id, drafts)
    yield from notices_tx(q, notices)
    return bool(due)


def withdraw_tx(q: Queries, run_id: str, ids: Sequence[str], now: datetime) -> Tx[None]:
    """Close the open waits ``ids`` unanswered; each request to a person gets a "withdrawn" decision."""
    a = approvals_of(q)
    drafts: list[DecisionDraft] = []
    for rid in ids:
        rows = yield from fetch(q.req_get, run_id=run_id, request_id=rid)
        if not rows:
            continue
        row = t.request_from_row(rows[0])
        if row.answer is not None:
            continue  # answered (or closed) meanwhile: that stays as it was
        yield from execute(a.req_close, run_id=run_id, request_id=rid, closed=CLOSED,
                           now=t.to_us(now))
        if row.kind == "request":
            drafts.append(DecisionDraft(row.id, row.node, "withdrawn", None, None, "runtime", now,
                                        None, _payload(row)))
    yield from record_decisions_tx(q, run_id, drafts)


def notices_tx(q: Queries, notices: Sequence[NotificationRow]) -> Tx[None]:
    """Write outbox rows (one already there is kept)."""
    yield from execute_many(approvals_of(q).out_insert, [_notice_params(n) for n in notices])


def opened_tx(q: Queries, requests: Sequence[RequestRow], now: datetime) -> Tx[None]:
    """The outbox rows of the requests a commit opens."""
    yield from notices_tx(q, opened_notices(list(requests), now))


def answer_by_policy_tx(q: Queries, lease: Lease, row: RequestRow, principal: str) -> Tx[RequestRow]:
    """Record a request a policy answered and its decision (a repeat returns the first)."""
    yield from check_lease(q, lease)
    found = yield from fetch(q.req_get, run_id=lease.run_id, request_id=row.id)
    if found:
        return t.request_from_row(found[0])
    yield from execute(q.req_insert, **t.request_params(row, lease.run_id))
    yield from record_decisions_tx(q, lease.run_id, [DecisionDraft(
        row.id, row.node, "policy", orjson.loads(row.answer or b"null"), principal, "policy",
        row.answered_at or utcnow(), None, _payload(row))])
    return row


def reassign_tx(q: Queries, run_id: str, request_id: str, assignees: tuple[str, ...],
                roles: tuple[str, ...], by: str | None, via: DecisionVia = "api") -> Tx[RequestRow]:
    """Give an open request to other people: its decision and notification with it."""
    rows = yield from lock_run(q.run_get_locked, run_id)
    if not rows:
        raise RunNotFoundError(run_id)
    run, now = t.run_from_row(rows[0]), utcnow()
    if run.status.is_final:
        raise RunNotResumableError(run_id, run.status.value)
    found = yield from fetch(q.req_get, run_id=run_id, request_id=request_id)
    row = t.request_from_row(found[0]) if found else None
    if row is None or row.kind != "request" or row.answer is not None:
        raise UnknownRequestError(run_id, request_id)
    a = approvals_of(q)
    last = yield from fetch(a.dec_last, run_id=run_id)
    out = reassigned(row, assignees, roles, by, (last[0]["seq"] if last else 0) + 1, now, via)
    yield from execute(a.req_set_approval, run_id=run_id, request_id=request_id,
                       new_approval=out.row.approval,
                       new_expires=None if row.expires_at is None else t.to_us(row.expires_at))
    yield from record_decisions_tx(q, run_id, [out.decision] if out.decision else [])
    yield from notices_tx(q, [out.notice] if out.notice else [])
    return out.row


# -- delivery -------------------------------------------------------------------------------


def due_notices_tx(q: Queries, limit: int) -> Tx[list[NotificationRow]]:
    """Undelivered notifications whose time has come, oldest first."""
    rows = yield from fetch(approvals_of(q).out_due, now=t.to_us(utcnow()), n=limit)
    return [_notice(r) for r in rows]


def notice_done_tx(q: Queries, notice_id: str) -> Tx[None]:
    """Mark a notification delivered."""
    yield from execute(approvals_of(q).out_done, id=notice_id, now=t.to_us(utcnow()))


def notice_failed_tx(q: Queries, notice: NotificationRow, error: str) -> Tx[None]:
    """Put a notification off after a failed delivery (backoff by its attempts)."""
    due = utcnow() + retry_delay(notice.attempts + 1)
    yield from execute(approvals_of(q).out_retry, id=notice.id, due=t.to_us(due), error=error)


def prune_notices_tx(q: Queries, before: datetime) -> Tx[int]:
    """Delete notifications delivered before ``before`` whose request is no longer open."""
    return (yield from execute(approvals_of(q).out_prune, before=t.to_us(before)))


def notices_of_tx(q: Queries, run_id: str) -> Tx[list[NotificationRow]]:
    """A run's notifications, oldest first."""
    return [_notice(r) for r in (yield from fetch(approvals_of(q).out_list, run_id=run_id))]


# -- users ----------------------------------------------------------------------------------


def add_user_tx(q: Queries, user: UserRow) -> Tx[None]:
    """Add a person (``InvalidInputError`` when the name is taken)."""
    a = approvals_of(q)
    if (yield from fetch(a.user_get, name=user.name)):
        raise InvalidInputError(f"a user named {user.name!r} exists already")
    yield from execute(a.user_insert, name=user.name, password_hash=user.password_hash,
                       roles=orjson.dumps(list(user.roles)).decode(), email=user.email,
                       created_at=t.to_us(user.created_at or utcnow()))


def get_user_tx(q: Queries, name: str) -> Tx[UserRow | None]:
    """One person, or None."""
    rows = yield from fetch(approvals_of(q).user_get, name=name)
    return _user(rows[0]) if rows else None


def list_users_tx(q: Queries) -> Tx[list[UserRow]]:
    """Every person, by name."""
    return [_user(r) for r in (yield from fetch(approvals_of(q).user_list))]


def remove_user_tx(q: Queries, name: str) -> Tx[bool]:
    """Remove a person and end their sessions; False when there was none."""
    yield from end_user_sessions_tx(q, name)
    return bool((yield from execute(approvals_of(q).user_delete, name=name)))


def set_roles_tx(q: Queries, name: str, roles: tuple[str, ...]) -> Tx[bool]:
    """Replace a person's roles and end their sessions; False when there is no such person."""
    changed = bool((yield from execute(approvals_of(q).user_set_roles, name=name,
                                       new_roles=orjson.dumps(list(roles)).decode())))
    if changed:
        yield from end_user_sessions_tx(q, name)
    return changed


def _notice_params(n: NotificationRow) -> dict[str, object]:
    return {"id": n.id, "run_id": n.run_id, "request_id": n.request_id, "kind": n.kind,
            "body": n.body.decode(), "created_at": t.to_us(n.created_at), "attempts": n.attempts,
            "due_at": t.to_us(n.due_at), "delivered_at": None, "last_error": None}


def _notice(row: Mapping[str, Any]) -> NotificationRow:
    return NotificationRow(
        id=row["id"], run_id=row["run_id"], request_id=row["request_id"], kind=row["kind"],
        body=str(row["body"]).encode(), created_at=t.from_us(row["created_at"]),
        due_at=t.from_us(row["due_at"]), attempts=row["attempts"],
        delivered_at=None if row["delivered_at"] is None else t.from_us(row["delivered_at"]),
        last_error=row["last_error"])


def _user(row: Mapping[str, Any]) -> UserRow:
    return UserRow(name=row["name"], password_hash=row["password_hash"],
                   roles=tuple(orjson.loads(row["roles"])), email=row["email"],
                   created_at=t.from_us(row["created_at"]))


def _payload(row: RequestRow) -> Any:
    from ...model._serde import decode

    try:
        return decode(row.payload)
    except (ValueError, TypeError):
        return None
