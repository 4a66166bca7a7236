"""Which links and addresses a notification carries, on every store.

A personal signed link only where its principal alone reads it (their
email); the request's page for everyone else (a channel, a role); an
assignee named by user name is emailed at the user's address.
"""

from __future__ import annotations

from typing import Any

import structlog
from notifykit import Recorder

from durable_flow import END, Blackboard, Runtime, WorkflowBuilder
from durable_flow.runtime.notifications._outbox import Outbox, outbox_for
from durable_flow.runtime.people._links import SECRET_ENV, LinkSigner
from durable_flow.runtime.people._users import Users


class Expense(Blackboard):
    approved: bool | None = None


def flow(**asks: Any) -> Any:
    b = WorkflowBuilder("expense", state=Expense)

    @b.node()
    async def approve(state: Expense, ctx: Any) -> dict[str, Any]:
        return {"approved": await ctx.request({"question": "Approve 40 EUR?"}, bool, **asks)}

    b.set_entry("approve").add_edge("approve", END)
    return b.build()


async def delivered(rt: Runtime, **asks: Any) -> Any:
    result = await rt.run(flow(**asks), {})
    recorder = Recorder()
    outbox = Outbox(rt.store, [recorder], base_url="https://inbox.example/",
                    signer=LinkSigner("s3cret"))
    assert await outbox.deliver_due() == 1
    (note,) = recorder.sent
    return result, note


async def test_an_assignee_named_by_user_name_is_emailed_at_the_users_address(
        rt: Runtime) -> None:
    await Users(rt.store).add("alice", "pw-alice-1", email="alice@example.com")
    await Users(rt.store).add("bob", "pw-bob-1")  # no address: nowhere to send a link
    result, note = await delivered(rt, assignees=["alice", "bob", "carol@example.com"])
    assert dict(note.emails) == {"alice@example.com": "alice",
                                 "carol@example.com": "carol@example.com"}
    assert set(note.links) == {"alice", "carol@example.com"}  # none for bob
    assert note.link_for("alice").startswith(f"https://inbox.example/approve/{result.run_id}/")
    assert note.link_for("bob") == f"https://inbox.example/runs/{result.run_id}"


async def test_a_request_for_a_role_only_links_to_its_page(rt: Runtime) -> None:
    result, note = await delivered(rt, roles=["finance"])
    assert note.links == {}
    assert note.link == note.page == f"https://inbox.example/runs/{result.run_id}"
    assert note.as_json()["link"] == note.page


async def test_the_channel_message_never_carries_a_personal_link(rt: Runtime) -> None:
    await Users(rt.store).add("fiona", "pw-fiona-1", roles=["finance"], email="fiona@example.com")
    result, note = await delivered(rt, assignees=["alice@example.com"], roles=["finance"])
    assert set(note.links) == {"alice@example.com", "fiona"}
    body = str(note.as_json())
    assert "/approve/" not in body and "token=" not in body
    assert f"https://inbox.example/runs/{result.run_id}" in body


def test_an_outbox_without_secret_or_base_url_warns_at_once(monkeypatch: Any) -> None:
    from durable_flow import MemoryStore

    monkeypatch.delenv(SECRET_ENV, raising=False)
    with structlog.testing.capture_logs() as logs:
        outbox = outbox_for(MemoryStore(), [Recorder()], "https://inbox.example", 1.0)
        assert outbox is not None and outbox.signer is None
        outbox_for(MemoryStore(), [Recorder()], None, 1.0)
    reasons = [e["reason"] for e in logs if e["event"] == "notifications_without_links"]
    assert len(reasons) == 2
    assert SECRET_ENV in reasons[0] and "no personal answer link" in reasons[0]
    assert "no base URL" in reasons[1]
    monkeypatch.setenv(SECRET_ENV, "s3cret")
    with structlog.testing.capture_logs() as logs:
        assert outbox_for(MemoryStore(), [Recorder()], "https://inbox.example", 1.0).signer
    assert not [e for e in logs if e["event"] == "notifications_without_links"]
