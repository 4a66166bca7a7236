"""The notification outbox and the web app's people, on every store."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from notifykit import Recorder
from waitkit import eventually, serving

from durable_flow import (
    END,
    Blackboard,
    InvalidInputError,
    Principal,
    RunStatus,
    Runtime,
    Worker,
    WorkflowBuilder,
)
from durable_flow.runtime.notifications._outbox import Outbox
from durable_flow.runtime.people._links import LinkSigner
from durable_flow.runtime.people._users import Users
from durable_flow.store._protocols import CheckpointStore


class Expense(Blackboard):
    approved: bool | None = None


def flow() -> Any:
    b = WorkflowBuilder("expense", state=Expense)

    @b.node()
    async def approve(state: Expense, ctx: Any) -> dict[str, Any]:
        question = {"question": "Approve 40 EUR?", "amount": 40}
        return {"approved": await ctx.request(question, bool, assignees=["alice@example.com"],
                                              roles=["finance"])}

    b.set_entry("approve")
    b.add_edge("approve", END)
    return b.build()


async def test_a_worker_delivers_the_opened_notification(
        store_factory: Callable[[], CheckpointStore]) -> None:
    store = store_factory()
    async with Runtime(store) as rt:
        await Users(store).add("fiona", "pw", roles=["finance"], email="fiona@example.com")
        result = await rt.run(flow(), {})
        assert result.status is RunStatus.WAITING
        recorder = Recorder()
        async with Worker(store_factory(), [flow()], poll_interval=0.05,
                          notifiers=[recorder]) as worker, serving(worker):
            async def sent() -> bool:
                return bool(recorder.sent)
            await eventually(sent)
        (note,) = recorder.sent
        assert (note.kind, note.run_id, note.title) == ("opened", result.run_id, "Approve 40 EUR?")
        assert (note.assignees, note.roles) == (("alice@example.com",), ("finance",))
        assert dict(note.emails) == {"alice@example.com": "alice@example.com",
                                     "fiona@example.com": "fiona"}
        (row,) = await store.notifications(result.run_id)
        assert row.id == note.id and row.delivered_at is not None
        assert await store.due_notifications() == []


async def test_a_failed_delivery_is_tried_again_with_the_same_id(rt: Runtime) -> None:
    result = await rt.run(flow(), {})
    recorder = Recorder(fail=1)
    outbox = Outbox(rt.store, [recorder], base_url="http://inbox.test",
                    signer=LinkSigner("s3cret"))
    assert await outbox.deliver_due() == 0
    (row,) = await rt.store.notifications(result.run_id)
    assert (row.attempts, row.last_error, row.delivered_at) == (1, "receiver down", None)
    assert await rt.store.due_notifications() == []  # put off by its backoff

    async def delivered() -> bool:
        return await outbox.deliver_due() == 1
    await eventually(delivered, timeout=5)
    first, second = recorder.sent
    assert first.id == second.id == row.id
    assert second.links["alice@example.com"].startswith(f"http://inbox.test/approve/{result.run_id}/")


async def test_delivered_notifications_go_after_their_retention_undelivered_ones_never(
        rt: Runtime) -> None:
    from datetime import timedelta

    from durable_flow.model._clock import utcnow

    answered = await rt.run(flow(), {})
    outbox = Outbox(rt.store, [Recorder()])
    assert await outbox.deliver_due() == 1
    await rt.respond(answered.run_id, {answered.pending_requests[0].id: True}, by="alice@example.com")
    still_open = await rt.run(flow(), {})
    assert await outbox.deliver_due() == 1  # delivered, but its request is open
    unsent = await rt.run(flow(), {})  # never delivered
    assert await rt.store.prune_notifications(utcnow() - timedelta(hours=1)) == 0  # too recent
    assert await rt.store.prune_notifications(utcnow() + timedelta(days=30)) == 1
    assert await rt.store.notifications(answered.run_id) == []
    (kept,) = await rt.store.notifications(still_open.run_id)
    assert kept.delivered_at is not None
    (waiting,) = await rt.store.notifications(unsent.run_id)
    assert waiting.delivered_at is None
    # serving prunes on its own, with its retention (here: at once)
    await rt.respond(still_open.run_id, {still_open.pending_requests[0].id: True},
                     by="alice@example.com")
    failing = Outbox(rt.store, [Recorder(fail=1_000)], retention=timedelta(0),
                     poll_interval=0.05, prune_interval=0.05)
    task = asyncio.create_task(failing.serve())
    try:
        async def pruned() -> bool:
            return await rt.store.notifications(still_open.run_id) == []
        await eventually(pruned)
    finally:
        failing.stop()
        await task
    (waiting,) = await rt.store.notifications(unsent.run_id)
    assert waiting.delivered_at is None and waiting.attempts >= 1


async def test_people_are_kept_with_argon2_hashes(store_factory: Callable[[], CheckpointStore]) -> None:
    store = store_factory()
    async with Runtime(store):
        users = Users(store)
        added = await users.add("ann", "correct horse", roles=["finance"], email="ann@example.com")
        assert added.password_hash.startswith("$argon2id$") and "correct" not in added.password_hash
        with pytest.raises(InvalidInputError):
            await users.add("ann", "again")
        assert await users.login("ann", "correct horse") == Principal("ann", ("finance",))
        assert await users.login("ann", "wrong") is None
        assert await users.login("nobody", "x") is None
        assert (await users.set_roles("ann", ["finance", "manager"])).roles == ("finance", "manager")
        await users.add("bob", "pw")
        assert [(u.name, u.email) for u in await users.list()] == [
            ("ann", "ann@example.com"), ("bob", None)]
        await users.remove("bob")
        with pytest.raises(InvalidInputError):
            await users.remove("bob")
        with pytest.raises(InvalidInputError):
            await users.set_roles("bob", ["x"])
        assert [u.name for u in await users.list()] == ["ann"]


async def test_receivers_down_for_a_while_get_every_notification(tmp_path: Any) -> None:
    import asyncio
    import email

    from notifykit import SmtpReceiver, WebhookReceiver, free_port

    from durable_flow import SmtpNotifier, SqliteStore, WebhookNotifier

    store = SqliteStore(tmp_path / "runs.db")
    async with Runtime(store) as rt:
        await Users(store).add("fay", "pw", roles=["finance"], email="fay@example.com")
        runs = [await rt.run(flow(), {}) for _ in range(3)]
        ids = {n.id for r in runs for n in await store.notifications(r.run_id)}
        hook, smtp = WebhookReceiver(free_port()), SmtpReceiver(free_port())
        outbox = Outbox(store, [WebhookNotifier(hook.url, attempts=1, timeout=1),
                                SmtpNotifier("127.0.0.1", smtp.port, "inbox@example.com",
                                             attempts=1, timeout=1)], poll_interval=0.05)
        delivering = asyncio.create_task(outbox.serve())
        try:
            async def tried() -> bool:
                rows = [n for r in runs for n in await store.notifications(r.run_id)]
                return all(n.attempts >= 1 for n in rows)
            await eventually(tried)  # every one failed while both were down
            hook.start()
            smtp.start()

            async def delivered() -> bool:
                rows = [n for r in runs for n in await store.notifications(r.run_id)]
                return all(n.delivered_at is not None for n in rows)
            await eventually(delivered, timeout=20)
        finally:
            outbox.stop()
            await delivering
            hook.stop()
            smtp.stop()
    assert len(ids) == 3 and {body["id"] for _, body in hook.received} == ids
    assert all(key == body["id"] for key, body in hook.received)  # repeats carry the same id
    mails = [email.message_from_string(text) for _, text in smtp.messages]
    assert {(m["To"], "".join(m["X-Durable-Flow-Notification"].split())) for m in mails} == {
        (to, i) for i in ids for to in ("alice@example.com", "fay@example.com")}
