"""Logins are server-side sessions: ended by logout and by changes to the user.

Over HTTP against the app, on memory, SQLite and PostgreSQL: the app gets a
store of its own from ``store_factory``, the test's ``rt`` another over the
same data (as ``durable-flow users`` would be, in another process).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx

from durable_flow import END, Blackboard, Runtime, WorkflowBuilder
from durable_flow.runtime.people._users import Users
from durable_flow.store._protocols import CheckpointStore
from durable_flow.ui import create_app
from durable_flow.ui._security import SESSION_COOKIE, USER_COOKIE

TOKEN = "admin-token-1"
BASE = "http://127.0.0.1:8765"
Stores = Callable[[], CheckpointStore]


class Expense(Blackboard):
    approved: bool | None = None


def flow() -> Any:
    b = WorkflowBuilder("expense", state=Expense)

    @b.node()
    async def approve(state: Expense, ctx: Any) -> dict[str, Any]:
        return {"approved": await ctx.request({"question": "Pay 900 EUR?"}, bool,
                                              roles=["finance"])}

    b.set_entry("approve").add_edge("approve", END)
    return b.build()


@asynccontextmanager
async def app_on(store: CheckpointStore, **options: Any) -> AsyncIterator[Any]:
    app = create_app(store, token=TOKEN, **options)
    async with app.router.lifespan_context(app):
        yield app


def client_of(app: Any, **cookies: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE,
                             cookies=cookies)


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([0-9a-f]+)"', html)
    assert found, "no csrf_token in the page"
    return found.group(1)


async def log_in(c: httpx.AsyncClient, **form: str) -> httpx.Response:
    page = await c.get("/login")
    return await c.post("/login", data={"csrf_token": csrf_of(page.text), "next": "/", **form})


async def mine(app: Any, cookie: str, value: str) -> int:
    async with client_of(app, **{cookie: value}) as c:
        return (await c.get("/api/inbox", params={"tab": "mine"})).status_code


async def test_logout_ends_the_session_on_the_server(rt: Runtime, store_factory: Stores) -> None:
    await Users(rt.store).add("alice", "alice-pw-1", roles=["finance"])
    async with app_on(store_factory()) as app, client_of(app) as alice:
        assert (await log_in(alice, name="alice", password="alice-pw-1")).status_code == 303
        cookie = alice.cookies[USER_COOKIE]
        assert await mine(app, USER_COOKIE, cookie) == 200
        out = await alice.post("/logout", data={"csrf_token": csrf_of((await alice.get("/")).text)})
        assert out.status_code == 303
        assert await mine(app, USER_COOKIE, cookie) == 401  # replaying the old cookie


async def test_the_store_keeps_only_a_hash_of_the_session_id(rt: Runtime,
                                                             store_factory: Stores) -> None:
    await Users(rt.store).add("alice", "alice-pw-1")
    async with app_on(store_factory()) as app, client_of(app) as alice:
        await log_in(alice, name="alice", password="alice-pw-1")
        cookie = alice.cookies[USER_COOKIE]
        assert len(cookie) >= 40
        assert await rt.store.get_session(cookie) is None
        row = await rt.store.get_session(hashlib.sha256(cookie.encode()).hexdigest())
        assert row is not None and row.user_name == "alice" and row.expires_at > row.created_at


async def test_an_altered_or_guessed_session_id_is_no_login(rt: Runtime,
                                                            store_factory: Stores) -> None:
    # the cookie is an opaque id looked up by its hash: no payload to swap, no signature
    # to keep; any other value (one character changed, cut, extended, another cookie's
    # name, the old signed-cookie shape) is unknown, 401
    await Users(rt.store).add("alice", "alice-pw-1", roles=["finance"])
    async with app_on(store_factory()) as app, client_of(app) as alice:
        await log_in(alice, name="alice", password="alice-pw-1")
        real = alice.cookies[USER_COOKIE]
        assert "." not in real and await mine(app, USER_COOKIE, real) == 200
        changed = [real[:i] + ("A" if real[i] != "A" else "B") + real[i + 1:]
                   for i in range(0, len(real), 7)]
        for value in (*changed, real[:-1], real + "x", "0" * 64,
                      'WyJjZm8iLFsiZmluYW5jZSJdXQ.aaaa.bbbbbbbbbbbbbbbbbbbbbbbb'):
            assert await mine(app, USER_COOKIE, value) == 401, value
        assert await mine(app, SESSION_COOKIE, real) == 401
        assert await mine(app, SESSION_COOKIE, TOKEN) == 401  # the token is no cookie value


async def test_removing_a_user_or_changing_roles_or_password_ends_their_sessions(
        rt: Runtime, store_factory: Stores) -> None:
    users = Users(rt.store)
    await users.add("alice", "alice-pw-1", roles=["finance"])
    await users.add("bob", "bob-pw-1", roles=["finance"])
    await users.add("cy", "cy-pw-1", roles=["finance"])
    result = await rt.run(flow(), {})
    rid = result.pending_requests[0].id
    async with app_on(store_factory()) as app:
        cookies = {}
        for name in ("alice", "bob", "cy"):
            async with client_of(app) as c:
                await log_in(c, name=name, password=f"{name}-pw-1")
                cookies[name] = c.cookies[USER_COOKIE]
        await users.set_roles("alice", ["sales"])
        await users.remove("bob")
        await users.set_password("cy", "cy-pw-2")
        for name in ("alice", "bob", "cy"):
            assert await mine(app, USER_COOKIE, cookies[name]) == 401, name
        async with client_of(app, **{USER_COOKIE: cookies["bob"]}) as gone:
            page = await gone.get("/")  # the login page: its CSRF token is no session's
            answer = await gone.post(f"/api/runs/{result.run_id}/respond",
                                     json={"responses": {rid: True}},
                                     headers={"x-csrf-token": csrf_of(page.text)})
            assert answer.status_code == 401
        async with client_of(app) as cy:
            assert (await log_in(cy, name="cy", password="cy-pw-1")).status_code == 401
            assert (await log_in(cy, name="cy", password="cy-pw-2")).status_code == 303
    assert await rt.decisions(result.run_id) == []


async def test_the_admin_token_login_is_a_session_like_any_other(store_factory: Stores) -> None:
    async with app_on(store_factory()) as app:
        values = []
        for _ in range(2):
            async with client_of(app) as c:
                assert (await log_in(c, token=TOKEN)).status_code == 303
                values.append(c.cookies[SESSION_COOKIE])
        assert values[0] != values[1] and TOKEN not in values[0]
        async with client_of(app, **{SESSION_COOKIE: values[0]}) as admin:
            assert (await admin.get("/api/runs")).status_code == 200
            page = await admin.get("/")
            assert (await admin.post("/logout", data={"csrf_token": csrf_of(page.text)})
                    ).status_code == 303
        async with client_of(app, **{SESSION_COOKIE: values[0]}) as replay:
            assert (await replay.get("/api/runs")).status_code == 401
        async with client_of(app, **{SESSION_COOKIE: values[1]}) as other:
            assert (await other.get("/api/runs")).status_code == 200
        # a person's session id in the admin cookie is not the admin
        await Users(app.state.sessions.store).add("dan", "dan-pw-1")
        async with client_of(app) as dan:
            await log_in(dan, name="dan", password="dan-pw-1")
            assert await mine(app, SESSION_COOKIE, dan.cookies[USER_COOKIE]) == 401


async def test_a_login_replaces_a_planted_session(rt: Runtime, store_factory: Stores) -> None:
    await Users(rt.store).add("alice", "alice-pw-1", roles=["finance"])
    await Users(rt.store).add("bob", "bob-pw-1", roles=["sales"])
    async with app_on(store_factory()) as app:
        async with client_of(app) as bob:
            await log_in(bob, name="bob", password="bob-pw-1")
            planted = bob.cookies[USER_COOKIE]
        async with client_of(app, **{USER_COOKIE: planted}) as victim:
            done = await log_in(victim, name="alice", password="alice-pw-1")
            assert done.status_code == 303
            fresh = done.cookies[USER_COOKIE]
        assert fresh != planted
        assert await mine(app, USER_COOKIE, planted) == 401  # the planted session is ended
        assert await mine(app, USER_COOKIE, fresh) == 200


async def test_the_csrf_token_is_bound_to_the_session(rt: Runtime, store_factory: Stores) -> None:
    await Users(rt.store).add("alice", "alice-pw-1", roles=["finance"])
    result = await rt.run(flow(), {})
    async with app_on(store_factory()) as app:
        async with client_of(app, durable_flow_csrf="chosen-seed") as anon:
            minted = csrf_of((await anon.get("/login")).text)
        async with client_of(app) as alice:
            await log_in(alice, name="alice", password="alice-pw-1")
            session = alice.cookies[USER_COOKIE]
            own = csrf_of((await alice.get("/")).text)
        async with client_of(app, **{USER_COOKIE: session, "durable_flow_csrf": "chosen-seed"}) as c:
            refused = await c.post(f"/runs/{result.run_id}/cancel", data={"csrf_token": minted})
            assert refused.status_code == 403
            api = await c.post(f"/api/runs/{result.run_id}/cancel", json={},
                               headers={"x-csrf-token": minted})
            assert api.status_code == 403
        async with client_of(app, **{USER_COOKIE: session}) as c:
            assert csrf_of((await c.get("/")).text) == own  # the session's, whatever the seed
    assert (await rt.get_run(result.run_id)).status.value == "waiting"


async def test_a_request_assigned_to_a_users_address_is_theirs_to_answer(
        rt: Runtime, store_factory: Stores) -> None:
    await Users(rt.store).add("alice", "alice-pw-1", email="alice@example.com")
    await Users(rt.store).add("bob", "bob-pw-1", email="bob@example.com")
    b = WorkflowBuilder("pay", state=Expense)

    @b.node()
    async def approve(state: Expense, ctx: Any) -> dict[str, Any]:
        return {"approved": await ctx.request({"question": "Pay?"}, bool,
                                              assignees=["alice@example.com"])}

    b.set_entry("approve").add_edge("approve", END)
    result = await rt.run(b.build(), {})
    rid = result.pending_requests[0].id
    async with app_on(store_factory()) as app:
        async with client_of(app) as bob:
            await log_in(bob, name="bob", password="bob-pw-1")
            assert (await bob.get("/api/inbox", params={"tab": "mine"})).json()["requests"] == []
            refused = await bob.post(f"/api/runs/{result.run_id}/respond",
                                     json={"responses": {rid: False}},
                                     headers={"x-csrf-token": csrf_of((await bob.get("/")).text)})
            assert refused.status_code == 404  # not his run: he may not even see it
        async with client_of(app) as alice:
            await log_in(alice, name="alice", password="alice-pw-1")
            mine_now = (await alice.get("/api/inbox", params={"tab": "mine"})).json()["requests"]
            assert [q["id"] for q in mine_now] == [rid]
            done = await alice.post(f"/api/runs/{result.run_id}/respond",
                                    json={"responses": {rid: True}},
                                    headers={"x-csrf-token": csrf_of((await alice.get("/")).text)})
            assert done.status_code == 200, done.text
    (decision,) = await rt.decisions(result.run_id)
    assert (decision.by, decision.answer) == ("alice", True)


def cfo_flow() -> Any:
    b = WorkflowBuilder("cfo-only", state=Expense)

    @b.node()
    async def approve(state: Expense, ctx: Any) -> dict[str, Any]:
        return {"approved": await ctx.request({"question": "Pay 5000 EUR?"}, bool,
                                              assignees=["cfo"])}

    b.set_entry("approve").add_edge("approve", END)
    return b.build()


async def test_a_form_without_the_sessions_csrf_token_is_403_whichever_run_it_names(
        rt: Runtime, store_factory: Stores) -> None:
    # the CSRF check comes before the run is looked up: a forged post gets the same 403
    # for a run the user may see, one they may not (404 with the right token) and no run
    await Users(rt.store).add("alice", "alice-pw-1", roles=["finance"])
    hers, hidden = await rt.run(flow(), {}), await rt.run(cfo_flow(), {})
    async with app_on(store_factory(), workflows=[flow(), cfo_flow()]) as app:
        async with client_of(app) as other:
            foreign = csrf_of((await other.get("/login")).text)  # another browser's token
        async with client_of(app) as alice:
            await log_in(alice, name="alice", password="alice-pw-1")
            own = csrf_of((await alice.get("/")).text)
            for run in (hers, hidden, None):
                run_id = run.run_id if run else "no-such-run"
                forms = {"cancel": {}, "pause": {"reason": "x"}, "unpause": {},
                         "fork": {"checkpoint_id": run.checkpoint_id if run else "x"},
                         "reassign": {"request_id": "x", "assignees": "alice"}}
                for act, form in forms.items():
                    for token in ({}, {"csrf_token": ""}, {"csrf_token": foreign}):
                        r = await alice.post(f"/runs/{run_id}/{act}", data={**form, **token})
                        assert r.status_code == 403, (run_id, act, token, r.status_code)
                        assert "CSRF" in r.text
            refused = await alice.post(f"/runs/{hidden.run_id}/fork",
                                       data={"csrf_token": own,
                                             "checkpoint_id": hidden.checkpoint_id})
            assert refused.status_code == 404  # with her own token: a run she may not see
    for run in (hers, hidden):
        assert (await rt.get_run(run.run_id)).status.value == "waiting"
        assert await rt.decisions(run.run_id) == []
    assert len(await rt.list_runs()) == 2
