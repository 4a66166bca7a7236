"""The run's stream log over server-sent events: GET /api/runs/{run_id}/stream?after=N sends
every entry after N (id: its seq), then `end` once the run stopped running; a reconnecting
client (after=, or a browser's Last-Event-ID) misses nothing and sees nothing twice."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import orjson

from durable_flow import END, Blackboard, MemoryStore, Message, Runtime, ToolCall, WorkflowBuilder
from durable_flow.testing import ScriptedModel
from durable_flow.ui import create_app


class Trip(Blackboard):
    question: str = ""
    answer: str = ""


def forecast(city: str) -> str:
    """The forecast."""
    return f"sunny in {city}"


def trip() -> Any:
    model = ScriptedModel([
        Message.assistant("", tool_calls=[ToolCall(id="c1", name="forecast",
                                                   arguments={"city": "Oslo"})]),
        "Pack light for Oslo."], streaming=True)
    b = WorkflowBuilder("trip", Trip)
    b.add_agent("planner", model, instructions="Plan.", tools=[forecast])
    b.set_entry("planner")
    b.add_edge("planner", END)
    return b.build()


@asynccontextmanager
async def serving(store: Any) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(store)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as c:
            yield c


def events(body: str) -> list[tuple[str, str | None, dict[str, Any]]]:
    """(event, id, data) of each server-sent event; comments (pings) left out."""
    out = []
    for block in re.split(r"\r?\n\r?\n", body.strip()):
        fields = dict(line.split(": ", 1) for line in re.split(r"\r?\n", block)
                      if line and not line.startswith(":"))
        if fields:
            out.append((fields.get("event", "message"), fields.get("id"),
                        orjson.loads(fields.get("data", "null"))))
    return out


async def test_the_stream_is_sent_as_events_then_end_and_resumes_after_any_offset() -> None:
    store = MemoryStore()
    async with Runtime(store) as rt:
        run = await rt.run(trip(), {"question": "Oslo?"})
        logged = await rt.read_stream(run.run_id)
    async with serving(store) as client:
        response = await client.get(f"/api/runs/{run.run_id}/stream")
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        sent = events(response.text)
        assert sent[-1][0] == "end" and {e for e, _, _ in sent[:-1]} == {"entry"}
        entries = [data for _, _, data in sent[:-1]]
        assert [e["seq"] for e in entries] == [e.seq for e in logged]
        assert [i for _, i, _ in sent[:-1]] == [str(e.seq) for e in logged]
        assert [e["kind"] for e in entries][:2] == ["tool_started", "tool_finished"]
        text = "".join(e["data"]["text"] for e in entries if e["kind"] == "model_delta")
        assert text == "Pack light for Oslo."
        # reconnecting after the third entry: the rest, nothing twice
        later = events((await client.get(f"/api/runs/{run.run_id}/stream?after=3")).text)
        assert [d["seq"] for e, _, d in later if e == "entry"] == [e.seq for e in logged[3:]]
        # a browser's EventSource sends the last id it saw instead
        resumed = events((await client.get(f"/api/runs/{run.run_id}/stream",
                                           headers={"Last-Event-ID": "4"})).text)
        assert [d["seq"] for e, _, d in resumed if e == "entry"] == [e.seq for e in logged[4:]]
        assert (await client.get("/api/runs/nope/stream")).status_code == 404
        assert (await client.get(f"/api/runs/{run.run_id}/stream?after=-1")).status_code == 422


async def test_the_run_page_has_a_stream_section_outside_the_refreshed_part() -> None:
    store = MemoryStore()
    async with Runtime(store) as rt:
        run = await rt.run(trip(), {"question": "Oslo?"})
    async with serving(store) as client:
        page = (await client.get(f"/runs/{run.run_id}")).text
    main_end = page.index('id="stream"')
    assert page.index('id="run-main"') < main_end and 'data-run="' + run.run_id in page[main_end:]
    # after the summary, requests and decisions, before the internals (refreshed apart from it);
    # hidden until something streams (most runs never do)
    assert page.index('id="run-summary"') < main_end
    assert main_end < page.index('id="run-inside"') < page.index("Superstep timeline")
    assert re.search(r'<section id="stream" data-run="[^"]+" hidden>', page)
