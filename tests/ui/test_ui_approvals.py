"""The web app's approvals through HTTP: signed link pages, 403s, the JSON error envelope."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any
from urllib.parse import urlparse

import httpx

from durable_flow import END, Blackboard, MemoryStore, Principal, Runtime, WorkflowBuilder
from durable_flow.runtime._links import LinkSigner
from durable_flow.runtime._users import Users
from durable_flow.store._outbox_rows import UserRow
from durable_flow.ui import create_app

SECRET = "link-s3cret"


class Expense(Blackboard):
    approved: bool | None = None


def flow() -> Any:
    b = WorkflowBuilder("expense", state=Expense)

    @b.node()
    async def approve(state: Expense, ctx: Any) -> dict[str, Any]:
        payload = {"question": "Approve 40 EUR for a taxi?", "amount": 40, "claimant": "alice"}
        return {"approved": await ctx.request(payload, bool, roles=["finance"])}

    b.set_entry("approve")
    b.add_edge("approve", END)
    return b.build()


@asynccontextmanager
async def app_on(store: MemoryStore) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(store, token="admin-token-1", link_secret=SECRET)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as c:
            yield c


async def waiting(store: MemoryStore) -> tuple[Runtime, str, str]:
    rt = Runtime(store)
    result = await rt.run(flow(), {})
    return rt, result.run_id, result.pending_requests[0].id


def path_of(url: str) -> str:
    parts = urlparse(url)
    return f"{parts.path}?{parts.query}"


async def post_answer(client: httpx.AsyncClient, page: httpx.Response, url: str,
                      value: str) -> httpx.Response:
    csrf = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page.text)
    token = re.search(r'name="token" value="([^"]+)"', page.text)
    assert csrf and token, page.text
    return await client.post(urlparse(url).path, data={
        "csrf_token": csrf.group(1), "token": token.group(1), "answer": value})


async def test_a_link_answers_once_without_a_login() -> None:
    store = MemoryStore()
    rt, run_id, rid = await waiting(store)
    await store.add_user(UserRow("fay", "x", ("finance",)))
    url = await rt.approval_link(run_id, rid, for_="fay", base_url="http://inbox", secret=SECRET)
    async with app_on(store) as client:
        assert (await client.get("/")).status_code == 401  # the inbox needs the login
        page = await client.get(path_of(url))
        assert page.status_code == 200
        assert "Approve 40 EUR for a taxi?" in page.text and "claimant" in page.text
        done = await post_answer(client, page, url, "true")
        assert done.status_code == 200 and "your answer is recorded" in done.text
        again = await client.get(path_of(url))
        assert again.status_code == 410 and "a link works once" in again.text
    (decision,) = await rt.decisions(run_id)
    assert (decision.by, decision.via, decision.answer) == ("fay", "link", True)


async def test_every_wrong_link_gets_a_clear_page_and_changes_nothing() -> None:
    store = MemoryStore()
    rt, run_id, rid = await waiting(store)
    signer = LinkSigner(SECRET)
    url = signer.url("http://inbox", run_id, rid, "fay", timedelta(days=1))
    other = signer.url("http://inbox", run_id, "other@1#0", "fay", timedelta(days=1))
    short = signer.url("http://inbox", run_id, rid, "fay", timedelta(seconds=0.05))
    await asyncio.sleep(0.1)
    async with app_on(store) as client:
        altered = await client.get(path_of(url)[:-3] + "xyz")
        assert altered.status_code == 400 and "not valid" in altered.text
        foreign = await client.get(urlparse(url).path + "?" + urlparse(other).query)
        assert foreign.status_code == 400 and "another request" in foreign.text
        expired = await client.get(path_of(short))
        assert expired.status_code == 410 and "expired" in expired.text
        page = await client.get(path_of(url))  # fay holds no finance role here
        refused = await post_answer(client, page, url, "true")
        assert refused.status_code == 403 and "not assigned to fay" in refused.text
    assert await rt.decisions(run_id) == []
    assert [p.id for p in await rt.pending_requests()] == [rid]


async def test_the_api_refuses_another_s_request_with_403_and_its_envelope() -> None:
    store = MemoryStore()
    rt, run_id, rid = await waiting(store)
    async with app_on(store) as client:
        headers = {"authorization": "Bearer admin-token-1"}
        refused = await client.post(f"/api/runs/{run_id}/respond", headers=headers,
                                    json={"responses": {rid: True}})
        assert refused.status_code == 403
        body = refused.json()
        assert (body["error"], body["request_id"]) == ("NotAuthorizedError", rid)
        malformed = await client.post(f"/api/runs/{run_id}/respond", content=b"{not json",
                                      headers={**headers, "content-type": "application/json"})
        assert malformed.status_code == 422
        assert set(malformed.json()) == {"error", "message", "request_id"}
        assert malformed.json()["request_id"] is None
    assert await rt.decisions(run_id) == []


async def login(client: httpx.AsyncClient, name: str, password: str) -> httpx.Response:
    page = await client.get("/login")
    csrf = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page.text)
    assert csrf, page.text
    return await client.post("/login", data={"csrf_token": csrf.group(1), "name": name,
                                             "password": password, "next": "/"})


async def test_people_log_in_see_their_tabs_and_are_refused_others_requests() -> None:
    store = MemoryStore()
    rt = Runtime(store)
    users = Users(store)
    await users.add("fay", "fay-pw", roles=["finance"])
    await users.add("bob", "bob-pw", roles=["legal"])
    mine = await rt.run(flow(), {})  # for the finance role
    async with app_on(store) as client:
        assert (await login(client, "fay", "wrong")).status_code == 401
        assert (await login(client, "fay", "fay-pw")).status_code == 303
        page = await client.get("/")
        assert page.status_code == 200 and "signed in as <strong>fay</strong>" in page.text
        assert "Approve 40 EUR for a taxi?" in page.text and "role finance" in page.text
    async with app_on(store) as client:
        assert (await login(client, "bob", "bob-pw")).status_code == 303
        page = await client.get("/?tab=mine")
        assert "Approve 40 EUR for a taxi?" not in page.text
        rid = mine.pending_requests[0].id
        csrf = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page.text)
        assert csrf
        refused = await client.post("/respond", data={
            "csrf_token": csrf.group(1), "run_id": mine.run_id, "request_id": rid,
            "answer": "true"})
        assert refused.status_code == 403
    assert await rt.decisions(mine.run_id) == []
    async with app_on(store) as client:
        await login(client, "fay", "fay-pw")
        page = await client.get("/")
        csrf = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page.text)
        assert csrf
        done = await client.post("/respond", data={
            "csrf_token": csrf.group(1), "run_id": mine.run_id,
            "request_id": mine.pending_requests[0].id, "answer": "true"})
        assert done.status_code in (200, 303)
    (decision,) = await rt.decisions(mine.run_id)
    assert (decision.by, decision.via) == ("fay", "ui")


async def test_a_bearer_jwt_names_the_principal() -> None:
    import jwt as pyjwt

    from durable_flow.ui._bearer import JwtVerifier

    store = MemoryStore()
    rt, run_id, rid = await waiting(store)
    app = create_app(store, token="admin-token-1", jwt=JwtVerifier("jwt-key-0123456789abcdef"
                                                                    "0123456789abcdef",
                                                                    public=False))
    fay = pyjwt.encode({"sub": "fay", "roles": ["finance"]},
                       "jwt-key-0123456789abcdef0123456789abcdef", algorithm="HS256")
    bob = pyjwt.encode({"sub": "bob", "roles": ["legal"]},
                       "jwt-key-0123456789abcdef0123456789abcdef", algorithm="HS256")
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as c:
            theirs = await c.get("/api/inbox?tab=mine", headers={"authorization": f"Bearer {bob}"})
            assert theirs.status_code == 200 and theirs.json()["requests"] == []
            refused = await c.post(f"/api/runs/{run_id}/respond", json={"responses": {rid: True}},
                                   headers={"authorization": f"Bearer {bob}"})
            assert refused.status_code == 403
            forged = await c.get("/api/inbox", headers={"authorization": "Bearer a.b.c"})
            assert forged.status_code == 401
            ok = await c.post(f"/api/runs/{run_id}/respond", json={"responses": {rid: True}},
                              headers={"authorization": f"Bearer {fay}"})
            assert ok.status_code == 200, ok.text
    (decision,) = await rt.decisions(run_id)
    assert (decision.by, decision.via) == ("fay", "api")


async def test_the_run_page_shows_decisions_and_the_admin_reassigns() -> None:
    store = MemoryStore()
    rt, run_id, rid = await waiting(store)
    async with app_on(store) as client:
        headers = {"authorization": "Bearer admin-token-1"}
        page = await client.get(f"/runs/{run_id}", headers=headers)
        csrf = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page.text)
        assert csrf and "Reassign" in page.text
        moved = await client.post(f"/runs/{run_id}/reassign", headers=headers, data={
            "csrf_token": csrf.group(1), "request_id": rid, "assignees": "carol, dan",
            "roles": ""})
        assert moved.status_code == 303
        page = await client.get(f"/runs/{run_id}", headers=headers)
        assert "<h2>Decisions</h2>" in page.text and 'data-kind="reassign"' in page.text
    (pending,) = await rt.pending_requests()
    assert pending.assignees == ("carol", "dan") and pending.roles == ()
    (decision,) = await rt.decisions(run_id)
    assert (decision.kind, decision.by) == ("reassign", "admin")


async def test_the_api_carries_titles_assignees_and_decisions() -> None:
    store = MemoryStore()
    rt, run_id, rid = await waiting(store)
    await rt.respond(run_id, {rid: True}, by=Principal("fay", ("finance",)), comment="ok")
    second = await rt.run(flow(), {})
    async with app_on(store) as client:
        headers = {"authorization": "Bearer admin-token-1"}
        (req,) = (await client.get("/api/inbox", headers=headers)).json()["requests"]
        assert (req["run_id"], req["title"], req["roles"], req["assignees"], req["escalated"]) \
            == (second.run_id, "Approve 40 EUR for a taxi?", ["finance"], [], False)
        (decision,) = (await client.get(f"/api/runs/{run_id}/decisions", headers=headers)).json()
        assert (decision["kind"], decision["by"], decision["via"], decision["comment"]) == (
            "answer", "fay", "api", "ok")
        missing = await client.get("/api/runs/nope/decisions", headers=headers)
        assert missing.status_code == 404 and set(missing.json()) == {"error", "message",
                                                                      "request_id"}
