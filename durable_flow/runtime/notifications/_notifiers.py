"""Telling people a request waits: ``Notification``, ``WebhookNotifier``, ``SmtpNotifier``.

A notification is written to the store's outbox in the same transaction as
the request opening or escalating; workers and ``durable-flow ui`` hand each
one to their notifiers until it is delivered (at least once). Every
notification has an ``id`` that each of its deliveries repeats (the
webhook's JSON ``id`` and ``Idempotency-Key`` header, the email's
``Message-ID``), so a receiver can drop duplicates. Each notifier also
retries a failed delivery a few times with exponential backoff before it
gives the notification back to the outbox.

What goes where: a signed answer link is personal (whoever holds it answers
as its principal, without a login), so it goes only to that person, in the
email to their address. A message to a shared channel (the webhook) carries
the link to the request's page (``page``), where a login is needed, and
its text escapes what comes from requests for Slack (``&``, ``<``, ``>``),
so data cannot mention ``<!channel>`` or dress a link as ``<url|label>``.
"""

from __future__ import annotations

import asyncio
import html
import smtplib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.utils import formatdate
from typing import Any, Literal, Protocol, runtime_checkable

from tenacity import AsyncRetrying, stop_after_attempt, wait_exponential

__all__ = ["Notification", "Notifier", "SmtpNotifier", "WebhookNotifier", "slack_escape"]


@dataclass(frozen=True, slots=True)
class Notification:
    """A request that opened or was escalated, to be told to its people.

    ``page`` is the request's page in the web app (a login needed; None
    without a base URL); ``links`` maps a principal id to its personal signed
    approval link (only for the principals emailed, and only with a secret),
    which only that principal's email carries; ``emails`` maps each address
    to tell to the principal it belongs to (assignees that are addresses or
    users with an address, and users with an address who hold a listed role).
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
    page: str | None = None

    @property
    def link(self) -> str | None:
        """The link anyone told may follow: the request's page (a login needed there)."""
        return self.page

    def link_for(self, principal: str) -> str | None:
        """The link for ``principal``'s own message: their signed link, else the page."""
        return self.links.get(principal) or self.page

    def text(self) -> str:
        """One readable line, without a link (an email's first line)."""
        return self._line(lambda part: part)

    def slack_text(self) -> str:
        """The webhook's ``text``: the line escaped for Slack, then the request page's link."""
        line = self._line(slack_escape)
        return f"{line} <{slack_escape(self.page)}|Open the request>" if self.page else line

    def _line(self, esc: Callable[[str], str]) -> str:
        who = ", ".join([*map(esc, self.assignees), *(f"role {esc(r)}" for r in self.roles)]) \
            or "anyone"
        verb = {"escalated": "was escalated to", "reassigned": "was reassigned to"}.get(
            self.kind, "waits for")
        return (f"{esc(self.title)} ({esc(self.workflow_name)}, run {esc(self.run_id)}) "
                f"{verb} {who}.")

    def as_json(self) -> dict[str, Any]:
        """The webhook body: Slack-compatible ``text`` plus the fields (no personal link)."""
        return {"id": self.id, "text": self.slack_text(), "kind": self.kind, "run": self.run_id,
                "request": self.request_id, "workflow": self.workflow_name, "title": self.title,
                "assignees": list(self.assignees), "roles": list(self.roles), "link": self.page}


def slack_escape(text: str) -> str:
    """``text`` with ``&``, ``<`` and ``>`` escaped as Slack's message format asks."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


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
    address, so a resend repeats it. An email has a ``Date``, a plain text
    part and an HTML part beside it, and the link once: the addressee's own
    signed link, else the request's page.
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
        message["Date"] = formatdate(usegmt=True)
        message["X-Durable-Flow-Notification"] = notification.id
        link = notification.link_for(principal)
        line = notification.text()
        ask = f"Answer it here: {link}" if link else "Answer it in the inbox."
        message.set_content(f"{line}\n\n{ask}\n")
        answer = (f'<p><a href="{html.escape(link)}">Answer it here</a></p>' if link
                  else "<p>Answer it in the inbox.</p>")
        message.add_alternative(f"<!doctype html><html><body><p>{html.escape(line)}</p>{answer}"
                                f"</body></html>\n", subtype="html")
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
