"""Delivering the notification outbox: ``Outbox`` (run by workers and ``durable-flow ui``).

Each undelivered notification whose time has come is turned into a
:class:`~durable_flow.runtime.notifications._notifiers.Notification` and handed
to every notifier. It names the email addresses to tell (assignees that are
addresses, assignees that are users with an address, and users with an
address who hold a listed role); with a base URL, the request's page; with a
base URL and a secret, a personal signed link for each principal emailed
(only their email carries it). Only when all of them took it is it
marked delivered; a failure puts it off with backoff, so it is delivered at
least once (a crash between sending and marking sends it again, with the
same id).

Sent notifications do not pile up: while serving, the outbox deletes those
delivered more than ``retention`` ago (default a week), every
``prune_interval`` seconds. Undelivered ones are never deleted, nor those
about a request still open (``CheckpointStore.prune_notifications``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Sequence
from datetime import timedelta
from urllib.parse import quote

from ..._logs import get_logger
from ...model._clock import utcnow
from ...store._outbox_rows import NotificationRow, UserRow
from ...store._protocols import CheckpointStore
from ..people._links import SECRET_ENV, LinkSigner
from ._notifiers import Notification, Notifier

__all__ = ["RETENTION", "Outbox", "outbox_for", "stop_outbox"]

_log = get_logger()

#: How long a delivered notification is kept before the outbox deletes it.
RETENTION = timedelta(days=7)


class Outbox:
    """Hands a store's due notifications to ``notifiers`` until each is delivered."""

    def __init__(self, store: CheckpointStore, notifiers: Sequence[Notifier], *,
                 base_url: str | None = None, signer: LinkSigner | None = None,
                 link_ttl: timedelta = timedelta(days=2), poll_interval: float = 1.0,
                 retention: timedelta = RETENTION, prune_interval: float = 600.0) -> None:
        self.store = store
        self.notifiers = list(notifiers)
        self.base_url = base_url
        self.signer = signer
        self.link_ttl = link_ttl
        self.poll_interval = poll_interval
        self.retention = retention
        self.prune_interval = prune_interval
        self._pruned_at: float | None = None
        self._stopping = asyncio.Event()

    async def deliver_due(self, limit: int = 50) -> int:
        """One pass: try every due notification once; how many were delivered."""
        due = await self.store.due_notifications(limit)
        if not due:
            return 0
        users = await self.store.list_users()
        delivered = 0
        for row in due:
            try:
                notification = self.notification(row, users)
                for notifier in self.notifiers:
                    await notifier.send(notification)
            except Exception as exc:
                _log.warning("notification_failed", id=row.id, run_id=row.run_id,
                             attempts=row.attempts + 1, error=str(exc) or type(exc).__name__)
                await self.store.notification_failed(row, str(exc) or type(exc).__name__)
                continue
            await self.store.notification_sent(row.id)
            delivered += 1
        return delivered

    async def prune_delivered(self) -> int:
        """Delete notifications delivered more than ``retention`` ago; how many.

        Undelivered ones stay, and so do those about a request still open.
        """
        removed = await self.store.prune_notifications(utcnow() - self.retention)
        self._pruned_at = time.monotonic()
        if removed:
            _log.info("notifications_pruned", removed=removed)
        return removed

    def notification(self, row: NotificationRow, users: Sequence[UserRow]) -> Notification:
        """What a row tells, with links and email addresses filled in."""
        f = row.fields()
        assignees, roles = tuple(f.get("assignees", ())), tuple(f.get("roles", ()))
        by_name = {u.name: u for u in users}
        emails: dict[str, str] = {}
        for who in assignees:
            user = by_name.get(who)
            if user is not None and user.email:  # an assignee named by user name
                emails.setdefault(user.email, user.name)
            elif "@" in who:
                emails.setdefault(who, who)
        for user in users:
            if user.email and any(r in roles for r in user.roles):
                emails.setdefault(user.email, user.name)
        links: dict[str, str] = {}
        if self.base_url and self.signer is not None:
            for who in emails.values():  # personal: only where that person alone reads it
                links.setdefault(who, self.signer.url(self.base_url, row.run_id, row.request_id,
                                                      who, self.link_ttl))
        page = (self.base_url.rstrip("/") + "/runs/" + quote(row.run_id, safe="")
                if self.base_url else None)
        return Notification(id=row.id, kind=row.kind, run_id=row.run_id,
                            request_id=row.request_id, workflow_name=f.get("workflow_name", ""),
                            title=f.get("title", row.request_id), assignees=assignees,
                            roles=roles, links=links, emails=emails, page=page)

    async def serve(self) -> None:
        """Deliver until :meth:`stop`, polling every ``poll_interval`` seconds.

        Every ``prune_interval`` seconds (and on the first pass) it also
        deletes what was delivered more than ``retention`` ago.
        """
        self._stopping.clear()
        while not self._stopping.is_set():
            try:
                await self.deliver_due()
                if self._pruned_at is None or \
                        time.monotonic() - self._pruned_at >= self.prune_interval:
                    await self.prune_delivered()
            except Exception as exc:
                _log.warning("outbox_unavailable", error=str(exc) or type(exc).__name__)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.poll_interval)

    def stop(self) -> None:
        """Make :meth:`serve` return after the pass in flight."""
        self._stopping.set()


def outbox_for(store: CheckpointStore, notifiers: Sequence[Notifier], base_url: str | None,
               poll_interval: float) -> Outbox | None:
    """A worker's outbox: None without notifiers; links signed with ``DURABLE_FLOW_SECRET``.

    Logs a warning at once when its notifications will lack links: without a
    base URL they carry none, without the secret no personal answer links.
    """
    if not notifiers:
        return None
    signer = None
    if not base_url:
        _log.warning("notifications_without_links",
                     reason="no base URL: notifications carry no link to the request; pass "
                            "base_url= (durable-flow worker --base-url)")
    elif os.environ.get(SECRET_ENV):
        signer = LinkSigner.from_env()
    else:
        _log.warning("notifications_without_links",
                     reason=f"{SECRET_ENV} is not set: emails carry the request page's link "
                            "(a login needed there), no personal answer link")
    return Outbox(store, notifiers, base_url=base_url, signer=signer,
                  poll_interval=max(poll_interval, 0.05))


async def stop_outbox(outbox: Outbox | None, task: asyncio.Task[None] | None) -> None:
    """Stop a worker's outbox and wait for its pass in flight."""
    if outbox is None or task is None:
        return
    outbox.stop()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(task, 10)
