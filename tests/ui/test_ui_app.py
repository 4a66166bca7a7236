"""The web app through HTTP (httpx on the ASGI app): pages, forms, the JSON API, security."""

from __future__ import annotations

import base64
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import uikit
from typer.testing import CliRunner

from durable_flow import MemoryStore, RunStatus, Runtime
from durable_flow.building._diagram import to_mermaid
from durable_flow.cli import app as cli_app
from durable_flow.ui import _pages as pages
from durable_flow.ui import create_app
from durable_flow.ui._security import check_bind
from durable_flow.ui._views import marked_mermaid, namespace_tree

TOKEN = "s3cret-token"


@asynccontextmanager
async def serving(store: Any, *, workflows: Any = (), token: str | None = None,
                  host: str = "127.0.0.1") -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(store, workflows=workflows, token=token)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=f"http://{host}:8765") as client:
            yield client


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([0-9a-f]+)"', html)
    assert found, "no csrf_token in the page"
    return found.group(1)


async def start(store_factory: Callable[[], Any], workflow: Any, input: dict[str, Any]) -> Any:
    async with Runtime(store_factory()) as rt:
        return await rt.run(workflow, input)


async def answer_form(client: httpx.AsyncClient, run_id: str, request_id: str,
                      fields: dict[str, str], *, htmx: bool = True) -> httpx.Response:
    page = await client.get("/")
    data = {"csrf_token": csrf_of(page.text), "run_id": run_id, "request_id": request_id, **fields}
    headers = {"HX-Request": "true"} if htmx else {}
    return await client.post("/respond", data=data, headers=headers)


# -- the inbox -------------------------------------------------------------------------------------


async def test_the_inbox_lists_open_requests_across_runs_and_levels_oldest_first(
        store_factory: Callable[[], Any]) -> None:
    first = await start(store_factory, uikit.approval, {"topic": "tides"})
    nested = await start(store_factory, uikit.parent, {"topic": "lease"})
    async with serving(store_factory()) as client:
        html = (await client.get("/")).text
        assert html.index(first.run_id) < html.index(nested.run_id)
        assert "legal.sign" in html and "Sign off lease?" in html
        only = (await client.get("/", params={"workflow": "contract"})).text
        assert nested.run_id in only and first.run_id not in only


async def test_the_inbox_reads_one_page_from_the_store(monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryStore()
    runs = [await start(lambda: store, uikit.approval, {"topic": f"t{i}"}) for i in range(5)]
    asked: list[dict[str, Any]] = []
    real = store.pending_requests

    async def spy(**kw: Any) -> Any:
        asked.append(kw)
        return await real(**kw)

    monkeypatch.setattr(store, "pending_requests", spy)
    monkeypatch.setattr(pages, "PAGE", 2)
    async with serving(store) as client:
        seen: list[str] = []
        url: str | None = "/"
        while url:
            html = (await client.get(url)).text
            seen += [r.run_id for r in runs if r.run_id in html]
            found = re.search(r'rel="next" href="([^"]+)"', html)
            url = found.group(1).replace("&amp;", "&") if found else None
    assert seen == [r.run_id for r in runs]
    assert {a["limit"] for a in asked} == {3}  # a page and one more, never everything


async def test_an_answer_from_the_form_is_recorded_and_the_run_continues_here(
        store_factory: Callable[[], Any]) -> None:
    result = await start(store_factory, uikit.approval, {"topic": "tides"})
    [req] = result.pending_requests
    async with serving(store_factory(), workflows=[uikit.approval]) as client:
        response = await answer_form(client, result.run_id, req.id, {"answer": "true"})
        assert response.status_code == 200
        assert "Approved. The run goes on now." in response.text
        async with Runtime(store_factory()) as rt:
            info = await rt.wait(result.run_id, timeout=10)
            assert info.status is RunStatus.COMPLETED
            assert (await rt.get_state(result.run_id)).values["approved"] is True


async def test_without_its_workflow_an_answer_queues_the_run_for_a_worker(
        store_factory: Callable[[], Any]) -> None:
    result = await start(store_factory, uikit.approval, {"topic": "tides"})
    [req] = result.pending_requests
    async with serving(store_factory()) as client:
        response = await answer_form(client, result.run_id, req.id, {"answer": "false"},
                                     htmx=False)
        assert response.status_code == 303
        assert (await client.get(f"/api/runs/{result.run_id}")).json()["status"] == "queued"


async def test_a_wrong_typed_answer_shows_the_problem_and_changes_nothing(
        store_factory: Callable[[], Any]) -> None:
    result = await start(store_factory, uikit.review, {"title": "T"})
    [req] = result.pending_requests
    async with serving(store_factory()) as client:
        response = await answer_form(client, result.run_id, req.id, {
            "answer/score": "eleven", "answer/verdict": '"accept"'})
        assert response.status_code == 422
        assert 'data-error-for="answer/score"' in response.text
        assert "enter a whole number" in response.text
        assert 'value="eleven"' in response.text  # what was typed stays
        response = await answer_form(client, result.run_id, req.id, {
            "answer/score": "11", "answer/verdict": '"accept"'})
        assert "11 is greater than the maximum of 10" in response.text
        inbox = (await client.get("/api/inbox")).json()
        assert [r["id"] for r in inbox["requests"]] == [req.id]
        assert (await client.get(f"/api/runs/{result.run_id}")).json()["status"] == "waiting"


async def test_a_form_without_its_csrf_token_is_refused(store_factory: Callable[[], Any]) -> None:
    result = await start(store_factory, uikit.approval, {"topic": "tides"})
    [req] = result.pending_requests
    async with serving(store_factory()) as client:
        await client.get("/")
        for token in ("", "0" * 64):
            response = await client.post("/respond", data={
                "csrf_token": token, "run_id": result.run_id, "request_id": req.id,
                "answer": "true"})
            assert response.status_code == 403
        forged = await client.post(f"/runs/{result.run_id}/cancel", data={})
        assert forged.status_code == 403
        assert (await client.get(f"/api/runs/{result.run_id}")).json()["status"] == "waiting"


async def test_user_data_is_escaped_everywhere(store_factory: Callable[[], Any]) -> None:
    evil = "<script>alert('x')</script>"
    result = await start(store_factory, uikit.approval, {"topic": evil})
    async with serving(store_factory(), workflows=[uikit.approval]) as client:
        for url in ("/", f"/runs/{result.run_id}", "/runs"):
            html = (await client.get(url)).text
            assert "<script>alert" not in html
        assert "&lt;script&gt;alert" in (await client.get("/")).text
        csp = (await client.get("/")).headers["content-security-policy"]
        assert "script-src 'self'" in csp


# -- runs and the run page ------------------------------------------------------------------------


async def test_runs_are_filtered_and_paged(store_factory: Callable[[], Any],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(3):
        await start(store_factory, uikit.approval, {"topic": f"t{i}"})
    nested = await start(store_factory, uikit.parent, {"topic": "lease"})
    monkeypatch.setattr(pages, "PAGE", 2)
    async with serving(store_factory()) as client:
        html = (await client.get("/runs", params={"workflow": "contract"})).text
        assert nested.run_id in html and "1\u20131 of 1" in html
        first = (await client.get("/runs")).text
        assert 'rel="next"' in first and "of 4" in first
        api = (await client.get("/api/runs", params={"status": "waiting", "limit": 3})).json()
        assert api["total"] == 4 and len(api["runs"]) == 3 and api["next_offset"] == 3
        assert (await client.get("/api/runs", params={"status": "nope"})).status_code == 422


async def test_the_run_page_shows_timeline_state_diff_tree_graph_and_histories(
        store_factory: Callable[[], Any]) -> None:
    result = await start(store_factory, uikit.approval, {"topic": "tides"})
    nested = await start(store_factory, uikit.parent, {"topic": "lease"})
    async with serving(store_factory(), workflows=[uikit.approval, uikit.parent]) as client:
        history = (await client.get(f"/api/runs/{result.run_id}/history")).json()
        newest, oldest = history["checkpoints"]
        html = (await client.get(f"/runs/{result.run_id}",
                                 params={"cp": newest["id"], "vs": oldest["id"]})).text
        assert "#1" in html and "#0" in html  # the timeline
        assert "Changes from #0 to #1" in html
        assert "write about tides" in html  # the draft node's transcript
        assert 'class="mermaid"' in html and "class n1 current" not in html  # an old checkpoint
        head = (await client.get(f"/runs/{result.run_id}")).text
        assert "class n1 current" in head  # approve, the node waiting
        diff_link = f"?cp={newest['id']}&amp;vs={oldest['id']}"
        assert diff_link in head  # every older checkpoint can be compared with the head
        assert "Fork from checkpoint" in head and "disabled" not in head.split("Fork from")[0][-80:]
        tree = (await client.get(f"/runs/{nested.run_id}")).text
        assert f'href="/runs/{nested.run_id}?ns=legal"' in tree
        inner = (await client.get(f"/runs/{nested.run_id}", params={"ns": "legal"})).text
        assert "Blackboard" in inner and "legal" in inner


async def test_the_page_of_a_run_that_may_still_move_follows_it_and_a_finished_one_does_not(
        store_factory: Callable[[], Any]) -> None:
    waiting = await start(store_factory, uikit.approval, {"topic": "tides"})
    async with Runtime(store_factory()) as rt:
        done = await rt.resume(uikit.approval, waiting.run_id,
                               responses={waiting.pending_requests[0].id: True})
        assert done.status is RunStatus.COMPLETED
    other = await start(store_factory, uikit.approval, {"topic": "moon"})
    assert other.status is RunStatus.WAITING
    async with serving(store_factory()) as client:
        # a waiting run moves the moment someone answers: its page polls and reloads then
        page = (await client.get(f"/runs/{other.run_id}")).text
        assert 'data-live="1"' in page and 'data-status="waiting"' in page
        finished = (await client.get(f"/runs/{done.run_id}")).text
        assert 'data-status="completed"' in finished and "data-live" not in finished


async def test_the_timeline_loads_older_checkpoints_a_page_at_a_time(
        store_factory: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> None:
    result = await start(store_factory, uikit.approval, {"topic": "tides"})
    monkeypatch.setattr(pages, "PAGE", 1)
    async with serving(store_factory()) as client:
        html = (await client.get(f"/runs/{result.run_id}")).text
        found = re.search(r'hx-get="(/runs/[^"]+/timeline[^"]+)"', html)
        step = '<span class="superstep">#{}</span>'.format
        assert found and step(1) in html and step(0) not in html
        older = (await client.get(found.group(1).replace("&amp;", "&"))).text
        assert step(0) in older and "older checkpoints" not in older


async def test_cancel_and_fork_from_the_run_page(store_factory: Callable[[], Any]) -> None:
    result = await start(store_factory, uikit.approval, {"topic": "tides"})
    async with serving(store_factory(), workflows=[uikit.approval]) as client:
        page = await client.get(f"/runs/{result.run_id}")
        token = csrf_of(page.text)
        forked = await client.post(f"/runs/{result.run_id}/fork", data={
            "csrf_token": token, "checkpoint_id": result.checkpoint_id})
        assert forked.status_code == 303
        new_id = forked.headers["location"].rsplit("/", 1)[1]
        info = (await client.get(f"/api/runs/{new_id}")).json()
        assert info["forked_from_run_id"] == result.run_id and info["status"] == "waiting"
        cancelled = await client.post(f"/runs/{result.run_id}/cancel",
                                      data={"csrf_token": token})
        assert cancelled.status_code == 303
        assert (await client.get(f"/api/runs/{result.run_id}")).json()["status"] == "cancelled"


async def test_fork_needs_the_workflow(store_factory: Callable[[], Any]) -> None:
    result = await start(store_factory, uikit.approval, {"topic": "tides"})
    async with serving(store_factory()) as client:
        page = (await client.get(f"/runs/{result.run_id}")).text
        assert "disabled" in page
        response = await client.post(f"/api/runs/{result.run_id}/fork",
                                     json={"checkpoint_id": result.checkpoint_id})
        assert response.status_code == 422 and "MODULE:WORKFLOW" in response.json()["message"]


# -- the JSON API ---------------------------------------------------------------------------------


async def test_the_api_answers_reads_and_describes_itself(store_factory: Callable[[], Any]) -> None:
    result = await start(store_factory, uikit.review, {"title": "T"})
    [req] = result.pending_requests
    async with serving(store_factory()) as client:
        inbox = (await client.get("/api/inbox")).json()
        assert inbox["requests"][0]["response_schema"]["type"] == "object"
        bad = await client.post(f"/api/runs/{result.run_id}/respond",
                                json={"responses": {req.id: {"score": "x", "verdict": "accept"}}})
        assert bad.status_code == 422 and bad.json()["error"] == "InvalidResponseError"
        unknown = await client.post(f"/api/runs/{result.run_id}/respond",
                                    json={"responses": {"nope": 1}})
        assert unknown.status_code == 409
        missing = await client.get("/api/runs/nope")
        assert missing.status_code == 404 and missing.json()["error"] == "RunNotFoundError"
        good = await client.post(f"/api/runs/{result.run_id}/respond",
                                 json={"responses": {req.id: {"score": 7, "verdict": "accept"}}})
        assert good.status_code == 200 and good.json()["status"] == "queued"
        head = good.json()["head_checkpoint_id"]
        snap = (await client.get(f"/api/runs/{result.run_id}/checkpoints/{head}")).json()
        assert snap["values"]["title"] == "T"
        two = await start(store_factory, uikit.approval, {"topic": "tides"})  # two checkpoints
        url = f"/api/runs/{two.run_id}/history"
        page = (await client.get(url, params={"limit": 1})).json()
        assert [c["id"] for c in page["checkpoints"]] == [two.checkpoint_id]
        rest = (await client.get(url, params={"limit": 1, "before": page["next_before"]})).json()
        assert rest["checkpoints"][0]["superstep"] == 0 and rest["next_before"] is None
        spec = (await client.get("/api/openapi.json")).json()
        assert {"/api/runs", "/api/runs/{run_id}", "/api/runs/{run_id}/history",
                "/api/runs/{run_id}/checkpoints/{checkpoint_id}", "/api/inbox",
                "/api/runs/{run_id}/respond", "/api/runs/{run_id}/cancel",
                "/api/runs/{run_id}/fork"} <= set(spec["paths"])
        assert not any(not p.startswith("/api/") for p in spec["paths"])


async def test_api_writes_must_be_json(store_factory: Callable[[], Any]) -> None:
    result = await start(store_factory, uikit.approval, {"topic": "tides"})
    async with serving(store_factory()) as client:
        response = await client.post(f"/api/runs/{result.run_id}/cancel",
                                     content=b"{}", headers={"content-type": "text/plain"})
        assert response.status_code == 415
        assert (await client.get(f"/api/runs/{result.run_id}")).json()["status"] == "waiting"


async def test_unknown_api_routes_and_methods_answer_in_the_error_envelope() -> None:
    async with serving(MemoryStore()) as client:
        missing = await client.get("/api/nothing-here")
        assert missing.status_code == 404
        assert missing.json() == {"error": "NotFound", "request_id": None,
                                  "message": "no API route GET /api/nothing-here"}
        wrong = await client.put("/api/inbox", json={})
        assert wrong.status_code == 405 and wrong.json()["error"] == "MethodNotAllowed"
        assert "GET" in wrong.headers["allow"]  # the response's own headers are kept
        page = await client.get("/no-such-page")  # pages keep their own answer
        assert page.status_code == 404 and "error" not in page.text.lower()[:20]


# -- security --------------------------------------------------------------------------------------


async def test_a_token_is_required_on_every_page_and_api_call() -> None:
    store = MemoryStore()
    result = await start(lambda: store, uikit.approval, {"topic": "tides"})
    async with serving(store, token=TOKEN) as client:
        page = await client.get("/")
        assert page.status_code == 401 and 'name="token"' in page.text
        assert "Log out" not in page.text
        assert (await client.get("/runs")).status_code == 401
        api = await client.get("/api/inbox")
        assert api.status_code == 401 and api.headers["www-authenticate"] == "Bearer"
        assert (await client.get("/api/openapi.json")).status_code == 401
        wrong = await client.get("/api/inbox", headers={"authorization": "Bearer nope"})
        assert wrong.status_code == 401
        ok = await client.get("/api/inbox", headers={"authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 200 and ok.json()["requests"][0]["run_id"] == result.run_id
        # the app's own assets are public, so the login and link pages are styled
        for asset in ("/static/htmx.min.js", "/static/style.css"):
            public = await client.get(asset)
            assert public.status_code == 200 and public.text


async def test_only_the_token_itself_in_a_bearer_header_lets_a_request_in() -> None:
    # near misses of the token, other places and schemes for it, and paths that try to
    # reach the API around the check: all refused, nothing of the run shown, nothing changed
    store = MemoryStore()
    result = await start(lambda: store, uikit.approval, {"topic": "tides"})
    basic = "Basic " + base64.b64encode(f"admin:{TOKEN}".encode()).decode()
    async with serving(store, token=TOKEN) as client:
        near = [{"authorization": f"Bearer {TOKEN[:-1]}"}, {"authorization": f"Bearer {TOKEN}x"},
                {"authorization": basic}, {"authorization": TOKEN},
                {"authorization": f"Token {TOKEN}"}]
        for headers in near:
            refused = await client.get("/api/inbox", headers=headers)
            assert refused.status_code == 401, headers
        for params in ({"token": TOKEN}, {"access_token": TOKEN}):
            assert (await client.get("/api/inbox", params=params)).status_code == 401
        for name in ("durable_flow_session", "durable_flow_user"):
            client.cookies.set(name, TOKEN)
            assert (await client.get("/api/inbox")).status_code == 401, name
            client.cookies.clear()
        for path in ("/static/%2e%2e/api/runs", "/static/..%2fapi/runs", "//api/runs",
                     "/API/runs", "/approve/%2e%2e/api/runs", "/approve/x/y/../../api/runs",
                     f"/runs/{result.run_id}", f"/api/runs/{result.run_id}"):
            got = await client.get(path)
            assert got.status_code in (400, 401, 404), (path, got.status_code)
            assert result.run_id not in got.text or "login" in got.text.lower(), path
        for path, body in ((f"/api/runs/{result.run_id}/cancel", {"json": {}}),
                           (f"/runs/{result.run_id}/cancel", {"data": {}})):
            assert (await client.post(path, **body)).status_code == 401, path
    assert (await store.get_run(result.run_id)).status is RunStatus.WAITING


async def test_the_login_form_sets_an_http_only_cookie_that_is_not_the_token() -> None:
    async with serving(MemoryStore(), token=TOKEN) as client:
        login = await client.get("/login")
        token = csrf_of(login.text)
        failed = await client.post("/login", data={"csrf_token": token, "token": "nope"})
        assert failed.status_code == 401
        done = await client.post("/login", data={"csrf_token": token, "token": TOKEN,
                                                 "next": "//evil.example/"})
        assert done.status_code == 303 and done.headers["location"] == "/"
        cookie = done.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and TOKEN not in cookie
        home = await client.get("/")
        assert home.status_code == 200 and "Log out" in home.text
        # an API write authenticated by the cookie needs the CSRF header too
        refused = await client.post("/api/runs/x/cancel", json={})
        assert refused.status_code == 403
        allowed = await client.post("/api/runs/x/cancel", json={},
                                    headers={"x-csrf-token": csrf_of((await client.get("/")).text)})
        assert allowed.status_code == 404


async def test_without_a_token_only_loopback_host_names_are_served() -> None:
    async with serving(MemoryStore(), host="attacker.example") as client:
        assert (await client.get("/")).status_code == 400
    async with serving(MemoryStore(), host="localhost") as client:
        assert (await client.get("/")).status_code == 200


async def test_without_a_token_a_host_header_is_loopback_only_when_it_is_nothing_else() -> None:
    refused = ("evil.example", "evil.example:80", "127.0.0.1.evil.example", "localhost.evil.example",
               "[::1].evil.example", "[::1]evil.example", "[::1]:80.evil.example", "[::1]:",
               "0x7f000001", "2130706433", "")
    served = ("127.0.0.1", "127.0.0.1:8765", "localhost:8765", "[::1]", "[::1]:8765")
    async with serving(MemoryStore()) as client:
        for host in refused:
            got = await client.get("/api/runs", headers={"host": host})
            assert got.status_code == 400, host
        for host in served:
            got = await client.get("/api/runs", headers={"host": host})
            assert got.status_code == 200, host


def test_binding_off_localhost_needs_a_token() -> None:
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        check_bind(host, None)
    check_bind("0.0.0.0", TOKEN)
    with pytest.raises(ValueError, match="without --token"):
        check_bind("0.0.0.0", None)
    with pytest.raises(ValueError, match="at least 8"):
        check_bind("127.0.0.1", "short")
    result = CliRunner().invoke(cli_app, ["--db", ":memory:", "ui", "--host", "192.168.0.10"])
    assert result.exit_code == 1 and "without --token" in result.output


# -- pieces -----------------------------------------------------------------------------------


def test_the_graph_marks_the_current_nodes_by_their_chart_ids() -> None:
    chart = marked_mermaid(uikit.approval, ["approve"])
    [line] = [ln for ln in to_mermaid(uikit.approval).splitlines() if '["approve' in ln]
    chart_id = line.strip().split("[", 1)[0]
    assert f"class {chart_id} current" in chart
    assert "current" not in marked_mermaid(uikit.approval, [])
    assert f"class {chart_id} current" in marked_mermaid(uikit.approval, ["approve[3].x"])


def test_namespaces_form_a_tree_with_instances_shown_as_given() -> None:
    tree = namespace_tree({"review[2]": RunStatus.WAITING, "review[2].legal": RunStatus.WAITING,
                           "audit.deep.deeper": RunStatus.COMPLETED})
    assert [c.name for c in tree.children] == ["review[2]", "audit"]
    assert [c.name for c in tree.children[0].children] == ["legal"]
    assert tree.children[1].children[0].children[0].namespace == "audit.deep.deeper"


@pytest.mark.process
def test_importing_the_package_does_not_load_the_web_stack() -> None:
    code = "import sys, durable_flow; print(sorted({'fastapi', 'jinja2', 'uvicorn'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


async def test_an_answer_to_a_request_no_longer_open_says_so() -> None:
    store = MemoryStore()
    result = await start(lambda: store, uikit.approval, {"topic": "tides"})
    [req] = result.pending_requests
    async with serving(store) as client:
        page = (await client.get("/")).text
        async with Runtime(store) as rt:
            await rt.respond(result.run_id, {req.id: True})
        response = await client.post("/respond", headers={"HX-Request": "true"}, data={
            "csrf_token": csrf_of(page), "run_id": result.run_id, "request_id": req.id,
            "answer": "false"})
        assert response.status_code == 200 and "no longer open" in response.text
