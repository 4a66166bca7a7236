from __future__ import annotations

import asyncio
import dataclasses
import email
import email.utils

import pytest
from notifykit import SmtpReceiver, WebhookReceiver, free_port

from durable_flow import Notification, SmtpNotifier, WebhookNotifier

NOTE = Notification(id="n-1", kind="opened", run_id="run-1", request_id="approve@1#0",
                    workflow_name="expenses", title="Approve 40 EUR for Alice?",
                    assignees=("alice@example.com",), roles=("finance",),
                    links={"alice@example.com": "http://x/approve/run-1/a?token=t"},
                    emails={"alice@example.com": "alice@example.com", "fin@example.com": "fin"},
                    page="http://x/runs/run-1")


async def _start_later(receiver, delay: float) -> None:
    await asyncio.sleep(delay)
    await asyncio.to_thread(receiver.start)


def test_webhook_body_is_slack_compatible_and_carries_the_fields():
    body = NOTE.as_json()
    assert body["text"] == ("Approve 40 EUR for Alice? (expenses, run run-1) waits for "
                            "alice@example.com, role finance. <http://x/runs/run-1|Open the request>")
    assert {k: body[k] for k in ("id", "run", "request", "title", "assignees", "link")} == {
        "id": "n-1", "run": "run-1", "request": "approve@1#0", "title": "Approve 40 EUR for Alice?",
        "assignees": ["alice@example.com"], "link": "http://x/runs/run-1"}


def test_a_channel_gets_the_request_page_never_a_personal_link():
    body = NOTE.as_json()
    assert "token=" not in str(body) and "links" not in body
    assert body["link"] == "http://x/runs/run-1"


def test_request_text_is_escaped_for_slack():
    note = dataclasses.replace(NOTE, title="<!channel> <https://evil.example|Approve> & co",
                               workflow_name="<!here>", assignees=("<@U123>",))
    text = note.as_json()["text"]
    assert "<!channel>" not in text and "<https://evil.example|" not in text
    assert "<!here>" not in text and "<@U123>" not in text
    assert text.startswith("&lt;!channel&gt; &lt;https://evil.example|Approve&gt; &amp; co "
                           "(&lt;!here&gt;, run run-1) waits for &lt;@U123&gt;")
    assert text.endswith(" <http://x/runs/run-1|Open the request>")  # the one link is ours
    assert note.as_json()["title"] == note.title  # the fields stay as they are


async def test_webhook_is_retried_until_the_receiver_is_up_and_repeats_its_id():
    receiver = WebhookReceiver(free_port(), fail=1)
    starter = asyncio.create_task(_start_later(receiver, 0.3))
    try:
        await WebhookNotifier(receiver.url, attempts=8, backoff=0.05).send(NOTE)
    finally:
        await starter
        receiver.stop()
    assert len(receiver.received) == 2  # one 503 (a duplicate for the receiver), then 200
    assert {key for key, _ in receiver.received} == {"n-1"}
    assert {body["id"] for _, body in receiver.received} == {"n-1"}


async def test_webhook_gives_up_after_its_attempts():
    port = free_port()
    with pytest.raises(Exception):  # noqa: B017 (httpx's connect error)
        await WebhookNotifier(f"http://127.0.0.1:{port}/", attempts=2, backoff=0.01).send(NOTE)


async def test_smtp_mails_every_address_once_the_server_is_up_with_a_stable_message_id():
    receiver = SmtpReceiver(free_port(), fail=1)
    starter = asyncio.create_task(_start_later(receiver, 0.3))
    try:
        await SmtpNotifier("127.0.0.1", receiver.port, "flows@example.com", attempts=8,
                           backoff=0.05).send(NOTE)
    finally:
        await starter
        receiver.stop()
    parsed = [(rcpt, email.message_from_string(text)) for rcpt, text in receiver.messages]
    delivered = {tuple(rcpt) for rcpt, _ in parsed}
    assert delivered == {("alice@example.com",), ("fin@example.com",)}
    ids: dict[str, set[str]] = {}
    for rcpt, message in parsed:
        ids.setdefault(rcpt[0], set()).add(message["Message-ID"])
        assert message["X-Durable-Flow-Notification"] == "n-1"
        assert message["Subject"] == "Waiting for you: Approve 40 EUR for Alice?"
    assert len(parsed) == 3 and all(len(v) == 1 for v in ids.values())  # a resend repeats its Message-ID
    alice = next(m for r, m in parsed if r == ["alice@example.com"])
    fin = next(m for r, m in parsed if r == ["fin@example.com"])
    for message in (alice, fin):
        assert message["Date"] and email.utils.parsedate_to_datetime(message["Date"]).tzinfo
        assert message.is_multipart()
        kinds = [part.get_content_type() for part in message.get_payload()]
        assert kinds == ["text/plain", "text/html"]
    text, page = (part.get_payload(decode=True).decode() for part in alice.get_payload())
    assert text.count("http://x/approve/run-1/a?token=t") == 1  # the link once
    assert "Answer it here: http://x/approve/run-1/a?token=t" in text
    assert page.count('href="http://x/approve/run-1/a?token=t"') == 1
    # fin's email has no personal link of theirs: the request's page, never alice's link
    fin_text = fin.get_payload()[0].get_payload(decode=True).decode()
    assert "token=" not in str(fin) and "Answer it here: http://x/runs/run-1" in fin_text


async def test_an_email_escapes_request_text_in_its_html_part():
    receiver = SmtpReceiver(free_port())
    receiver.start()
    note = dataclasses.replace(NOTE, title='<img src=x onerror="alert(1)"> & pay')
    try:
        await SmtpNotifier("127.0.0.1", receiver.port, "flows@example.com").send(note)
    finally:
        receiver.stop()
    (_, text), *_ = receiver.messages
    message = email.message_from_string(text)
    page = message.get_payload()[1].get_payload(decode=True).decode()
    assert "<img" not in page and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt; &amp; pay" in page
