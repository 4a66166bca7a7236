"""Telling people a request waits: ``Notification``, ``WebhookNotifier``, ``SmtpNotifier``.

A notification is written to the store's outbox in the same transaction as
the request opening or escalating; workers and ``durable-flow ui`` hand each
one to their notifiers until it is delivered (at least once). Every
notification has an ``id`` that each of its deliveries repeats (the
webhook's JSON ``id`` and ``Idempotency-Key`` header, the email's
``Message-ID``), so a receiver can drop duplicates. Each notifier also
retries a failed delivery a few times with exponential backoff before it
gives the notification back to the outbox.
"""

from __future__ import annotations

import asyncio
import smtplib
from collections.abc import Mapping
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any, Literal, Protocol, runtime_checkable

from tenacity import AsyncRetrying, stop_after_attempt, wait_exponential

__all__ = ["Notification", "Notifier", "SmtpNotifier", "WebhookNotifier"]


@dataclass(frozen=True, slots=True)
class Notification:
    """A request that opened or was escalated, to be told to its people.

    ``links`` maps a principal id to its signed approval link (empty without
    a base URL and secret); ``emails`` maps each address to tell to the
    principal it belongs to (assignees that are addresses, and users with an
    address who hold a listed role).
    """

    id: str
    kind: Literal["opened", "escalated", "reassigned"]
    run_id: str
    request_id: str
    workflow_name: str
    title: str
    assignees: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    links: Mapping[str, str] = field(default_factory=dict)
    emails: Mapping[str, str] = field(default_factory=dict)

    @property
    def link(self) -> str | None:
        """One link to show where only one fits (the first assignee's)."""
        return next(iter(self.links.values()), None)

    def text(self) -> str:
        """One readable line (Slack's ``text``)."""
        who = ", ".join([*self.assignees, *(f"role {r}" for r in self.roles)]) or "anyone"
        verb = {"escalated": "was escalated to", "reassigned": "was reassigned to"}.get(
            self.kind, "waits for")
        link = f" {self.link}" if self.link else ""
        return f"{self.title} ({self.workflow_name}, run {self.run_id}) {verb} {who}.{link}"

    def as_json(self) -> dict[str, Any]:
        """The webhook body: Slack-compatible ``text`` plus the fields."""
        return {"id": self.id, "text": self.text(), "kind": self.kind, "run": self.run_id,
                "request": self.request_id, "workflow": self.workflow_name, "title": self.title,
                "assignees": list(self.assignees), "roles": list(self.roles), "link": self.link,
                "links": dict(self.links)}


@runtime_checkable
class Notifier(Protocol):
    """Delivers notifications; ``send`` returns once delivered and raises otherwise."""

    async def send(self, notification: Notification) -> None:
        """Deliver ``notification`` (retrying a little); raise if it could not be."""


class _Retrying:
    attempts: int
    backoff: float

    def _retrying(self) -> AsyncRetrying:
        return AsyncRetrying(stop=stop_after_attempt(self.attempts), reraise=True,
                             wait=wait_exponential(multiplier=self.backoff, max=self.backoff * 16))


class WebhookNotifier(_Retrying):
    """POSTs each notification as JSON to ``url`` (a Slack incoming webhook works).

    A reply other than 2xx, or no reply, is retried ``attempts`` times in all
    with exponential backoff from ``backoff`` seconds.
    """

    def __init__(self, url: str, *, timeout: float = 10.0, attempts: int = 3, backoff: float = 0.5,
                 headers: Mapping[str, str] | None = None) -> None:
        self.url = url
        self.timeout = timeout
        self.attempts = attempts
        self.backoff = backoff
        self.headers = dict(headers or {})

    async def send(self, notification: Notification) -> None:
        """POST the notification; raise ``httpx.HTTPError`` after the last failed try."""
        import httpx

        headers = {**self.headers, "Idempotency-Key": notification.id}
        async with httpx.AsyncClient(timeout=self.timeout) as client:
            async for attempt in self._retrying():
                with attempt:
                    reply = await client.post(self.url, json=notification.as_json(), headers=headers)
                    reply.raise_for_status()

    def __repr__(self) -> str:
        return f"WebhookNotifier({self.url!r})"


class SmtpNotifier(_Retrying):
    """Emails each address of a notification (``Notification.emails``), with its link.

    Sent through the SMTP server at ``host:port`` from ``sender``;
    ``starttls`` and ``username``/``password`` when the server wants them.
    Each email's ``Message-ID`` is made from the notification id and the
    address, so a resend repeats it.
    """

    def __init__(self, host: str, port: int, sender: str, *, starttls: bool = False,
                 username: str | None = None, password: str | None = None, timeout: float = 10.0,
                 attempts: int = 3, backoff: float = 0.5) -> None:
        self.host, self.port, self.sender = host, port, sender
        self.starttls, self.username, self.password = starttls, username, password
        self.timeout, self.attempts, self.backoff = timeout, attempts, backoff

    async def send(self, notification: Notification) -> None:
        """Send one email per address; raise ``OSError``/``SMTPException`` after the last try."""
        messages = [self._message(notification, address, principal)
                    for address, principal in notification.emails.items()]
        if not messages:
            return
        async for attempt in self._retrying():
            with attempt:
                await asyncio.to_thread(self._deliver, messages)

    def _message(self, notification: Notification, address: str, principal: str) -> EmailMessage:
        message = EmailMessage()
        message["From"] = self.sender
        message["To"] = address
        message["Subject"] = f"Waiting for you: {notification.title}"
        message["Message-ID"] = f"<{notification.id}.{_local(address)}@durable-flow>"
        message["X-Durable-Flow-Notification"] = notification.id
        link = notification.links.get(principal) or notification.link
        body = [notification.text(), ""]
        body.append(f"Answer it here: {link}" if link else "Answer it in the inbox.")
        message.set_content("\n".join(body))
        return message

    def _deliver(self, messages: list[EmailMessage]) -> None:
        with smtplib.SMTP(self.host, self.port, timeout=self.timeout) as smtp:
            if self.starttls:
                smtp.starttls()
            if self.username is not None:
                smtp.login(self.username, self.password or "")
            for message in messages:
                smtp.send_message(message)

    def __repr__(self) -> str:
        return f"SmtpNotifier({self.host!r}, {self.port}, {self.sender!r})"


def _local(address: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in address)
