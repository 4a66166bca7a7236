"""The stream log on every store: appends numbered per run, reads after an offset, in pages."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from durable_flow import END, Blackboard, Budget, RunStatus, Runtime, WorkflowBuilder
from durable_flow.model._serde import encode
from durable_flow.testing import ScriptedModel

from .builders import start_run

WHEN = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def entry(text: str, epoch: int = 1) -> dict[str, Any]:
    return {"epoch": epoch, "namespace": "", "node": "agent", "superstep": 1,
            "kind": "model_delta", "data": encode({"text": text}), "ts": WHEN}


async def test_appends_are_numbered_per_run_and_read_after_an_offset(store: Any) -> None:
    a, b = "run-a", "run-b"
    await start_run(store, a)
    await start_run(store, b)
    assert await store.append_stream(a, [entry("x"), entry("y")]) == 2
    assert await store.append_stream(b, [entry("other")]) == 1
    assert await store.append_stream(a, [entry("z", epoch=2)]) == 3
    rows = await store.read_stream(a, 0)
    assert [(r["seq"], r["epoch"], r["data"]) for r in rows] == [
        (1, 1, encode({"text": "x"})), (2, 1, encode({"text": "y"})), (3, 2, encode({"text": "z"}))]
    assert rows[0]["ts"] == WHEN and rows[0]["node"] == "agent" and rows[0]["run_id"] == a
    assert [r["seq"] for r in await store.read_stream(a, 1)] == [2, 3]
    assert [r["seq"] for r in await store.read_stream(a, 1, 1)] == [2]
    assert await store.read_stream(a, 3) == []
    assert await store.read_stream("nobody", 0) == []


# -- retention: prune trims the stream log with the checkpoints; cancel keeps it --------------

class Two(Blackboard):
    question: str = ""
    draft: str = ""
    answer: str = ""


def two_agents(model: ScriptedModel) -> Any:
    b = WorkflowBuilder("two", Two)
    b.add_agent("writer", model, instructions="Draft.", output_key="draft")
    b.add_agent("editor", model, instructions="Edit.", input_key="draft")
    b.set_entry("writer")
    b.add_edge("writer", "editor")
    b.add_edge("editor", END)
    return b.build()


async def texts(rt: Runtime, run_id: str) -> list[tuple[int, str, str]]:
    return [(e.seq, e.node, e.data["text"]) for e in await rt.read_stream(run_id)]


async def test_prune_removes_the_stream_of_supersteps_whose_checkpoint_went(store: Any) -> None:
    model = ScriptedModel(["first draft", "final text", "other run"], streaming=True)
    async with Runtime(store) as rt:
        run = await rt.run(two_agents(model), {"question": "q"})
        other = await rt.run(workflow_of_one(model), {"question": "q"})
        assert [node for _, node, _ in await texts(rt, run.run_id)] == ["writer"] * 2 + ["editor"] * 2
        kept = await texts(rt, other.run_id)
        # keep the last two checkpoints: the editor's superstep started from the older one
        assert await rt.prune(run.run_id, keep_last=2) == 1
        assert await texts(rt, run.run_id) == [(3, "editor", "final"), (4, "editor", " text")]
        # down to the head: the run is finished, no superstep follows from it; the last
        # entry stays, so the numbering of a later reader goes on after it
        assert await rt.prune(run.run_id, keep_last=1) == 1
        assert await texts(rt, run.run_id) == [(4, "editor", " text")]
        assert await texts(rt, other.run_id) == kept  # another run's log is not touched


async def test_a_prune_that_removes_no_checkpoint_of_a_run_keeps_its_stream(store: Any) -> None:
    model = ScriptedModel(["one two"], streaming=True)
    async with Runtime(store) as rt:
        run = await rt.run(workflow_of_one(model), {"question": "q"})
        before = await texts(rt, run.run_id)
        assert await rt.prune(run.run_id, keep_last=5) == 0
        assert await texts(rt, run.run_id) == before == [(1, "solo", "one"), (2, "solo", " two")]


async def test_cancelling_a_run_keeps_its_rows_and_its_stream(store: Any) -> None:
    model = ScriptedModel(["thinking hard", "never"], streaming=True)
    async with Runtime(store) as rt:
        run = await rt.run(two_agents(model), {"question": "q"}, budget=Budget(max_tokens=1))
        assert run.status is RunStatus.WAITING  # the editor asks at the budget
        before = await texts(rt, run.run_id)
        assert before == [(1, "writer", "thinking"), (2, "writer", " hard")]
        await rt.cancel(run.run_id)
        assert await texts(rt, run.run_id) == before
        assert (await rt.get_run(run.run_id)).status is RunStatus.CANCELLED


def workflow_of_one(model: ScriptedModel) -> Any:
    b = WorkflowBuilder("one", Two)
    b.add_agent("solo", model, instructions="Answer.")
    b.set_entry("solo")
    b.add_edge("solo", END)
    return b.build()
