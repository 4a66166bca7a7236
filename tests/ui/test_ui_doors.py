"""Who may do what, over HTTP: every route through one rule (memory, SQLite and PostgreSQL).

Principals come as bearer JWTs (a name and roles); the token is the admin.
A run a principal may not see answers 404 on every page and API route that
names it, streams included; what their place does not allow answers 403;
nothing is written either way.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import jwt as pyjwt

from durable_flow import END, Blackboard, RunStatus, Runtime, WorkflowBuilder
from durable_flow.store._protocols import CheckpointStore
from durable_flow.ui import create_app
from durable_flow.ui._bearer import JwtVerifier

JWT_KEY = "jwt-key-0123456789abcdef0123456789abcdef"
ADMIN = {"authorization": "Bearer admin-token-1"}
Stores = Callable[[], CheckpointStore]


class Payout(Blackboard):
    amount: int = 0
    approved: bool | None = None
    paid: bool = False


def payout_flow() -> Any:
    b = WorkflowBuilder("payout", state=Payout, operators=("ops",), viewers=("audit",))

    @b.node()
    async def approve(state: Payout, ctx: Any) -> dict[str, Any]:
        asked = {"question": f"Pay {state.amount} EUR?", "secret_iban": "DE00 1234"}
        return {"approved": await ctx.request(asked, bool, assignees=["cfo"])}

    @b.node()
    async def pay(state: Payout) -> dict[str, Any]:
        return {"paid": bool(state.approved)}

    b.set_entry("approve")
    b.add_edge("approve", "pay")
    b.add_edge("pay", END)
    return b.build()


def person(sub: str, *roles: str) -> dict[str, str]:
    # an hour: the module makes these once, and a loaded suite may reach a test much later
    claims = {"sub": sub, "roles": list(roles), "exp": int(time.time()) + 3600}
    return {"authorization": f"Bearer {pyjwt.encode(claims, JWT_KEY, algorithm='HS256')}"}


BOB = person("bob", "sales")            # nobody, for these runs
CAROL = person("carol")                 # started the run: a participant
CFO = person("cfo")                     # assigned: a participant
VIC = person("vic", "audit")            # a viewer
OLGA = person("olga", "ops")            # an operator
ROOT = person("root", "admin")          # an admin by role


@asynccontextmanager
async def app_on(store: CheckpointStore, *workflows: Any) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(store, workflows=list(workflows), token="admin-token-1",
                     jwt=JwtVerifier(JWT_KEY, public=False))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as c:
            yield c


async def started(rt: Runtime) -> tuple[str, str, str]:
    """A waiting payout run started by carol: (run id, request id, head checkpoint id)."""
    result = await rt.run(payout_flow(), {"amount": 900}, by="carol")
    assert result.status is RunStatus.WAITING
    return result.run_id, result.pending_requests[0].id, result.checkpoint_id


def run_routes(spec: dict[str, Any]) -> list[str]:
    """Every GET path of the API document that names a run."""
    return sorted(path for path, ops in spec["paths"].items()
                  if "get" in ops and "{run_id}" in path)


async def test_every_api_route_and_page_of_a_run_is_404_to_nobody(
        rt: Runtime, store_factory: Stores) -> None:
    run_id, _, head = await started(rt)
    async with app_on(store_factory()) as client:
        spec = (await client.get("/api/openapi.json", headers=ADMIN)).json()
        routes = run_routes(spec)
        assert {"/api/runs/{run_id}", "/api/runs/{run_id}/stream",
                "/api/runs/{run_id}/decisions"} <= set(routes)
        for template in [*routes, "/runs/{run_id}", "/runs/{run_id}/timeline"]:
            path = template.replace("{run_id}", run_id).replace("{checkpoint_id}", head)
            refused = await client.get(path, headers=BOB)
            assert refused.status_code == 404, (path, refused.status_code)
            assert "DE00" not in refused.text and "Pay 900" not in refused.text
            allowed = await client.get(path, headers=VIC, params={"after": 0})
            assert allowed.status_code == 200, (path, allowed.status_code)
        unknown = await client.get("/api/runs/no-such-run", headers=BOB)
        assert unknown.status_code == 404 and unknown.json() == {
            "error": "RunNotFoundError", "message": "no run with id 'no-such-run'",
            "request_id": None}


async def test_run_lists_show_only_runs_the_principal_may_read(
        rt: Runtime, store_factory: Stores) -> None:
    run_id, _, _ = await started(rt)
    theirs = await rt.run(payout_flow(), {"amount": 5}, by="bob")
    async with app_on(store_factory()) as client:
        def listed(headers: dict[str, str]) -> Any:
            return client.get("/api/runs", headers=headers)
        bob = (await listed(BOB)).json()
        assert [r["run_id"] for r in bob["runs"]] == [theirs.run_id] and bob["total"] == 1
        for who in (CAROL, CFO, VIC, OLGA, ROOT, ADMIN):
            assert {r["run_id"] for r in (await listed(who)).json()["runs"]} >= {run_id}
        page = await client.get("/runs", headers=BOB)
        assert page.status_code == 200 and run_id not in page.text and theirs.run_id in page.text


async def test_participants_and_viewers_may_not_cancel_or_fork(
        rt: Runtime, store_factory: Stores) -> None:
    run_id, _, head = await started(rt)
    async with app_on(store_factory(), payout_flow()) as client:
        for who, code in ((BOB, 404), (CAROL, 403), (CFO, 403), (VIC, 403)):
            cancel = await client.post(f"/api/runs/{run_id}/cancel", headers=who, json={})
            fork = await client.post(f"/api/runs/{run_id}/fork", headers=who,
                                     json={"checkpoint_id": head, "update": {"approved": True}})
            assert (cancel.status_code, fork.status_code) == (code, code)
        assert (await rt.get_run(run_id)).status is RunStatus.WAITING
        assert await rt.decisions(run_id) == []
        assert [r.run_id for r in await rt.list_runs()] == [run_id]  # no fork was made
        page = await client.get(f"/runs/{run_id}", headers=CAROL)
        assert page.status_code == 200 and "Cancel run" not in page.text
        assert "Fork from checkpoint" not in page.text
        cancelled = await client.post(f"/api/runs/{run_id}/cancel", headers=OLGA, json={})
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    (decision,) = await rt.decisions(run_id)
    assert (decision.kind, decision.by, decision.via) == ("cancel", "olga", "api")


async def test_only_operators_pause_and_unpause(rt: Runtime, store_factory: Stores) -> None:
    run_id, _, _ = await started(rt)
    async with app_on(store_factory(), payout_flow()) as client:
        for who, code in ((BOB, 404), (CAROL, 403), (CFO, 403), (VIC, 403)):
            paused = await client.post(f"/api/runs/{run_id}/pause", headers=who,
                                       json={"reason": "mine now"})
            assert paused.status_code == code
        assert (await rt.get_run(run_id)).status is RunStatus.WAITING
        assert await rt.decisions(run_id) == []
        assert "Pause run" not in (await client.get(f"/runs/{run_id}", headers=CAROL)).text
        done = await client.post(f"/api/runs/{run_id}/pause", headers=OLGA,
                                 json={"reason": "checking the amount"})
        assert done.status_code == 200 and done.json()["status"] == "paused"
        for who, code in ((BOB, 404), (CAROL, 403)):
            refused = await client.post(f"/api/runs/{run_id}/unpause", headers=who, json={})
            assert refused.status_code == code
        assert (await rt.get_run(run_id)).status is RunStatus.PAUSED
        back = await client.post(f"/api/runs/{run_id}/unpause", headers=OLGA, json={})
        assert back.status_code == 200
    assert [(d.kind, d.by) for d in await rt.decisions(run_id)] == [
        ("pause", "olga"), ("unpause", "olga")]


async def test_an_operator_forks_and_the_fork_records_who_and_the_update(
        rt: Runtime, store_factory: Stores) -> None:
    run_id, _, head = await started(rt)
    async with app_on(store_factory(), payout_flow()) as client:
        page = await client.get(f"/runs/{run_id}", headers=OLGA)
        assert "Cancel run" in page.text and "Fork from checkpoint" in page.text
        forked = await client.post(f"/api/runs/{run_id}/fork", headers=OLGA,
                                   json={"checkpoint_id": head, "update": {"amount": 10}})
        assert forked.status_code == 200, forked.text
        fork_id = forked.json()["run_id"]
    assert (await rt.get_run(fork_id)).started_by == "olga"
    first = (await rt.decisions(fork_id))[0]
    assert (first.kind, first.by, first.answer["source_run_id"]) == ("fork", "olga", run_id)


async def test_the_page_forms_of_cancel_and_fork_follow_the_rule(
        rt: Runtime, store_factory: Stores) -> None:
    run_id, _, head = await started(rt)
    async with app_on(store_factory(), payout_flow()) as client:
        page = await client.get(f"/runs/{run_id}", headers=OLGA)  # a page with a form
        csrf = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page.text)
        assert csrf
        token = csrf.group(1)
        for who, code in ((BOB, 404), (CAROL, 403)):
            refused = await client.post(f"/runs/{run_id}/cancel", headers=who,
                                        data={"csrf_token": token})
            assert refused.status_code == code
            refused = await client.post(f"/runs/{run_id}/fork", headers=who,
                                        data={"csrf_token": token, "checkpoint_id": head})
            assert refused.status_code == code
        assert (await rt.get_run(run_id)).status is RunStatus.WAITING
        done = await client.post(f"/runs/{run_id}/cancel", headers=ROOT,
                                 data={"csrf_token": token})
        assert done.status_code == 303
    (decision,) = await rt.decisions(run_id)
    assert (decision.kind, decision.by, decision.via) == ("cancel", "root", "ui")


async def test_an_identical_answer_from_someone_not_allowed_is_refused(
        rt: Runtime, store_factory: Stores) -> None:
    run_id, rid, _ = await started(rt)
    async with app_on(store_factory()) as client:
        ok = await client.post(f"/api/runs/{run_id}/respond", headers=CFO,
                               json={"responses": {rid: False}})
        assert ok.status_code == 200, ok.text
        for who, code in ((CAROL, 403), (BOB, 404)):
            again = await client.post(f"/api/runs/{run_id}/respond", headers=who,
                                      json={"responses": {rid: False}})
            assert again.status_code == code, again.text
    assert [(d.kind, d.by) for d in await rt.decisions(run_id)] == [("answer", "cfo")]


async def test_a_person_s_requests_behind_a_full_page_of_others_are_on_their_first_page(
        rt: Runtime, store_factory: Stores) -> None:
    for _ in range(55):
        await rt.run(flow_for("bob"), {})
    mine = await rt.run(flow_for("alice"), {})
    async with app_on(store_factory()) as client:
        alice = person("alice")
        found = (await client.get("/api/inbox?tab=mine", headers=alice)).json()
        assert [r["run_id"] for r in found["requests"]] == [mine.run_id]
        assert found["next_after"] is None
        page = await client.get("/?tab=mine", headers=alice)
        assert mine.run_id in page.text
        first = (await client.get("/api/inbox?limit=50", headers=person("bob"))).json()
        assert len(first["requests"]) == 50 and first["next_after"] is not None


def flow_for(assignee: str) -> Any:
    b = WorkflowBuilder("asks", state=Payout)

    @b.node()
    async def ask(state: Payout, ctx: Any) -> dict[str, Any]:
        return {"approved": await ctx.request({"question": "ok?"}, bool, assignees=[assignee])}

    b.set_entry("ask")
    b.add_edge("ask", END)
    return b.build()


async def test_answering_another_s_request_in_the_page_says_so(
        rt: Runtime, store_factory: Stores) -> None:
    run_id, rid, _ = await started(rt)
    async with app_on(store_factory()) as client:
        page = await client.get(f"/runs/{run_id}", headers=CAROL)
        assert page.status_code == 200 and run_id in page.text
        assert 'name="request_id"' not in page.text  # no form for a request not hers
        page = await client.get(f"/runs/{run_id}", headers=OLGA)  # a page with a form
        csrf = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page.text)
        assert csrf
        form = {"csrf_token": csrf.group(1), "run_id": run_id, "request_id": rid,
                "answer": "true"}
        card = await client.post("/respond", headers={**CAROL, "hx-request": "true"}, data=form)
        assert card.status_code == 403
        assert "You may not answer this request: it is for cfo. Nothing was recorded." in card.text
        assert "<form" not in card.text and card.text.lstrip().startswith("<article")
        full = await client.post("/respond", headers=CAROL, data=form)
        assert full.status_code == 403 and "This request is not yours to answer" in full.text
    assert await rt.decisions(run_id) == []
    assert (await rt.get_run(run_id)).status is RunStatus.WAITING


async def test_a_claimant_starts_a_run_from_the_form_and_then_may_read_it(
        rt: Runtime, store_factory: Stores) -> None:
    dora = person("dora", "staff")
    async with app_on(store_factory(), payout_flow()) as client:
        listing = await client.get("/start", headers=dora)
        assert listing.status_code == 200 and 'href="/start/payout"' in listing.text
        form_page = await client.get("/start/payout", headers=dora)
        assert form_page.status_code == 200 and 'name="answer/amount"' in form_page.text
        assert 'name="answer/messages"' not in form_page.text
        csrf = re.search(r'name="csrf_token" value="([0-9a-f]+)"', form_page.text)
        assert csrf
        bad = await client.post("/start/payout", headers=dora,
                                data={"csrf_token": csrf.group(1), "answer/amount": "lots"})
        assert bad.status_code == 422 and 'name="answer/amount"' in bad.text
        assert await rt.list_runs() == []
        sent = await client.post("/start/payout", headers=dora,
                                 data={"csrf_token": csrf.group(1), "answer/amount": "120"})
        assert sent.status_code == 303
        run_id = sent.headers["location"].rsplit("/", 1)[-1]
        info = await rt.get_run(run_id)
        assert (info.workflow_name, info.started_by) == ("payout", "dora")
        assert (await client.get(f"/runs/{run_id}", headers=dora)).status_code == 200
        assert (await client.get(f"/api/runs/{run_id}", headers=BOB)).status_code == 404
        api = await client.post("/api/runs", headers=CAROL,
                                json={"workflow": "payout", "input": {"amount": 3}})
        assert api.status_code == 200, api.text
        assert (await rt.get_run(api.json()["run_id"])).started_by == "carol"
        unknown = await client.post("/api/runs", headers=CAROL,
                                    json={"workflow": "nope", "input": {}})
        assert unknown.status_code == 422
    state = await rt.get_state(run_id)
    assert state.values["amount"] == 120
