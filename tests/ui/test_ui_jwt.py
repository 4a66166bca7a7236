"""Single sign-on by bearer JWT over HTTP: no anonymous admin, `exp` required, 401 not 500.

On memory, SQLite and PostgreSQL (the app's store from ``store_factory``).
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import jwt as pyjwt

from durable_flow import END, Blackboard, Runtime, WorkflowBuilder
from durable_flow.runtime.people._users import Users
from durable_flow.store._protocols import CheckpointStore
from durable_flow.ui import create_app
from durable_flow.ui._bearer import JwtVerifier

KEY = "jwt-key-0123456789abcdef0123456789abcdef"
Stores = Callable[[], CheckpointStore]


class Claim(Blackboard):
    ok: bool | None = None


def flow() -> Any:
    b = WorkflowBuilder("claim", state=Claim)

    @b.node()
    async def approve(state: Claim, ctx: Any) -> dict[str, Any]:
        return {"ok": await ctx.request({"question": "Pay?"}, bool, assignees=["cfo"])}

    b.set_entry("approve").add_edge("approve", END)
    return b.build()


@asynccontextmanager
async def jwt_only(store: CheckpointStore) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(store, jwt=JwtVerifier(KEY, public=False))  # no --token
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app), \
            httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as c:
        yield c


def bearer(claims: dict[str, Any]) -> dict[str, str]:
    return {"authorization": f"Bearer {pyjwt.encode(claims, KEY, algorithm='HS256')}"}


async def test_without_a_token_every_request_needs_a_valid_jwt(rt: Runtime,
                                                              store_factory: Stores) -> None:
    result = await rt.run(flow(), {})
    rid = result.pending_requests[0].id
    later = int(time.time()) + 600
    async with jwt_only(store_factory()) as c:
        assert (await c.get("/api/inbox", params={"tab": "all"})).status_code == 401
        assert (await c.get("/api/runs")).status_code == 401
        assert (await c.get("/")).status_code == 401  # the login page, not the admin's inbox
        anon = await c.post(f"/api/runs/{result.run_id}/reassign",
                            json={"request_id": rid, "assignees": ["bob"]})
        assert anon.status_code == 401
        assert (await c.get("/api/inbox", headers={"authorization": "Bearer a.b.c"})
                ).status_code == 401
        bob = bearer({"sub": "bob", "roles": ["sales"], "exp": later})
        assert (await c.get("/api/inbox", headers=bob)).status_code == 200
        mine = await c.get("/api/inbox", params={"tab": "mine"}, headers=bob)
        assert mine.json()["requests"] == []
        refused = await c.post(f"/api/runs/{result.run_id}/reassign", headers=bob,
                               json={"request_id": rid, "assignees": ["bob"]})
        assert refused.status_code == 404  # not his run: he may not even see it
    assert await rt.decisions(result.run_id) == []


async def test_a_jwt_without_exp_or_naming_nobody_is_refused_with_401(
        store_factory: Stores) -> None:
    later = int(time.time()) + 600
    async with jwt_only(store_factory()) as c:
        for claims in ({"sub": "carol"}, {"sub": "", "exp": later}, {"sub": " ", "exp": later},
                       {"sub": "carol", "roles": [" "], "exp": later}):
            got = await c.get("/api/inbox", headers=bearer(claims))
            assert got.status_code == 401, claims
            assert got.json()["error"] == "Unauthorized"


async def test_people_log_in_with_a_password_when_only_jwts_are_accepted(
        rt: Runtime, store_factory: Stores) -> None:
    await Users(rt.store).add("alice", "alice-pw-1", roles=["finance"])
    async with jwt_only(store_factory()) as c:
        page = await c.get("/login")
        assert page.status_code == 200
        csrf = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page.text)
        assert csrf
        done = await c.post("/login", data={"csrf_token": csrf.group(1), "name": "alice",
                                            "password": "alice-pw-1", "next": "/"})
        assert done.status_code == 303
        assert (await c.get("/api/inbox", params={"tab": "mine"})).status_code == 200
