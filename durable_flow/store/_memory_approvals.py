"""The memory store's approvals: deadlines, policy answers, reassignments, outbox, users.

A mixin of ``MemoryStore`` (until it runs on the SQL base), following the
rules of :mod:`~durable_flow.store._outbox_rows` like the SQL stores; every
method holds the store's lock, so each is one atomic step.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import orjson

from ..errors import InvalidInputError, RunNotResumableError, UnknownRequestError
from ..model._clock import utcnow
from ..model._serde import decode
from ._approval_rows import DecisionDraft
from ._memory_decisions import MemoryDecisions
from ._outbox_rows import NotificationRow, UserRow, at_deadline, opened_notices, reassigned, retry_delay
from ._rows import Lease, RequestRow, RunRecord

__all__ = ["MemoryApprovals"]


class MemoryApprovals(MemoryDecisions):
    """Approvals kept in dicts (a mixin of ``MemoryStore``)."""

    _lock: asyncio.Lock
    _outbox: dict[str, NotificationRow]
    _users: dict[str, UserRow]

    if TYPE_CHECKING:
        def _check_lease(self, lease: Lease) -> RunRecord: ...

        def _require_run(self, run_id: str) -> RunRecord: ...

    # pieces of the store's own steps ------------------------------------------------------
    def _deadlines(self, run_id: str, now: datetime) -> bool:
        """Escalate or close the run's requests past their deadline; True if any changed."""
        due = sorted((r for r in self._requests.values()
                      if r.run_id == run_id and r.answer is None and r.expires_at is not None
                      and r.expires_at <= now), key=lambda r: (r.created_at, r.id))
        for row in due:
            out = at_deadline(row, now)
            self._requests[(run_id, row.id)] = out.row
            self._append(run_id, [out.decision] if out.decision else [])
            self._notify([out.notice] if out.notice else [])
        return bool(due)

    def _opened(self, rows: Sequence[RequestRow], now: datetime) -> None:
        """The outbox rows of requests a commit opens."""
        self._notify(opened_notices(list(rows), now))

    def _notify(self, notices: Sequence[NotificationRow]) -> None:
        for notice in notices:
            self._outbox.setdefault(notice.id, notice)

    # Approvals ------------------------------------------------------------------------------
    async def answer_by_policy(self, lease: Lease, row: RequestRow, principal: str) -> RequestRow:
        """Record a request a policy answered, with its decision, under the lease."""
        async with self._lock:
            self._check_lease(lease)
            key = (lease.run_id, row.id)
            if key in self._requests:
                return self._requests[key]
            self._requests[key] = row
            self._append(lease.run_id, [DecisionDraft(
                row.id, row.node, "policy", orjson.loads(row.answer or b"null"), principal,
                "policy", row.answered_at or utcnow(), None, _payload(row))])
            return row

    async def reassign(self, run_id: str, request_id: str, assignees: tuple[str, ...],
                       roles: tuple[str, ...], by: str | None) -> RequestRow:
        """Give an open request to other people (decision and notification with it)."""
        async with self._lock:
            run = self._require_run(run_id)
            if run.status.is_final:
                raise RunNotResumableError(run_id, run.status.value)
            row = self._requests.get((run_id, request_id))
            if row is None or row.kind != "request" or row.answer is not None:
                raise UnknownRequestError(run_id, request_id)
            seq = len(getattr(self, "_chains", {}).get(run_id, ())) + 1
            out = reassigned(row, assignees, roles, by, seq, utcnow())
            self._requests[(run_id, request_id)] = out.row
            self._append(run_id, [out.decision] if out.decision else [])
            self._notify([out.notice] if out.notice else [])
            return out.row

    async def due_notifications(self, limit: int = 50) -> list[NotificationRow]:
        """Undelivered notifications whose time has come, oldest first."""
        now = utcnow()
        due = [n for n in self._outbox.values() if n.delivered_at is None and n.due_at <= now]
        return sorted(due, key=lambda n: (n.due_at, n.id))[:limit]

    async def notification_sent(self, notice_id: str) -> None:
        """Mark a notification delivered."""
        notice = self._outbox.get(notice_id)
        if notice is not None:
            self._outbox[notice_id] = dataclasses.replace(notice, delivered_at=utcnow())

    async def notification_failed(self, notice: NotificationRow, error: str) -> None:
        """Put a notification off after a failed delivery."""
        kept = self._outbox.get(notice.id)
        if kept is not None:
            self._outbox[notice.id] = dataclasses.replace(
                kept, attempts=kept.attempts + 1, last_error=error,
                due_at=utcnow() + retry_delay(notice.attempts + 1))

    async def notifications(self, run_id: str) -> list[NotificationRow]:
        """A run's notifications, oldest first."""
        return sorted((n for n in self._outbox.values() if n.run_id == run_id),
                      key=lambda n: (n.created_at, n.id))

    async def add_user(self, user: UserRow) -> None:
        """Add a person (``InvalidInputError`` when the name is taken)."""
        if user.name in self._users:
            raise InvalidInputError(f"a user named {user.name!r} exists already")
        self._users[user.name] = dataclasses.replace(user, created_at=user.created_at or utcnow())

    async def get_user(self, name: str) -> UserRow | None:
        """One person, or None."""
        return self._users.get(name)

    async def list_users(self) -> list[UserRow]:
        """Every person, by name."""
        return [self._users[name] for name in sorted(self._users)]

    async def remove_user(self, name: str) -> bool:
        """Remove a person; False when there was none."""
        return self._users.pop(name, None) is not None

    async def set_user_roles(self, name: str, roles: tuple[str, ...]) -> bool:
        """Replace a person's roles; False when there is no such person."""
        if name not in self._users:
            return False
        self._users[name] = dataclasses.replace(self._users[name], roles=tuple(roles))
        return True


def _payload(row: RequestRow) -> Any:
    try:
        return decode(row.payload)
    except (ValueError, TypeError):
        return None
