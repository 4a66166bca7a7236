"""How fast the web inbox's first page renders with 10,000 pending requests.

``python bench/ui_inbox.py [--requests 10000] [--reps 30] [--db PATH]``

Fills a SQLite database through the real ``Runtime`` (runs whose ten
parallel nodes each ask a person, so every request is a real one), serves
``durable-flow ui`` on it with uvicorn on a free localhost port, and times
``GET /`` over HTTP: the whole first page (store query, forms generated
from each request's JSON Schema, template) as a browser receives it. Also
times the store's paged inbox query and, for comparison, reading every
pending request. The target: the first page in under 200 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import httpx
import uvicorn
from pydantic import BaseModel, Field

from durable_flow import END, Blackboard, Runtime, SqliteStore, WorkflowBuilder, merge
from durable_flow.ui import create_app

FAN = 10
TARGET_MS = 200.0


class Expense(BaseModel):
    approved: bool
    amount: float = Field(ge=0)
    reason: str | None = None


class Claim(Blackboard):
    who: str = ""
    decisions: Annotated[dict[str, bool], merge] = {}


def workflow() -> Any:
    b = WorkflowBuilder("expenses", state=Claim)

    @b.node()
    async def submit(state: Claim) -> dict[str, Any]:
        return {}

    def ask(i: int) -> Any:
        async def check(state: Claim, ctx: Any) -> dict[str, Any]:
            answer = await ctx.request({"question": f"Approve line {i} of {state.who}?"},
                                       response_type=Expense)
            return {"decisions": {f"line{i}": answer.approved}}
        return check

    b.set_entry("submit")
    for i in range(FAN):
        b.add_node(f"line{i}", ask(i))
        b.add_edge("submit", f"line{i}")
        b.add_edge(f"line{i}", END)
    return b.build()


async def fill(db: Path, requests: int) -> float:
    wf = workflow()
    began = time.perf_counter()
    async with Runtime(SqliteStore(db)) as rt:
        have = len(await rt.pending_requests())
        for n in range(have // FAN, requests // FAN):
            await rt.run(wf, {"who": f"person {n}"}, run_id=f"claim-{n:06d}")
    return time.perf_counter() - began


async def store_times(db: Path, reps: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"page": [], "all": []}
    store = SqliteStore(db)
    async with Runtime(store) as rt:
        for _ in range(reps):
            t = time.perf_counter()
            await store.pending_requests(limit=51)
            out["page"].append(time.perf_counter() - t)
        for _ in range(max(3, reps // 10)):
            t = time.perf_counter()
            await rt.pending_requests()
            out["all"].append(time.perf_counter() - t)
    return out


def serve(db: Path) -> tuple[uvicorn.Server, threading.Thread, int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    config = uvicorn.Config(create_app(SqliteStore(db)), host="127.0.0.1", port=port,
                            log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    return server, thread, port


def page_times(port: int, reps: int) -> tuple[list[float], int, int]:
    with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
        first = client.get("/")
        first.raise_for_status()
        cards = first.text.count('<article class="request')
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            r = client.get("/")
            r.raise_for_status()
            times.append(time.perf_counter() - t)
        return times, cards, len(first.content)


def ms(values: list[float]) -> str:
    values = sorted(values)
    p95 = values[min(len(values) - 1, int(len(values) * 0.95))]
    return (f"median {statistics.median(values) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms, "
            f"max {values[-1] * 1000:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--db", type=Path, default=None,
                        help="reuse (and top up) this database instead of a temporary one")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "inbox.db"
        took = asyncio.run(fill(db, args.requests))
        print(f"database: {args.requests} pending requests ({took:.1f} s to create)")
        stored = asyncio.run(store_times(db, args.reps))
        print(f"store, one page of 51:      {ms(stored['page'])}")
        print(f"store, every request:       {ms(stored['all'])}")
        server, thread, port = serve(db)
        try:
            times, cards, size = page_times(port, args.reps)
        finally:
            server.should_exit = True
            thread.join(10)
        print(f"GET / over HTTP ({cards} requests with forms, {size // 1024} KiB): {ms(times)}")
        worst = max(times) * 1000
        verdict = "met" if statistics.median(times) * 1000 < TARGET_MS else "MISSED"
        print(f"target: first page under {TARGET_MS:.0f} ms: {verdict} (worst {worst:.1f} ms)")


if __name__ == "__main__":
    main()
