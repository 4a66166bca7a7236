"""``SqlApprovals``: the SQL store's approvals methods (answers by policy, outbox, users, sessions).

A mixin of :class:`~durable_flow.store.sql._base.SqlStore`; each method is
one transaction of :mod:`~durable_flow.store.sql._outbox`.
"""

from __future__ import annotations

from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING

from ...model._decisions import DecisionVia
from .._outbox_rows import NotificationRow, SessionRow, UserRow
from .._protocols import Lease, RequestRow
from ._outbox import (
    add_user_tx,
    answer_by_policy_tx,
    due_notices_tx,
    get_user_tx,
    list_users_tx,
    notice_done_tx,
    notice_failed_tx,
    notices_of_tx,
    prune_notices_tx,
    reassign_tx,
    remove_user_tx,
    set_roles_tx,
)
from ._sessions import end_session_tx, get_session_tx, set_password_tx, start_session_tx

if TYPE_CHECKING:
    from ._ops import Driver
    from ._tables import Queries

__all__ = ["SqlApprovals"]


class SqlApprovals:
    """Approvals on SQL (see ``store._protocols.Approvals``)."""

    _q: Queries

    if TYPE_CHECKING:
        @property
        def driver(self) -> Driver:
            """The backend's driver (``SqlStore.driver``)."""

    async def answer_by_policy(self, lease: Lease, row: RequestRow, principal: str) -> RequestRow:
        """Record a request a policy answered, with its decision, under the lease."""
        return await self.driver.run(partial(answer_by_policy_tx, self._q, lease, row, principal),
                                     write=True)

    async def reassign(self, run_id: str, request_id: str, assignees: tuple[str, ...],
                       roles: tuple[str, ...], by: str | None, via: DecisionVia = "api") -> RequestRow:
        """Give an open request to other people (decision and notification with it)."""
        return await self.driver.run(partial(reassign_tx, self._q, run_id, request_id, assignees,
                                             roles, by, via), write=True)

    async def due_notifications(self, limit: int = 50) -> list[NotificationRow]:
        """Undelivered notifications whose time has come, oldest first."""
        return await self.driver.run(partial(due_notices_tx, self._q, limit), write=False)

    async def notification_sent(self, notice_id: str) -> None:
        """Mark a notification delivered."""
        await self.driver.run(partial(notice_done_tx, self._q, notice_id), write=True,
                              idempotent=True)

    async def notification_failed(self, notice: NotificationRow, error: str) -> None:
        """Put a notification off after a failed delivery."""
        await self.driver.run(partial(notice_failed_tx, self._q, notice, error), write=True)

    async def prune_notifications(self, delivered_before: datetime) -> int:
        """Delete delivered notifications of requests no longer open; how many."""
        return await self.driver.run(partial(prune_notices_tx, self._q, delivered_before),
                                     write=True)

    async def notifications(self, run_id: str) -> list[NotificationRow]:
        """A run's notifications, oldest first."""
        return await self.driver.run(partial(notices_of_tx, self._q, run_id), write=False)

    async def add_user(self, user: UserRow) -> None:
        """Add a person (``InvalidInputError`` when the name is taken)."""
        await self.driver.run(partial(add_user_tx, self._q, user), write=True)

    async def get_user(self, name: str) -> UserRow | None:
        """One person, or None."""
        return await self.driver.run(partial(get_user_tx, self._q, name), write=False)

    async def list_users(self) -> list[UserRow]:
        """Every person, by name."""
        return await self.driver.run(partial(list_users_tx, self._q), write=False)

    async def remove_user(self, name: str) -> bool:
        """Remove a person; False when there was none."""
        return await self.driver.run(partial(remove_user_tx, self._q, name), write=True)

    async def set_user_roles(self, name: str, roles: tuple[str, ...]) -> bool:
        """Replace a person's roles; False when there is no such person."""
        return await self.driver.run(partial(set_roles_tx, self._q, name, roles), write=True)

    async def set_user_password(self, name: str, password_hash: str) -> bool:
        """Replace a person's password hash and end their sessions; False when there is none."""
        return await self.driver.run(partial(set_password_tx, self._q, name, password_hash),
                                     write=True)

    async def start_session(self, session: SessionRow) -> None:
        """Keep a new web session (expired ones are dropped on the way)."""
        await self.driver.run(partial(start_session_tx, self._q, session), write=True)

    async def get_session(self, id_hash: str) -> SessionRow | None:
        """The web session with this id hash, or None."""
        return await self.driver.run(partial(get_session_tx, self._q, id_hash), write=False)

    async def end_session(self, id_hash: str) -> bool:
        """End one web session; False when there was none."""
        return await self.driver.run(partial(end_session_tx, self._q, id_hash), write=True,
                                     idempotent=True)
