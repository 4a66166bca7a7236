"""The whole inbox read straight into ``PendingRequest`` (store/sql/_inbox.py), every store.

It must list what the usual way (``RequestRow`` then ``to_pending``) lists,
field for field, and read only what it shows through the open-requests index.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from durable_flow import END, Blackboard, RunStatus, Runtime, SqliteStore, WorkflowBuilder
from durable_flow.runtime._inspect import to_pending
from durable_flow.store.sql._tables import REQUESTS

SHOWN = ("request_id", "run_id", "workflow_name", "node", "payload", "response_schema",
         "created_at", "expires_at", "approval")


class Claim(Blackboard):
    n: int = 0
    answers: list[Any] = []


def asking(name: str) -> Any:
    b = WorkflowBuilder(name, state=Claim)

    @b.node()
    async def plain(state: Claim, ctx: Any) -> dict[str, Any]:
        return {"answers": [await ctx.request({"question": f"ok {state.n}?"}, bool)]}

    @b.node()
    async def assigned(state: Claim, ctx: Any) -> dict[str, Any]:
        answer = await ctx.request({"title": "  Pay\nnow", "when": datetime(2026, 1, 2, tzinfo=UTC),
                                    "raw": b"\x00\x01"}, int, title=None,
                                   assignees=["alice"], roles=["finance"], timeout=3600)
        return {"answers": [answer]}

    @b.node()
    async def titled(state: Claim, ctx: Any) -> dict[str, Any]:
        return {"answers": [await ctx.request([1, 2, state.n], str, title="A list")]}

    b.set_entry("plain")
    b.add_edge("plain", "assigned")
    b.add_edge("plain", "titled")
    b.add_edge("assigned", END)
    b.add_edge("titled", END)
    return b.build()


async def usual(rt: Runtime, workflow_name: str | None = None) -> list[Any]:
    schemas: dict[bytes, Any] = {}
    return [to_pending(r, schemas) for r in await rt.store.pending_requests(
        workflow_name=workflow_name)]


async def test_the_inbox_lists_what_the_usual_way_lists(rt: Runtime) -> None:
    for name in ("expenses", "travel"):
        wf = asking(name)
        for n in range(3):
            first = await rt.run(wf, {"n": n})
            assert first.status is RunStatus.WAITING
            (req,) = first.pending_requests
            second = await rt.resume(wf, first.run_id, responses={req.id: True})
            assert len(second.pending_requests) == 2
    listed = await rt.pending_requests()
    assert len(listed) == 12
    assert listed == await usual(rt)
    tagged = next(p for p in listed if p.node == "assigned")
    assert tagged.payload["when"] == datetime(2026, 1, 2, tzinfo=UTC)  # tagged values decoded
    assert tagged.payload["raw"] == b"\x00\x01"
    assert (tagged.title, tagged.assignees, tagged.roles) == ("Pay", ("alice",), ("finance",))
    assert tagged.expires_at is not None
    assert tagged.expires_at - tagged.created_at == timedelta(hours=1)
    assert {p.title for p in listed if p.node == "titled"} == {"A list"}
    for name in ("expenses", "travel", "none"):
        only = await rt.pending_requests(workflow_name=name)
        assert only == await usual(rt, name)
        assert {p.workflow_name for p in only} <= {name} and len(only) == (0 if name == "none" else 6)
    # each payload is the caller's own: changing one changes no other listing
    tagged.payload["title"] = "changed"
    assert [p.payload["title"] for p in listed if p.node == "assigned"].count("changed") == 1
    assert {p.payload["title"] for p in await rt.pending_requests() if p.node == "assigned"} == {
        "  Pay\nnow"}


def test_it_selects_only_what_a_pending_request_shows_through_the_index(tmp_path: Path) -> None:
    # the shape: nine columns, no blob a PendingRequest does not show (answers, thread...)
    q = SqliteStore(tmp_path / "inbox.db")._q
    for filtered in (False, True):
        assert tuple(q.req_views[filtered].columns) == SHOWN
    assert set(SHOWN) < {c.name for c in REQUESTS.c}


async def test_the_query_reads_the_open_requests_index(tmp_path: Path) -> None:
    path = tmp_path / "inbox.db"
    async with Runtime(SqliteStore(path)) as rt:
        await rt.run(asking("expenses"), {})
        q = rt.store._q  # type: ignore[attr-defined]
    con = sqlite3.connect(path)
    try:
        for filtered, index in ((False, "ix_requests_open"), (True, "ix_requests_open_workflow")):
            stmt = q.req_views[filtered]
            params = stmt.bind({"workflow_name": "expenses", "now": 0})
            plan = " ".join(row[-1] for row in con.execute(f"EXPLAIN QUERY PLAN {stmt.sql}",
                                                            params))
            assert f"USING INDEX {index}" in plan, plan
            assert "TEMP B-TREE" not in plan, plan  # the index gives the order: no sort
    finally:
        con.close()
