"""The web app and API for a fleet: pause and unpause buttons, paused runs and why, labels."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import uikit

from durable_flow import Runtime
from durable_flow.ui import create_app


@asynccontextmanager
async def serving(store: Any) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(store, workflows=[uikit.approval])
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as c:
            yield c


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([0-9a-f]+)"', html)
    assert found, "no csrf_token in the page"
    return found.group(1)


async def test_the_run_page_pauses_and_unpauses_and_says_why(
        store_factory: Callable[[], Any]) -> None:
    async with Runtime(store_factory()) as rt:
        result = await rt.run(uikit.approval, {"topic": "tides"}, labels={"customer": "acme"})
    async with serving(store_factory()) as client:
        page = await client.get(f"/runs/{result.run_id}")
        assert "Pause run" in page.text and "Unpause run" not in page.text
        assert "customer=acme" in page.text
        paused = await client.post(f"/runs/{result.run_id}/pause", data={
            "csrf_token": csrf_of(page.text), "reason": "model provider outage"})
        assert paused.status_code == 303
        page = await client.get(f"/runs/{result.run_id}")
        assert "Paused</strong>: model provider outage" in page.text
        assert "Unpause run" in page.text and "Pause run</button>" not in page.text
        listing = await client.get("/runs?label=customer%3Dacme")
        assert result.run_id in listing.text and "paused: model provider outage" in listing.text
        assert result.run_id not in (await client.get("/runs?label=customer%3Dglobex")).text
        api = (await client.get("/api/runs", params={"label": "customer=acme"})).json()
        assert [r["run_id"] for r in api["runs"]] == [result.run_id]
        assert api["runs"][0]["status"] == "paused"
        assert api["runs"][0]["pause_reason"] == "model provider outage"
        assert api["runs"][0]["labels"] == {"customer": "acme"}
        back = await client.post(f"/runs/{result.run_id}/unpause",
                                 data={"csrf_token": csrf_of(page.text)})
        assert back.status_code == 303
        info = (await client.get(f"/api/runs/{result.run_id}")).json()
        assert info["status"] == "waiting" and info["pause_reason"] is None
        # the API: pause with a reason, then refused for a run that ended
        out = (await client.post(f"/api/runs/{result.run_id}/pause",
                                 json={"reason": "again"})).json()
        assert out["status"] == "paused" and out["pause_reason"] == "again"
        assert (await client.post(f"/api/runs/{result.run_id}/unpause",
                                  json={})).json()["status"] == "waiting"
        await client.post(f"/api/runs/{result.run_id}/cancel", json={})
        refused = await client.post(f"/api/runs/{result.run_id}/pause", json={})
        assert refused.status_code == 422
    async with Runtime(store_factory()) as rt:
        kinds = [(d.kind, d.by) for d in await rt.decisions(result.run_id)]
    assert kinds == [("pause", "admin"), ("unpause", "admin"), ("pause", "admin"),
                     ("unpause", "admin"), ("cancel", "admin")]


async def test_the_run_page_says_when_a_task_waits_for_a_limit_and_shows_the_key(
        store_factory: Callable[[], Any]) -> None:
    wf = uikit.approval
    async with Runtime(store_factory()) as rt:
        info = await rt.submit(wf, {"topic": "tides"}, concurrency_key="acme")
    store = store_factory()
    await store.setup()
    try:
        [(record, _lease)] = await store.claim_next("w1", 30, [(wf.name, wf.version)], limit=1)
        assert record.run_id == info.run_id
        held = await store.request_grant("held", "api", run_id="other", task="call",
                                         owner="w2", ttl=30.0, concurrency=1, per_second=None,
                                         per_minute=None)
        mine = await store.request_grant("mine", "api", run_id=info.run_id, task="draft",
                                         owner="w1", ttl=30.0, concurrency=1, per_second=None,
                                         per_minute=None)
        assert held.granted and not mine.granted
        async with serving(store_factory()) as client:
            page = (await client.get(f"/runs/{info.run_id}")).text
            assert "waiting for api: 1 of 1 in use (node draft)" in page
            assert 'concurrency key: <span class="mono">acme</span>' in page
            api = (await client.get(f"/api/runs/{info.run_id}")).json()
            assert api["concurrency_key"] == "acme"
            await store.release_grant("held", "api")
            await store.request_grant("mine", "api", run_id=info.run_id, task="draft",
                                      owner="w1", ttl=30.0, concurrency=1, per_second=None,
                                      per_minute=None)  # granted now: no wait to show
            assert "waiting for api" not in (await client.get(f"/runs/{info.run_id}")).text
    finally:
        await store.close()
