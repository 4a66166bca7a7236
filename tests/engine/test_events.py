"""The event stream: nested events, failures, cancellation and checkpoints, on every store."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from durable_flow import (
    END,
    Blackboard,
    Event,
    RunStatus,
    Runtime,
    Workflow,
    WorkflowBuilder,
    append,
)


class Board(Blackboard):
    topic: str = ""
    draft: str = ""
    log: Annotated[list[str], append] = []


def step(name: str) -> Any:
    def fn(state: Board) -> dict[str, Any]:
        return {"log": [name]}

    fn.__name__ = name
    return fn


async def collect(events: Any) -> list[Event]:
    return [e async for e in events]


# -- sub-workflow events reach the parent's stream -----------------------------------------


def nested_workflow() -> Workflow:
    """publish: write -> review(prepare -> legal(x -> y))."""
    legal = WorkflowBuilder("legal", state=Board)
    legal.add_node("x", step("x")).add_node("y", step("y"))
    legal.set_entry("x").add_edge("x", "y").add_edge("y", END)
    review = WorkflowBuilder("review", state=Board)
    review.add_node("prepare", step("prepare"))
    review.add_subworkflow("legal", legal.build(), inputs=["draft"], outputs=["log"])
    review.set_entry("prepare").add_edge("prepare", "legal").add_edge("legal", END)
    top = WorkflowBuilder("publish", state=Board)
    top.add_node("write", lambda s: {"draft": "d1", "log": ["write"]})
    top.add_subworkflow("review", review.build(), inputs=["draft"], outputs=["log"])
    top.set_entry("write").add_edge("write", "review").add_edge("review", END)
    return top.build()


async def test_inner_events_are_forwarded_with_namespace_and_qualified_node(rt: Runtime) -> None:
    events = await collect(rt.stream(nested_workflow(), {}, run_id="nested"))
    assert events[-1].kind == "run_completed"
    assert events[-1].result is not None and events[-1].result.status is RunStatus.COMPLETED
    assert {e.run_id for e in events} == {"nested"}

    def started(namespace: str) -> list[str | None]:
        return [e.node for e in events if e.kind == "node_started" and e.namespace == namespace]

    assert started("") == ["write", "review"]
    assert started("review") == ["review.prepare", "review.legal"]
    assert started("review.legal") == ["review.legal.x", "review.legal.y"]
    completed = [(e.namespace, e.node) for e in events if e.kind == "node_completed"]
    assert ("review.legal", "review.legal.x") in completed
    assert ("review.legal", "review.legal.y") in completed
    # inner supersteps and checkpoints carry the inner namespace and the inner superstep
    inner_steps = [e.superstep for e in events
                   if e.kind == "superstep_started" and e.namespace == "review.legal"]
    assert inner_steps == [1, 2]
    inner_saved = [e for e in events
                   if e.kind == "checkpoint_saved" and e.namespace == "review.legal"]
    history = await rt.history("nested", namespace="review.legal")
    assert [e.data["checkpoint_id"] for e in inner_saved] == [
        c.id for c in reversed(history) if c.superstep > 0]
    # the inner events come while the parent's sub-workflow node runs, in order
    kinds = [(e.kind, e.node) for e in events]
    assert kinds.index(("node_started", "review.legal")) < kinds.index(
        ("node_started", "review.legal.x")) < kinds.index(("node_completed", "review.legal.y")) \
        < kinds.index(("node_completed", "review.legal")) < kinds.index(
        ("node_completed", "review"))
    # the result events belong to the top level only
    assert [e.namespace for e in events if e.result is not None] == [""]
    assert all(e.namespace == "" for e in events if e.kind.startswith("run_"))


# -- a failing node ------------------------------------------------------------------------


def failing_workflow() -> Workflow:
    b = WorkflowBuilder("failing", state=Board)

    def boom(state: Board) -> None:
        raise ValueError("no tide today")

    b.add_node("start", step("start")).add_node("boom", boom)
    b.set_entry("start").add_edge("start", "boom").add_edge("boom", END)
    return b.build()


async def test_a_failing_node_emits_node_failed_then_run_failed(rt: Runtime) -> None:
    events = await collect(rt.stream(failing_workflow(), {}, run_id="fails"))
    failed = [e for e in events if e.kind == "node_failed"]
    assert len(failed) == 1
    [nf] = failed
    assert (nf.namespace, nf.node, nf.superstep, nf.run_id) == ("", "boom", 2, "fails")
    assert nf.data["error"] == "ValueError: no tide today"
    assert nf.result is None
    last = events[-1]
    assert last.kind == "run_failed" and last is not nf
    assert [e.kind for e in events].count("run_failed") == 1
    assert events.index(nf) < len(events) - 1
    assert last.namespace == "" and last.node is None
    result = last.result
    assert result is not None and result.status is RunStatus.FAILED
    assert last.data["status"] == "failed"
    assert result.error is not None
    assert (result.error.type, result.error.message, result.error.node) == (
        "ValueError", "no tide today", "boom")
    assert result.state.log == ["start"]  # type: ignore[attr-defined]
    assert not any(e.kind == "node_completed" and e.node == "boom" for e in events)
    assert (await rt.get_run("fails")).status is RunStatus.FAILED


# -- cancelling a running run ------------------------------------------------------------


def blocking_workflow(started: asyncio.Event) -> Workflow:
    b = WorkflowBuilder("blocking", state=Board)

    async def stuck(state: Board) -> dict[str, Any]:
        started.set()
        await asyncio.sleep(60)
        return {"log": ["stuck"]}

    b.add_node("start", step("start")).add_node("stuck", stuck)
    b.set_entry("start").add_edge("start", "stuck").add_edge("stuck", END)
    return b.build()


async def test_cancel_emits_run_cancelled_and_keeps_the_last_checkpoint(rt: Runtime) -> None:
    started = asyncio.Event()
    wf = blocking_workflow(started)
    streaming = asyncio.create_task(collect(rt.stream(wf, {"topic": "t"}, run_id="doomed")))
    await asyncio.wait_for(started.wait(), 10)
    history_before = await rt.history("doomed")
    head_before = (await rt.get_run("doomed")).head_checkpoint_id
    state_before = await rt.get_state("doomed")
    assert head_before == history_before[0].id and history_before[0].superstep == 1

    info = await asyncio.wait_for(rt.cancel("doomed"), 10)
    assert info.status is RunStatus.CANCELLED
    events = await asyncio.wait_for(streaming, 10)

    last = events[-1]
    assert last.kind == "run_cancelled" and last.namespace == "" and last.run_id == "doomed"
    assert [e.kind for e in events].count("run_cancelled") == 1
    assert last.result is not None and last.result.status is RunStatus.CANCELLED
    assert last.data["status"] == "cancelled"
    assert last.result.checkpoint_id == head_before
    assert last.result.state.log == ["start"]  # type: ignore[attr-defined]
    assert not any(e.kind in ("node_completed", "node_failed") and e.node == "stuck"
                   for e in events)
    # nothing new was written and nothing was changed
    assert await rt.history("doomed") == history_before
    assert (await rt.get_run("doomed")).head_checkpoint_id == head_before
    after = await rt.get_state("doomed")
    assert (after.checkpoint_id, after.values) == (state_before.checkpoint_id, state_before.values)
    assert after.next_tasks == state_before.next_tasks == ("stuck",)


# -- one checkpoint_saved per superstep ------------------------------------------------------


def chain_with_fan_out() -> Workflow:
    """a -> (b, c) -> d: three supersteps, the second runs two nodes."""
    b = WorkflowBuilder("fan", state=Board)
    for name in "abcd":
        b.add_node(name, step(name))
    b.set_entry("a").add_edge("a", "b").add_edge("a", "c")
    b.add_fan_in(["b", "c"], "d")
    b.add_edge("d", END)
    return b.build()


async def test_checkpoint_saved_once_per_superstep_matching_history(rt: Runtime) -> None:
    events = await collect(rt.stream(chain_with_fan_out(), {}, run_id="fan"))
    result = events[-1].result
    assert result is not None and result.status is RunStatus.COMPLETED
    saved = [e for e in events if e.kind == "checkpoint_saved"]
    assert [e.superstep for e in saved] == [1, 2, 3]
    assert all(e.namespace == "" and e.node is None and e.run_id == "fan" for e in saved)
    assert [sorted(e.data["nodes"]) for e in saved] == [["a"], ["b", "c"], ["d"]]
    history = await rt.history("fan")  # newest first; the input checkpoint is superstep 0
    assert [c.superstep for c in history] == [3, 2, 1, 0]
    assert [e.data["checkpoint_id"] for e in saved] == [c.id for c in reversed(history[:-1])]
    assert saved[-1].data["checkpoint_id"] == result.checkpoint_id
    # each checkpoint is saved after its superstep's nodes and before the next superstep
    kinds = [e.kind for e in events]
    for e in saved:
        i = events.index(e)
        assert kinds[i - 1] == "node_completed"
        assert i + 1 == len(events) - 1 or kinds[i + 1] == "superstep_started"
