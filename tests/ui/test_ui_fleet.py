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
