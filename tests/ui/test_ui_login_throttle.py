"""Failed logins are slowed, then refused with 429 and Retry-After; names do not leak by timing.

Over HTTP against the app, on memory, SQLite and PostgreSQL (the app's store
from ``store_factory``, the test's users written through ``rt``).
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx

from durable_flow import Runtime
from durable_flow.runtime.people._users import Users
from durable_flow.store._protocols import CheckpointStore
from durable_flow.ui import create_app
from durable_flow.ui._throttle import FAILURES, WINDOW_MINUTES

TOKEN = "admin-token-1"
Stores = Callable[[], CheckpointStore]


@asynccontextmanager
async def app_on(store: CheckpointStore) -> AsyncIterator[Any]:
    app = create_app(store, token=TOKEN)
    async with app.router.lifespan_context(app):
        yield app


def client_of(app: Any, address: str = "127.0.0.1") -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app, client=(address, 5000)),
                             base_url="http://127.0.0.1:8765")


async def attempt(c: httpx.AsyncClient, **form: str) -> httpx.Response:
    page = await c.get("/login")
    found = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page.text)
    assert found
    return await c.post("/login", data={"csrf_token": found.group(1), "next": "/", **form})


async def test_failed_logins_are_refused_with_429_and_retry_after(
        rt: Runtime, store_factory: Stores) -> None:
    await Users(rt.store).add("alice", "alice-pw-1")
    await Users(rt.store).add("bob", "bob-pw-1")
    async with app_on(store_factory()) as app:
        async with client_of(app, "10.0.0.1") as c:
            codes = [(await attempt(c, name="alice", password=f"guess-{i}")).status_code
                     for i in range(FAILURES)]
            assert codes == [401] * FAILURES
            refused = await attempt(c, name="alice", password="alice-pw-1")  # right, but too late
            assert refused.status_code == 429
            wait = int(refused.headers["retry-after"])
            assert 1 <= wait <= WINDOW_MINUTES * 60
            assert "Too many failed logins" in refused.text and "durable_flow_user" not in (
                refused.headers.get("set-cookie") or "")
            # the client is refused for any name, and for the token too
            assert (await attempt(c, name="bob", password="bob-pw-1")).status_code == 429
            assert (await attempt(c, token=TOKEN)).status_code == 429
        async with client_of(app, "10.0.0.2") as elsewhere:
            # alice's name is held from any client; bob logs in from another one
            assert (await attempt(elsewhere, name="alice", password="alice-pw-1")
                    ).status_code == 429
            assert (await attempt(elsewhere, name="bob", password="bob-pw-1")).status_code == 303


async def test_each_failure_answers_later_than_the_one_before(store_factory: Stores) -> None:
    async with app_on(store_factory()) as app, client_of(app, "10.0.0.3") as c:
        took = []
        for i in range(3):
            start = time.perf_counter()
            assert (await attempt(c, token=f"wrong-{i}")).status_code == 401
            took.append(time.perf_counter() - start)
        assert took[1] >= 0.2 and took[2] >= 0.4  # 0.2 s more per failure counted before


async def test_an_unknown_name_costs_what_a_wrong_password_costs(rt: Runtime) -> None:
    users = Users(rt.store)
    await users.add("alice", "alice-pw-1")

    async def timed(name: str) -> float:
        start = time.perf_counter()
        assert await users.login(name, "wrong") is None
        return time.perf_counter() - start

    known = min([await timed("alice") for _ in range(3)])
    unknown = min([await timed("nobody-by-this-name") for _ in range(3)])
    # argon2 verification (tens of ms) runs for both; a lookup alone takes about 1 ms
    assert unknown > known * 0.4, (known, unknown)
