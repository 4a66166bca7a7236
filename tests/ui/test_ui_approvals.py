"""The web app's approvals through HTTP: signed link pages, 403s, the JSON error envelope.

Every test runs on memory, SQLite and PostgreSQL: the app gets a store of its
own from ``store_factory`` (its lifespan closes it), the test's ``rt`` another.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any
from urllib.parse import urlparse

import httpx
import jwt as pyjwt

from durable_flow import END, Blackboard, Principal, Runtime, WorkflowBuilder
from durable_flow.model._clock import utcnow
from durable_flow.runtime.people._links import LinkSigner
from durable_flow.runtime.people._users import Users
from durable_flow.store._outbox_rows import UserRow
from durable_flow.store._protocols import CheckpointStore
from durable_flow.ui import create_app
from durable_flow.ui._bearer import JwtVerifier

SECRET = "link-s3cret"
JWT_KEY = "jwt-key-0123456789abcdef0123456789abcdef"
ADMIN = {"authorization": "Bearer admin-token-1"}
Stores = Callable[[], CheckpointStore]


class Expense(Blackboard):
    approved: bool | None = None


def flow(**request: Any) -> Any:
    b = WorkflowBuilder("expense", state=Expense)
    asks = request or {"roles": ["finance"]}

    @b.node()
    async def approve(state: Expense, ctx: Any) -> dict[str, Any]:
        payload = {"question": "Approve 40 EUR for a taxi?", "amount": 40, "claimant": "alice"}
        return {"approved": await ctx.request(payload, bool, **asks)}

    b.set_entry("approve")
    b.add_edge("approve", END)
    return b.build()


@asynccontextmanager
async def app_on(store: CheckpointStore, **options: Any) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(store, token="admin-token-1", link_secret=SECRET, **options)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as c:
            yield c


def bearer(sub: str, *roles: str) -> dict[str, str]:
    """The header of a JWT naming ``sub`` with ``roles`` (signed with :data:`JWT_KEY`)."""
    token = pyjwt.encode({"sub": sub, "roles": list(roles), "exp": int(time.time()) + 600},
                         JWT_KEY, algorithm="HS256")
    return {"authorization": f"Bearer {token}"}


async def waiting(rt: Runtime, **request: Any) -> tuple[str, str]:
    result = await rt.run(flow(**request), {})
    return result.run_id, result.pending_requests[0].id


def path_of(url: str) -> str:
    parts = urlparse(url)
    return f"{parts.path}?{parts.query}"


async def post_answer(client: httpx.AsyncClient, page: httpx.Response, url: str,
                      value: str, **more: str) -> httpx.Response:
    csrf = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page.text)
    token = re.search(r'name="token" value="([^"]+)"', page.text)
    assert csrf and token, page.text
    return await client.post(urlparse(url).path, data={
        "csrf_token": csrf.group(1), "token": token.group(1), "answer": value, **more})


async def test_a_link_answers_once_without_a_login(rt: Runtime, store_factory: Stores) -> None:
    run_id, rid = await waiting(rt)
    await rt.store.add_user(UserRow("fay", "x", ("finance",)))
    url = await rt.approval_link(run_id, rid, for_="fay", base_url="http://inbox", secret=SECRET)
    async with app_on(store_factory()) as client:
        assert (await client.get("/")).status_code == 401  # the inbox needs the login
        page = await client.get(path_of(url))
        assert page.status_code == 200
        assert "Approve 40 EUR for a taxi?" in page.text and "<th>Claimant</th>" in page.text
        done = await post_answer(client, page, url, "true")
        # no worker here: the page says the run goes on when the service running it picks it up
        assert done.status_code == 200 and "Approved. The run goes on as soon as the service " \
            "that runs expense picks it up. Thank you." in done.text
        again = await client.get(path_of(url))
        assert again.status_code == 410 and "a link works once" in again.text
    (decision,) = await rt.decisions(run_id)
    assert (decision.by, decision.via, decision.answer) == ("fay", "link", True)


async def test_every_wrong_link_gets_a_clear_page_and_changes_nothing(
        rt: Runtime, store_factory: Stores) -> None:
    run_id, rid = await waiting(rt)
    signer = LinkSigner(SECRET)
    url = signer.url("http://inbox", run_id, rid, "fay", timedelta(days=1))
    other = signer.url("http://inbox", run_id, "other@1#0", "fay", timedelta(days=1))
    short = signer.url("http://inbox", run_id, rid, "fay", timedelta(seconds=0.05))
    await asyncio.sleep(0.1)
    async with app_on(store_factory()) as client:
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


async def test_the_api_refuses_another_s_request_with_403_and_its_envelope(
        rt: Runtime, store_factory: Stores) -> None:
    run_id, rid = await waiting(rt)
    async with app_on(store_factory()) as client:
        refused = await client.post(f"/api/runs/{run_id}/respond", headers=ADMIN,
                                    json={"responses": {rid: True}})
        assert refused.status_code == 403
        body = refused.json()
        assert (body["error"], body["request_id"]) == ("NotAuthorizedError", rid)
        malformed = await client.post(f"/api/runs/{run_id}/respond", content=b"{not json",
                                      headers={**ADMIN, "content-type": "application/json"})
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


async def test_people_log_in_see_their_tabs_and_are_refused_others_requests(
        rt: Runtime, store_factory: Stores) -> None:
    users = Users(rt.store)
    await users.add("fay", "fay-pw", roles=["finance"])
    await users.add("bob", "bob-pw", roles=["legal"])
    mine = await rt.run(flow(), {})  # for the finance role
    async with app_on(store_factory()) as client:
        assert (await login(client, "fay", "wrong")).status_code == 401
        assert (await login(client, "fay", "fay-pw")).status_code == 303
        page = await client.get("/")
        assert page.status_code == 200 and "signed in as <strong>fay</strong>" in page.text
        assert "Approve 40 EUR for a taxi?" in page.text and "role finance" in page.text
    async with app_on(store_factory()) as client:
        assert (await login(client, "bob", "bob-pw")).status_code == 303
        page = await client.get("/?tab=mine")
        assert "Approve 40 EUR for a taxi?" not in page.text
        rid = mine.pending_requests[0].id
        csrf = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page.text)
        assert csrf
        refused = await client.post("/respond", data={
            "csrf_token": csrf.group(1), "run_id": mine.run_id, "request_id": rid,
            "answer": "true"})
        assert refused.status_code == 404  # not bob's run: he may not even see it
    assert await rt.decisions(mine.run_id) == []
    async with app_on(store_factory()) as client:
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


async def test_the_answer_forms_record_a_comment_shown_on_the_run_page(
        rt: Runtime, store_factory: Stores) -> None:
    await Users(rt.store).add("fay", "fay-pw", roles=["finance"])
    by_link, by_inbox, silent = [await waiting(rt) for _ in range(3)]
    url = await rt.approval_link(*by_link, for_="fay", base_url="http://inbox", secret=SECRET)
    async with app_on(store_factory()) as client:
        page = await client.get(path_of(url))
        assert '<textarea' in page.text and 'name="comment"' in page.text
        wrong = await post_answer(client, page, url, "maybe", comment="taxi <b>receipt</b>")
        assert wrong.status_code == 422  # the comment comes back with the problem, escaped
        assert ">taxi &lt;b&gt;receipt&lt;/b&gt;</textarea>" in wrong.text
        done = await post_answer(client, page, url, "true", comment="  taxi receipt  ")
        assert done.status_code == 200 and "Approved." in done.text
    async with app_on(store_factory()) as client:
        await login(client, "fay", "fay-pw")
        page = await client.get("/")
        assert page.text.count('name="comment"') == 2  # one per open request
        csrf = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page.text)
        assert csrf
        for (run_id, rid), comment in ((by_inbox, "within budget\nsecond line"), (silent, " ")):
            done = await client.post("/respond", data={
                "csrf_token": csrf.group(1), "run_id": run_id, "request_id": rid,
                "answer": "true", "comment": comment})
            assert done.status_code == 303
    decided = {run: (await rt.decisions(run))[0] for run, _ in (by_link, by_inbox, silent)}
    assert [(d.by, d.via, d.comment) for d in decided.values()] == [
        ("fay", "link", "taxi receipt"), ("fay", "ui", "within budget\nsecond line"),
        ("fay", "ui", None)]
    async with app_on(store_factory()) as client:
        page = await client.get(f"/runs/{by_inbox[0]}", headers=ADMIN)
        assert "<td class=\"comment\">within budget\nsecond line</td>" in page.text


async def test_a_bearer_jwt_names_the_principal(
        rt: Runtime, store_factory: Stores) -> None:
    run_id, rid = await waiting(rt)
    fay, bob = bearer("fay", "finance"), bearer("bob", "legal")
    async with app_on(store_factory(), jwt=JwtVerifier(JWT_KEY, public=False)) as c:
        theirs = await c.get("/api/inbox?tab=mine", headers=bob)
        assert theirs.status_code == 200 and theirs.json()["requests"] == []
        refused = await c.post(f"/api/runs/{run_id}/respond", json={"responses": {rid: True}},
                               headers=bob)
        assert refused.status_code == 404  # nothing of the run is bob's: it is not there
        forged = await c.get("/api/inbox", headers={"authorization": "Bearer a.b.c"})
        assert forged.status_code == 401
        ok = await c.post(f"/api/runs/{run_id}/respond", headers=fay,
                          json={"responses": {rid: True}, "comment": "receipt attached"})
        assert ok.status_code == 200, ok.text
    (decision,) = await rt.decisions(run_id)
    assert (decision.by, decision.via, decision.comment) == ("fay", "api", "receipt attached")


async def test_the_run_page_shows_decisions_and_the_admin_reassigns(
        rt: Runtime, store_factory: Stores) -> None:
    run_id, rid = await waiting(rt)
    async with app_on(store_factory()) as client:
        page = await client.get(f"/runs/{run_id}", headers=ADMIN)
        csrf = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page.text)
        assert csrf and "Reassign" in page.text
        moved = await client.post(f"/runs/{run_id}/reassign", headers=ADMIN, data={
            "csrf_token": csrf.group(1), "request_id": rid, "assignees": "carol, dan",
            "roles": ""})
        assert moved.status_code == 303
        page = await client.get(f"/runs/{run_id}", headers=ADMIN)
        assert "<h2>Decisions</h2>" in page.text and 'data-kind="reassign"' in page.text
    (pending,) = await rt.pending_requests()
    assert pending.assignees == ("carol", "dan") and pending.roles == ()
    (decision,) = await rt.decisions(run_id)
    assert (decision.kind, decision.by, decision.via) == ("reassign", "admin", "ui")


async def test_the_api_carries_titles_assignees_and_decisions(
        rt: Runtime, store_factory: Stores) -> None:
    run_id, rid = await waiting(rt)
    await rt.respond(run_id, {rid: True}, by=Principal("fay", ("finance",)), comment="ok")
    second = await rt.run(flow(), {})
    async with app_on(store_factory()) as client:
        (req,) = (await client.get("/api/inbox", headers=ADMIN)).json()["requests"]
        assert (req["run_id"], req["title"], req["roles"], req["assignees"], req["escalated"]) \
            == (second.run_id, "Approve 40 EUR for a taxi?", ["finance"], [], False)
        (decision,) = (await client.get(f"/api/runs/{run_id}/decisions", headers=ADMIN)).json()
        assert (decision["kind"], decision["by"], decision["via"], decision["comment"]) == (
            "answer", "fay", "api", "ok")
        missing = await client.get("/api/runs/nope/decisions", headers=ADMIN)
        assert missing.status_code == 404 and set(missing.json()) == {"error", "message",
                                                                      "request_id"}


async def test_the_api_reassigns_for_the_admin_only_and_records_it(
        rt: Runtime, store_factory: Stores) -> None:
    run_id, rid = await waiting(rt)
    to_carol = {"request_id": rid, "assignees": ["carol"], "roles": []}
    async with app_on(store_factory(), jwt=JwtVerifier(JWT_KEY, public=False)) as client:
        refused = await client.post(f"/api/runs/{run_id}/reassign", json=to_carol,
                                    headers=bearer("fay", "finance"))
        assert refused.status_code == 403, refused.text
        assert (refused.json()["error"], refused.json()["request_id"]) == ("NotAuthorizedError",
                                                                           rid)
        assert await rt.decisions(run_id) == []
        nobody = await client.post(f"/api/runs/{run_id}/reassign", headers=ADMIN,
                                   json={"request_id": rid})
        assert nobody.status_code == 422 and nobody.json()["error"] == "InvalidInputError"
        moved = await client.post(f"/api/runs/{run_id}/reassign", json=to_carol, headers=ADMIN)
        assert moved.status_code == 200, moved.text
        assert (moved.json()["id"], moved.json()["assignees"], moved.json()["roles"]) == (
            rid, ["carol"], [])
        (decision,) = (await client.get(f"/api/runs/{run_id}/decisions", headers=ADMIN)).json()
        assert (decision["kind"], decision["by"], decision["via"], decision["answer"]) == (
            "reassign", "admin", "api", {"assignees": ["carol"], "roles": []})
        taken = await client.post(f"/api/runs/{run_id}/respond", json={"responses": {rid: True}},
                                  headers=bearer("fay", "finance"))
        assert taken.status_code == 403  # only carol may answer now
        gone = await client.post(f"/api/runs/{run_id}/reassign", headers=ADMIN,
                                 json={**to_carol, "request_id": "nope@1#0"})
        assert gone.status_code == 409 and gone.json()["request_id"] == "nope@1#0"
    assert [n.kind for n in await rt.store.notifications(run_id)] == ["opened", "reassigned"]
    (pending,) = await rt.pending_requests()
    assert (pending.assignees, pending.roles) == (("carol",), ())


async def past_deadline(rt: Runtime, window: float) -> tuple[Any, str, str]:
    """A run whose request (for fay, escalating to the managers) is past its deadline."""
    wf = flow(assignees=["fay"], timeout=timedelta(seconds=window), escalate_to=["role:manager"])
    result = await rt.run(wf, {})
    (pending,) = result.pending_requests
    assert pending.expires_at is not None
    await asyncio.sleep(max(0.0, (pending.expires_at - utcnow()).total_seconds()) + 0.05)
    return wf, result.run_id, pending.id


async def test_the_first_people_see_and_answer_a_late_request_until_it_escalates(
        rt: Runtime, store_factory: Stores) -> None:
    _, late, late_rid = await past_deadline(rt, 0.3)
    # the escalated request gets a deadline as far off as its first: far enough for mia to see it
    wf, moved, moved_rid = await past_deadline(rt, 2.0)
    await rt.resume(wf, moved)  # its escalation is recorded (a worker would do this)
    fay, mia = bearer("fay"), bearer("mia", "manager")
    async with app_on(store_factory(), jwt=JwtVerifier(JWT_KEY, public=False)) as client:
        mine = (await client.get("/api/inbox?tab=mine", headers=fay)).json()["requests"]
        assert [(r["run_id"], r["escalated"]) for r in mine] == [(late, False)]
        page = await client.get("/?tab=mine", headers=fay)
        assert page.status_code == 200 and late in page.text and moved not in page.text
        theirs = (await client.get("/api/inbox?tab=mine", headers=mia)).json()["requests"]
        assert [(r["run_id"], r["roles"], r["escalated"]) for r in theirs] == [
            (moved, ["manager"], True)]
        refused = await client.post(f"/api/runs/{moved}/respond", headers=fay,
                                    json={"responses": {moved_rid: True}})
        assert refused.status_code == 403
        answered = await client.post(f"/api/runs/{late}/respond", headers=fay,
                                     json={"responses": {late_rid: True}})
        assert answered.status_code == 200, answered.text
        assert (await client.get("/api/inbox?tab=mine", headers=fay)).json()["requests"] == []
    (decision,) = await rt.decisions(late)
    assert (decision.kind, decision.by, decision.via) == ("answer", "fay", "api")
    assert [d.kind for d in await rt.decisions(moved)] == ["escalation"]
