"""Map: ``Send`` starts one instance of a node per item, on every store (PostgreSQL too)."""

from __future__ import annotations

import asyncio
import collections
from typing import Annotated, Any

import pytest
from mapkit import collect
from pydantic import BaseModel

from durable_flow import (
    END,
    Blackboard,
    Command,
    NodeContext,
    RetryPolicy,
    RunStatus,
    Runtime,
    Send,
    Workflow,
    WorkflowBuilder,
    add,
    append,
)


class Board(Blackboard):
    items: list[str] = []
    out: Annotated[list[str], append] = []
    total: Annotated[int, add] = 0
    winner: str = ""
    done: bool = False


def map_workflow(work: Any, *, arg_type: Any = str, max_concurrency: int | None = None,
                 then: str | None = "collect") -> Workflow:
    """split (one Send per item) -> work[i] -> collect."""
    b = WorkflowBuilder("map", state=Board)

    @b.node(goto=["work"])
    def split(state: Board) -> Command:
        return Command(goto=[Send("work", item) for item in state.items])

    b.add_node("work", work, arg_type=arg_type, max_concurrency=max_concurrency)
    b.set_entry("split")
    if then is not None:
        b.add_node("collect", lambda s: {"done": True})
        b.add_edge("work", then)
    return b.build()


async def echo(state: Board, ctx: NodeContext) -> dict[str, Any]:
    return {"out": [f"{ctx.node}={ctx.arg}"], "total": 1}


# -- instances, args and order ------------------------------------------------------------


async def test_each_send_runs_one_instance_reading_its_arg(rt: Runtime) -> None:
    r = await rt.run(map_workflow(echo), {"items": ["a", "b", "c"]})
    assert r.status is RunStatus.COMPLETED, r.error
    assert list(r.state.out) == ["work[0]=a", "work[1]=b", "work[2]=c"]
    assert r.state.total == 3 and r.state.done


async def test_updates_merge_in_send_order_whatever_order_instances_finish(rt: Runtime) -> None:
    async def slow_first(state: Board, ctx: NodeContext) -> dict[str, Any]:
        await asyncio.sleep(0.01 * (12 - int(ctx.arg)))  # the last sent finishes first
        return {"out": [ctx.arg]}

    r = await rt.run(map_workflow(slow_first), {"items": [str(i) for i in range(12)]})
    assert list(r.state.out) == [str(i) for i in range(12)]  # [2] before [10]
    history = await rt.history(r.run_id)
    assert history[1].nodes == tuple(f"work[{i}]" for i in range(12))


async def test_the_next_tasks_name_every_instance_in_instance_order(rt: Runtime) -> None:
    async def ask(state: Board, ctx: NodeContext) -> dict[str, Any]:
        ok = await ctx.request({"item": ctx.arg}, response_type=bool)
        return {"out": [f"{ctx.arg}:{ok}"]}

    r = await rt.run(map_workflow(ask), {"items": [str(i) for i in range(11)]})
    snap = await rt.get_state(r.run_id)
    assert snap.next_tasks == tuple(f"work[{i}]" for i in range(11))


async def test_arg_is_validated_into_arg_type_and_read_only(rt: Runtime) -> None:
    class Item(BaseModel):
        name: str
        size: int

    seen: list[Any] = []

    async def work(state: Board, ctx: NodeContext) -> dict[str, Any]:
        seen.append(ctx.arg)
        with pytest.raises(Exception):  # noqa: B017  (pydantic's frozen-instance error)
            ctx.arg.size = 0
        return {"total": ctx.arg.size}

    b = WorkflowBuilder("typed", state=Board)
    b.add_node("split", lambda s: Command(goto=[Send("work", {"name": "a", "size": "2"}),
                                                Send("work", {"name": "b", "size": 3})]),
               goto=["work"])
    b.add_node("work", work, arg_type=Item)
    b.set_entry("split")
    r = await rt.run(b.build(), {})
    assert r.status is RunStatus.COMPLETED, r.error
    assert r.state.total == 5
    assert all(isinstance(a, Item) for a in seen)


async def test_a_plain_task_reads_no_arg_and_sends_mix_with_plain_targets(rt: Runtime) -> None:
    args: dict[str, Any] = {}

    async def work(state: Board, ctx: NodeContext) -> dict[str, Any]:
        args[ctx.node] = ctx.arg
        return {"total": 1}

    b = WorkflowBuilder("mixed", state=Board)
    b.add_node("split", lambda s: Command(goto=["work", Send("work", "x"), "other"]),
               goto=["work", "other"])
    b.add_node("work", work)
    b.add_node("other", lambda s: {"done": True})
    b.set_entry("split")
    r = await rt.run(b.build(), {})
    assert r.status is RunStatus.COMPLETED, r.error
    assert args == {"work": None, "work[0]": "x"}
    assert r.state.total == 2 and r.state.done


async def test_sends_from_several_senders_number_instances_in_sender_order(rt: Runtime) -> None:
    b = WorkflowBuilder("two", state=Board)
    b.add_node("start", lambda s: None)
    b.add_node("b_send", lambda s: Command(goto=[Send("work", "b1"), Send("work", "b2")]),
               goto=["work"])
    b.add_node("a_send", lambda s: Command(goto=Send("work", "a1")), goto=["work"])
    b.add_node("work", echo)
    b.set_entry("start").add_edge("start", "a_send").add_edge("start", "b_send")
    r = await rt.run(b.build(), {})
    assert list(r.state.out) == ["work[0]=a1", "work[1]=b1", "work[2]=b2"]


async def test_sending_to_no_item_runs_no_instance_and_ends_the_branch(rt: Runtime) -> None:
    r = await rt.run(map_workflow(echo), {"items": []})
    assert r.status is RunStatus.COMPLETED and not r.state.done


async def test_events_and_node_histories_use_instance_paths(rt: Runtime) -> None:
    from durable_flow import Message

    async def work(state: Board, ctx: NodeContext) -> dict[str, Any]:
        ctx.remember(Message(role="assistant", content=f"saw {ctx.arg}"))
        return {}

    events = await collect(rt.stream(map_workflow(work, then=None), {"items": ["a", "b"]}))
    started = [e.node for e in events if e.kind == "node_started"]
    assert started == ["split", "work[0]", "work[1]"]
    result = events[-1].result
    assert result is not None
    snap = await rt.get_state(result.run_id)
    assert {n: [m.content for m in msgs] for n, msgs in snap.node_histories.items()} == {
        "work[0]": ["saw a"], "work[1]": ["saw b"]}


# -- failures --------------------------------------------------------------------------


async def test_a_send_to_an_undeclared_target_fails_the_run(rt: Runtime) -> None:
    b = WorkflowBuilder("bad", state=Board)
    b.add_node("split", lambda s: Command(goto=[Send("other", 1)]), goto=["work"])
    b.add_node("work", echo).add_node("other", echo)
    b.set_entry("split").add_edge("split", "other")
    r = await rt.run(b.build(), {})
    assert r.status is RunStatus.FAILED
    assert r.error is not None and r.error.type == "InvalidGotoError" and r.error.node == "split"
    assert "'other'" in r.error.message


async def test_a_send_to_end_fails_the_run_like_a_bad_goto(rt: Runtime) -> None:
    b = WorkflowBuilder("end", state=Board)
    b.add_node("split", lambda s: Command(goto=[Send(END, 1)]), goto=[END])
    b.set_entry("split")
    r = await rt.run(b.build(), {})
    assert r.error is not None and r.error.type == "InvalidGotoError"


async def test_an_arg_that_fails_arg_type_fails_the_run_naming_the_instance(rt: Runtime) -> None:
    calls = collections.Counter[str]()

    async def work(state: Board, ctx: NodeContext) -> dict[str, Any]:
        calls[ctx.node] += 1
        return {}

    r = await rt.run(map_workflow(work, arg_type=int), {"items": ["1", "2", "x"]})
    assert r.status is RunStatus.FAILED
    assert r.error is not None and r.error.type == "InvalidInputError"
    assert "'work[2]'" in r.error.message and "int" in r.error.message
    assert not calls  # no instance ran: nothing was scheduled


async def test_an_arg_that_cannot_be_stored_fails_the_sender(rt: Runtime) -> None:
    b = WorkflowBuilder("unstorable", state=Board)
    b.add_node("split", lambda s: Command(goto=[Send("work", object())]), goto=["work"])
    b.add_node("work", echo)
    b.set_entry("split")
    r = await rt.run(b.build(), {})
    assert r.error is not None and r.error.type == "SerializationError"
    assert r.error.node == "split"


async def test_two_instances_writing_one_last_write_wins_field_conflict(rt: Runtime) -> None:
    async def work(state: Board, ctx: NodeContext) -> dict[str, Any]:
        return {"winner": ctx.arg}

    r = await rt.run(map_workflow(work), {"items": ["a", "b"]})
    assert r.status is RunStatus.FAILED
    assert r.error is not None and r.error.type == "ConflictingUpdateError"
    assert "'work[0]' and 'work[1]'" in r.error.message


async def test_a_failing_instance_names_itself_and_finished_siblings_are_saved(
        rt: Runtime) -> None:
    calls = collections.Counter[str]()
    broken = {"on": True}

    async def work(state: Board, ctx: NodeContext) -> dict[str, Any]:
        calls[ctx.node] += 1
        if ctx.arg == "bad" and broken["on"]:
            raise ValueError("cannot read it")
        return {"out": [ctx.arg]}

    wf = map_workflow(work, then=None)
    r = await rt.run(wf, {"items": ["a", "bad", "c"]})
    assert r.status is RunStatus.FAILED
    assert r.error is not None and r.error.node == "work[1]" and r.error.type == "ValueError"
    broken["on"] = False
    r = await rt.resume(wf, r.run_id)
    assert r.status is RunStatus.COMPLETED and list(r.state.out) == ["a", "bad", "c"]
    assert calls == {"work[0]": 1, "work[1]": 2, "work[2]": 1}


async def test_each_instance_retries_on_its_own(rt: Runtime) -> None:
    calls = collections.Counter[str]()

    async def flaky(state: Board, ctx: NodeContext) -> dict[str, Any]:
        calls[ctx.node] += 1
        if ctx.arg == "b" and calls[ctx.node] == 1:
            raise ConnectionError("down")
        return {"out": [ctx.arg]}

    b = WorkflowBuilder("retry", state=Board)
    b.add_node("split", lambda s: Command(goto=[Send("work", x) for x in "abc"]), goto=["work"])
    b.add_node("work", flaky, retry=RetryPolicy(max_attempts=2, initial_delay=0, jitter=False))
    b.set_entry("split")
    r = await rt.run(b.build(), {})
    assert list(r.state.out) == ["a", "b", "c"]
    assert calls == {"work[0]": 1, "work[1]": 2, "work[2]": 1}


# -- concurrency and fan-in ----------------------------------------------------------------


async def test_max_concurrency_bounds_instances_running_at_once(rt: Runtime) -> None:
    running = {"now": 0, "peak": 0}

    async def work(state: Board, ctx: NodeContext) -> dict[str, Any]:
        running["now"] += 1
        running["peak"] = max(running["peak"], running["now"])
        await asyncio.sleep(0.01)
        running["now"] -= 1
        return {"total": 1}

    r = await rt.run(map_workflow(work, max_concurrency=3), {"items": list("abcdefghij")})
    assert r.state.total == 10
    assert running["peak"] == 3


async def test_a_fan_in_from_a_map_node_waits_for_every_instance(rt: Runtime) -> None:
    seen: list[int] = []

    async def work(state: Board, ctx: NodeContext) -> dict[str, Any]:
        await asyncio.sleep(0.001 * len(ctx.arg))
        return {"total": 1}

    def join(state: Board) -> dict[str, Any]:
        seen.append(state.total)
        return {"done": True}

    b = WorkflowBuilder("fanin", state=Board)
    b.add_node("start", lambda s: None)
    b.add_node("split", lambda s: Command(goto=[Send("work", "x" * i) for i in range(5)]),
               goto=["work"])
    b.add_node("side", lambda s: {"total": 100})
    b.add_node("work", work)
    b.add_node("join", join)
    b.set_entry("start").add_edge("start", "split").add_edge("start", "side")
    b.add_fan_in(["work", "side"], "join")
    r = await rt.run(b.build(), {})
    assert r.status is RunStatus.COMPLETED, r.error
    assert seen == [105]  # once, after all five instances


async def test_a_fan_in_from_instances_leaves_no_join_buffer_behind(rt: Runtime) -> None:
    b = WorkflowBuilder("fanin", state=Board)
    b.add_node("start", lambda s: None)
    b.add_node("split", lambda s: Command(goto=[Send("work", i) for i in range(3)]),
               goto=["work"])
    b.add_node("side", lambda s: {"total": 100})
    b.add_node("work", lambda s: {"total": 1})
    b.add_node("join", lambda s: None)
    b.set_entry("start").add_edge("start", "split").add_edge("start", "side")
    b.add_fan_in(["work", "side"], "join")
    r = await rt.run(b.build(), {})
    assert r.status is RunStatus.COMPLETED, r.error
    joins = [(m.superstep, dict(m.joins)) for m in reversed(await rt.store.list_checkpoints(
        r.run_id))]
    assert joins == [(0, {}), (1, {}), (2, {"join": ("side",)}), (3, {}), (4, {})]


async def test_a_fan_in_from_instances_in_a_loop_waits_for_each_round(rt: Runtime) -> None:
    seen: list[tuple[int, int]] = []

    class Rounds(Board):
        rounds: Annotated[int, add] = 0

    def join(s: Rounds) -> Command:
        seen.append((s.rounds + 1, s.total))
        return Command(update={"rounds": 1}, goto=["start"] if s.rounds == 0 else [END])

    b = WorkflowBuilder("loop", state=Rounds)
    # round 1: side and the instances in one superstep; round 2: side first, instances later
    b.add_node("start", lambda s: Command(goto=["side", "split"] if s.rounds == 0
                                          else ["side", "pre"]),
               goto=["side", "split", "pre"])
    b.add_node("pre", lambda s: None)
    b.add_edge("pre", "split")
    b.add_node("split", lambda s: Command(goto=[Send("work", i) for i in range(2)]),
               goto=["work"])
    b.add_node("side", lambda s: None)
    b.add_node("work", lambda s: {"total": 1})
    b.add_node("join", join, goto=["start", END])
    b.set_entry("start")
    b.add_fan_in(["work", "side"], "join")
    r = await rt.run(b.build(), {})
    assert r.status is RunStatus.COMPLETED, r.error
    assert seen == [(1, 2), (2, 4)]


async def test_a_map_connection_from_instances_maps_once(rt: Runtime) -> None:
    b = WorkflowBuilder("fanout", state=Board)
    b.add_node("split", lambda s: Command(goto=[Send("work", i) for i in range(3)]),
               goto=["work"])
    b.add_node("work", lambda s: {"total": 1})
    b.add_node("each", lambda s: {"total": 10})
    b.set_entry("split").add_edge("work", "each").map_connection("work", "each", "items")
    r = await rt.run(b.build(), {"items": ["x", "y"]})
    assert r.status is RunStatus.COMPLETED, r.error
    assert r.state.total == 3 + 20  # each[0], each[1]: one per item, not per instance


async def test_instances_may_send_again_and_loop(rt: Runtime) -> None:
    async def work(state: Board, ctx: NodeContext) -> Command:
        n = int(ctx.arg)
        if n == 0:
            return Command(update={"total": 1})
        return Command(update={"total": 1}, goto=[Send("work", str(n - 1))])

    b = WorkflowBuilder("loop", state=Board)
    b.add_node("split", lambda s: Command(goto=[Send("work", "2"), Send("work", "1")]),
               goto=["work"])
    b.add_node("work", work, goto=["work"])
    b.set_entry("split")
    r = await rt.run(b.build(), {})
    assert r.status is RunStatus.COMPLETED, r.error
    assert r.state.total == 5  # 2,1 / 1,0 / 0
    assert [h.nodes for h in reversed(await rt.history(r.run_id))][1:] == [
        ("split",), ("work[0]", "work[1]"), ("work[0]", "work[1]"), ("work[0]",)]
