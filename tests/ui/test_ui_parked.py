"""Parked tasks (``waits="branch"``) in the web app: the run page, the graph, the API, the inbox."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import uikit

from durable_flow import MemoryStore, RunStatus, Runtime
from durable_flow.ui._views import marked_mermaid
from ui.test_ui_app import answer_form, serving, start


def chart_id(workflow: Any, node: str) -> str:
    return f"n{list(workflow.nodes).index(node)}"


def test_the_graph_marks_parked_nodes_apart_from_the_current_ones() -> None:
    wf = uikit.research
    chart = marked_mermaid(wf, ["check", "approve"], ["approve"])
    approve, check = chart_id(wf, "approve"), chart_id(wf, "check")
    assert f"    class {approve} parked" in chart.splitlines()
    assert f"    class {check} current" in chart.splitlines()
    assert f"class {approve} current" not in chart  # parked wins over current
    assert re.search(r"classDef parked .*stroke-dasharray", chart)
    assert "classDef parked" not in marked_mermaid(wf, ["check"])


async def test_the_run_page_lists_parked_tasks_and_marks_them_on_the_graph(
        store_factory: Callable[[], Any]) -> None:
    run = await start(store_factory, uikit.research, {"topic": "roofs"})
    assert run.status is RunStatus.WAITING
    [request] = run.pending_requests
    async with serving(store_factory(), workflows=[uikit.research]) as client:
        html = (await client.get(f"/runs/{run.run_id}")).text
    section = html.split('id="parked"', 1)[1].split("</div>", 1)[0]
    row = section.split('data-node="approve"', 1)[1].split("</tr>", 1)[0]
    assert "superstep #2" in row and "request" in row and request.id in row
    assert f"class {chart_id(uikit.research, 'approve')} parked" in html
    timeline = html.split('class="timeline"', 1)[1].split("</ol>", 1)[0]
    assert timeline.count('parked: <span class="mono chip parked">approve</span>') >= 1


async def test_the_api_snapshot_carries_the_parked_tasks(
        store_factory: Callable[[], Any]) -> None:
    run = await start(store_factory, uikit.research, {"topic": "roofs"})
    [request] = run.pending_requests
    async with serving(store_factory()) as client:
        head = (await client.get(f"/api/runs/{run.run_id}")).json()["head_checkpoint_id"]
        snap = (await client.get(f"/api/runs/{run.run_id}/checkpoints/{head}")).json()
    assert snap["parked"] == [{"node": "approve", "kind": "request", "waits_for": [request.id],
                               "since_superstep": 2, "wake_at": None, "events": []}]
    assert sorted(snap["values"]["notes"]) == ["checked", "market"]
    async with serving(store_factory()) as client:
        history = (await client.get(f"/api/runs/{run.run_id}/history")).json()["checkpoints"]
    assert history[0]["id"] == head and history[0]["parked"] == ["approve"]
    assert history[-1]["parked"] == []


@pytest.fixture
def gate() -> Iterator[asyncio.Event]:
    uikit.research_gate = asyncio.Event()
    yield uikit.research_gate
    uikit.research_gate = None


async def test_the_inbox_shows_a_parked_request_of_a_running_run_and_takes_its_answer(
        gate: asyncio.Event) -> None:
    store = MemoryStore()
    async with Runtime(store) as rt:
        running = asyncio.create_task(rt.run(uikit.research, {"topic": "roofs"}))
        while not (asked := await rt.pending_requests()):
            assert not running.done(), running.result()
            await asyncio.sleep(0.01)
        [request] = asked
        assert (await rt.get_run(request.run_id)).status is RunStatus.RUNNING
        async with serving(store) as client:
            inbox = (await client.get("/")).text
            card = inbox.split(request.run_id, 1)[1].split("</header>", 1)[0]
            assert "run running" in card and "s-running" in card
            answered = await answer_form(client, request.run_id, request.id, {"answer": "true"})
            assert answered.status_code == 200 and "Approved." in answered.text
            assert "The run takes your answer at its next step." in answered.text
        gate.set()  # the research ends; the executor takes the answer at its barrier
        result = await asyncio.wait_for(running, 30)
    assert result.status is RunStatus.COMPLETED, result.error
    assert result.state.approved and result.state.notes[-1] == "report"
