"""The superstep engine: routing, joins, skips, loops, commands, merges, failures, retries."""

from __future__ import annotations

import asyncio
import collections
import itertools
from collections.abc import Callable
from typing import Annotated, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durable_flow import (
    END,
    Blackboard,
    CheckpointNotFoundError,
    Command,
    ConflictingUpdateError,
    Event,
    InvalidInputError,
    MemoryStore,
    Message,
    NodeContext,
    RetryPolicy,
    RunFailedError,
    RunNotFoundError,
    RunNotResumableError,
    RunResult,
    RunStatus,
    Runtime,
    Workflow,
    WorkflowBuilder,
    WorkflowMismatchError,
    add,
    append,
    merge,
)

NO_WAIT = {"initial_delay": 0.0, "jitter": False}


class Flow(Blackboard):
    topic: str = ""
    x: int = 0
    title: str = ""
    count: Annotated[int, add] = 0
    log: Annotated[list[str], append] = []
    flags: Annotated[dict[str, bool], merge] = {}


def logs(name: str, calls: collections.Counter[str] | None = None) -> Callable[[Flow], dict[str, Any]]:
    """A node that appends its own name to ``log`` (and counts its calls)."""

    def node(state: Flow) -> dict[str, Any]:
        if calls is not None:
            calls[name] += 1
        return {"log": [name]}

    return node


def builder(*nodes: str, calls: collections.Counter[str] | None = None,
            **options: dict[str, Any]) -> WorkflowBuilder:
    b = WorkflowBuilder("flow", state=Flow)
    for n in nodes:
        b.add_node(n, logs(n, calls), **options.get(n, {}))
    return b


def steps(history: list[Any]) -> list[tuple[int, tuple[str, ...]]]:
    return [(cp.superstep, cp.nodes) for cp in reversed(history)]


# routing ---------------------------------------------------------------------------------


async def test_every_edge_whose_condition_holds_fires(rt: Runtime) -> None:
    b = builder("start", "a", "b", "c", "never")
    b.set_entry("start")
    for n in ("a", "b"):
        b.add_edge("start", n)
    b.add_edge("start", "c", when="x > 1")
    b.add_edge("start", "never", when=lambda s: s.x > 100)
    for n in ("a", "b", "c", "never"):
        b.add_edge(n, END)
    result = await rt.run(b.build(), {"x": 5})
    assert result.status is RunStatus.COMPLETED
    assert result.state.log == ["start", "a", "b", "c"]
    history = await rt.history(result.run_id)
    assert steps(history) == [(0, ()), (1, ("start",)), (2, ("a", "b", "c"))]
    assert history[1].routing_reason == "start: x > 1 -> c"


@pytest.mark.parametrize(("x", "taken"), [(10, "big"), (3, "mid"), (0, "small")])
async def test_switch_takes_the_first_match_or_the_default(rt: Runtime, x: int, taken: str) -> None:
    b = builder("start", "big", "mid", "small")
    b.set_entry("start")
    b.add_switch("start", [("x > 5", "big"), ("x > 1", "mid")], default="small")
    for n in ("big", "mid", "small"):
        b.add_edge(n, END)
    result = await rt.run(b.build(), {"x": x})
    assert result.state.log == ["start", taken]
    reason = (await rt.history(result.run_id))[1].routing_reason
    assert reason == {"big": "start: x > 5 -> big", "mid": "start: x > 1 -> mid",
                      "small": "start: default -> small"}[taken]


async def test_route_by_type_is_a_switch_on_matched_type(rt: Runtime) -> None:
    class Routed(Blackboard):
        matched_type: str = ""
        log: Annotated[list[str], append] = []

    class MathRoute:
        pass

    b = WorkflowBuilder("types", state=Routed)
    b.add_node("classify", lambda s: {"matched_type": "MathRoute"})
    b.add_node("math", lambda s: {"log": ["math"]}).add_node("other", lambda s: {"log": ["other"]})
    b.set_entry("classify")
    b.route_by_type("classify", {MathRoute: "math", "Poem": "other"}, default="other")
    b.add_edge("math", END).add_edge("other", END)
    result = await rt.run(b.build(), {})
    assert result.state.log == ["math"]


async def test_fan_in_waits_for_every_source_and_its_buffer_is_checkpointed(
    rt: Runtime, store: Any, store_factory: Callable[[], Any]
) -> None:
    calls: collections.Counter[str] = collections.Counter()
    b = builder("start", "fast", "slow1", "join", calls=calls)

    async def slow2(state: Flow, ctx: NodeContext) -> dict[str, Any]:
        calls["slow2"] += 1
        await ctx.request("go on?", response_type=bool)
        return {"log": ["slow2"]}

    b.add_node("slow2", slow2)
    b.set_entry("start")
    b.add_edge("start", "fast").add_edge("start", "slow1").add_edge("slow1", "slow2")
    b.add_fan_in(["fast", "slow2"], "join")
    b.add_edge("join", END)
    wf = b.build()
    first = await rt.run(wf, {})
    assert first.status is RunStatus.WAITING
    history = await rt.history(first.run_id)
    assert steps(history) == [(0, ()), (1, ("start",)), (2, ("fast", "slow1"))]
    # between supersteps: 'fast' is in the join buffer and the join is not due yet
    snap = await rt.get_state(first.run_id, history[0].id)
    assert snap.next_tasks == ("slow2",)
    meta = await store.get_checkpoint(first.run_id, history[0].id)
    assert meta.joins == {"join": ("fast",)}
    # a fresh runtime on a fresh store object reads the buffer back and fires the join once
    async with Runtime(store_factory()) as rt2:
        done = await rt2.resume(wf, first.run_id,
                                responses={first.pending_requests[0].id: True})
        history = await rt2.history(first.run_id)
    assert done.status is RunStatus.COMPLETED
    assert done.state.log == ["start", "fast", "slow1", "slow2", "join"]
    assert steps(history)[3:] == [(3, ("slow2",)), (4, ("join",))]
    assert (await store.get_checkpoint(first.run_id, history[1].id)).joins == {}
    assert calls == {"start": 1, "fast": 1, "slow1": 1, "slow2": 2, "join": 1}


async def test_skipped_node_passes_control_on_and_counts_for_joins(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    b = builder("start", "a", "after_opt", "join", calls=calls)
    b.add_node("opt", logs("opt", calls), skip_if="flags.skip_opt")
    b.set_entry("start")
    b.add_edge("start", "a").add_edge("start", "opt").add_edge("opt", "after_opt")
    b.add_fan_in(["a", "opt"], "join")
    b.add_edge("join", END).add_edge("after_opt", END)
    wf = b.build()
    result = await rt.run(wf, {"flags": {"skip_opt": True}})
    assert result.status is RunStatus.COMPLETED
    assert calls["opt"] == 0
    assert result.state.log == ["start", "a", "after_opt", "join"]
    history = await rt.history(result.run_id)
    assert steps(history) == [(0, ()), (1, ("start",)), (2, ("a", "after_opt")), (3, ("join",))]
    assert "skipped opt" in (history[2].routing_reason or "")
    # not skipped: opt runs and the join waits for it
    result = await rt.run(wf, {"flags": {"skip_opt": False}})
    assert result.state.log == ["start", "a", "opt", "after_opt", "join"]


async def test_a_skipped_entry_starts_past_it(rt: Runtime) -> None:
    b = builder("first", "second")
    b.add_node("gate", logs("gate"), skip_if=lambda s: s.x == 0)
    b.set_entry("gate").add_edge("gate", "first").add_edge("first", "second")
    b.add_edge("second", END)
    result = await rt.run(b.build(), {"x": 0})
    assert result.state.log == ["first", "second"]


async def test_loop_stops_at_max_supersteps_with_superstep_limit_error(rt: Runtime) -> None:
    b = WorkflowBuilder("spin", state=Flow)
    b.add_node("tick", lambda s: {"count": 1})
    b.set_entry("tick")
    b.add_edge("tick", "tick", when="count < 1000")
    b.add_edge("tick", END, when="count >= 1000")
    wf = b.build()
    result = await rt.run(wf, {}, max_supersteps=5)
    assert result.status is RunStatus.FAILED
    assert result.error is not None and result.error.type == "SuperstepLimitError"
    assert "max_supersteps=5" in result.error.message
    assert result.state.count == 5
    assert [cp.superstep for cp in await rt.history(result.run_id)] == [5, 4, 3, 2, 1, 0]
    with pytest.raises(RunFailedError, match="SuperstepLimitError"):
        result.raise_for_status()
    # the default limit is the workflow's (100)
    result = await rt.run(wf, {"count": 990})
    assert result.status is RunStatus.COMPLETED and result.state.count == 1000


async def test_command_routes_updates_and_keeps_its_reason(rt: Runtime) -> None:
    b = builder("left", "right")

    def decide(state: Flow) -> Command:
        target = "right" if state.x > 0 else "left"
        return Command(update={"title": "decided"}, goto=target, reason=f"x is {state.x}")

    b.add_node("decide", decide, goto=["left", "right"])
    b.set_entry("decide").add_edge("decide", "left")  # the goto replaces the edges
    b.add_edge("left", END).add_edge("right", END)
    result = await rt.run(b.build(), {"x": 3})
    assert result.status is RunStatus.COMPLETED
    assert result.state.title == "decided" and result.state.log == ["right"]
    history = await rt.history(result.run_id)
    assert history[1].nodes == ("decide",)
    assert history[1].routing_reason == "x is 3"  # Command(reason=...) kept verbatim


async def test_command_goto_list_and_end(rt: Runtime) -> None:
    b = builder("a", "b")
    b.add_node("fork", lambda s: Command(goto=["a", "b"]) if s.x else Command(goto=END),
               goto=["a", "b"])
    b.set_entry("fork").add_edge("fork", "a").add_edge("a", END).add_edge("b", END)
    assert (await rt.run(b.build(), {"x": 1})).state.log == ["a", "b"]
    ended = await rt.run(b.build(), {"x": 0})
    assert ended.status is RunStatus.COMPLETED and ended.state.log == []


async def test_goto_to_an_undeclared_target_fails_the_run(rt: Runtime) -> None:
    b = builder("a", "b")
    b.add_node("rogue", lambda s: Command(goto="b"), goto=["a"])
    b.set_entry("rogue").add_edge("rogue", "a").add_edge("a", "b").add_edge("b", END)
    result = await rt.run(b.build(), {})
    assert result.status is RunStatus.FAILED
    assert result.error is not None
    assert result.error.type == "InvalidGotoError" and result.error.node == "rogue"
    assert "'b'" in result.error.message
    assert result.state.log == []


async def test_reaching_an_exit_ends_the_run(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    b = builder("start", "stop", "long1", "long2", "after_stop", calls=calls)
    b.set_entry("start").add_edge("start", "stop").add_edge("start", "long1")
    b.add_edge("long1", "long2").add_edge("long2", END)
    b.add_edge("stop", "after_stop").add_edge("after_stop", END)
    b.set_exit("stop")
    result = await rt.run(b.build(), {})
    assert result.status is RunStatus.COMPLETED
    assert result.state.log == ["start", "long1", "stop"]
    assert calls["long2"] == 0 and calls["after_stop"] == 0
    snap = await rt.get_state(result.run_id)
    assert snap.next_tasks == () and snap.status is RunStatus.COMPLETED


# merging ---------------------------------------------------------------------------------


async def test_two_writes_to_a_last_write_wins_field_conflict(rt: Runtime) -> None:
    b = WorkflowBuilder("clash", state=Flow)
    b.add_node("start", lambda s: None)
    b.add_node("beta", lambda s: {"title": "b", "count": 1})
    b.add_node("alpha", lambda s: {"title": "a", "count": 1})
    b.set_entry("start").add_edge("start", "alpha").add_edge("start", "beta")
    b.add_edge("alpha", END).add_edge("beta", END)
    result = await rt.run(b.build(), {"title": "orig"})
    assert result.status is RunStatus.FAILED
    err = result.error
    assert err is not None and err.type == "ConflictingUpdateError"
    assert "'alpha'" in err.message and "'beta'" in err.message and "'title'" in err.message
    assert result.state.title == "orig" and result.state.count == 0
    exc = ConflictingUpdateError("title", ["alpha", "beta"])
    assert exc.field == "title" and exc.nodes == ("alpha", "beta")


async def test_merge_order_is_by_node_id_not_finish_time(rt: Runtime) -> None:
    b = WorkflowBuilder("order", state=Flow)

    def slow_writer(name: str, delay: float) -> Any:
        async def node(state: Flow) -> dict[str, Any]:
            await asyncio.sleep(delay)
            return {"log": [name], "messages": [Message.assistant(name)],
                    "flags": {"last": name == "c_fast"}}
        return node

    b.add_node("start", lambda s: None)
    for name, delay in (("a_slow", 0.05), ("b_mid", 0.02), ("c_fast", 0.0)):
        b.add_node(name, slow_writer(name, delay))
        b.add_edge("start", name).add_edge(name, END)
    b.set_entry("start")
    result = await rt.run(b.build(), {})
    assert result.state.log == ["a_slow", "b_mid", "c_fast"]
    assert [m.content for m in result.state.messages] == ["a_slow", "b_mid", "c_fast"]
    assert result.state.flags == {"last": True}


# failures, retries, timeouts ---------------------------------------------------------------


async def test_node_failure_fails_the_run_with_error_info(rt: Runtime) -> None:
    b = builder("start")

    def explode(state: Flow) -> None:
        raise ValueError("boom at the bridge")

    b.add_node("explode", explode)
    b.set_entry("start").add_edge("start", "explode").add_edge("explode", END)
    result = await rt.run(b.build(), {})
    assert result.status is RunStatus.FAILED
    err = result.error
    assert err is not None
    assert (err.type, err.message, err.node) == ("ValueError", "boom at the bridge", "explode")
    assert err.traceback is not None and "in explode" in err.traceback
    assert result.state.log == ["start"]
    with pytest.raises(RunFailedError) as info:
        result.raise_for_status()
    assert info.value.node == "explode" and info.value.error_type == "ValueError"
    assert "boom at the bridge" in str(info.value)
    runs = await rt.list_runs(status=RunStatus.FAILED)
    assert [r.run_id for r in runs] == [result.run_id] and runs[0].error == err
    snap = await rt.get_state(result.run_id)
    assert snap.status is RunStatus.FAILED and snap.error == err
    assert snap.next_tasks == ("explode",)


async def test_raise_for_status_returns_the_result_when_not_failed(rt: Runtime) -> None:
    b = builder("a")
    b.set_entry("a").add_edge("a", END)
    result = await rt.run(b.build(), {})
    assert result.raise_for_status() is result


async def test_retry_policy_retries_and_emits_node_retrying(rt: Runtime) -> None:
    attempts: list[int] = []

    async def flaky(state: Flow) -> dict[str, Any]:
        attempts.append(len(attempts) + 1)
        if len(attempts) < 3:
            raise ConnectionError(f"try {len(attempts)}")
        return {"count": len(attempts)}

    b = WorkflowBuilder("retry", state=Flow)
    b.add_node("flaky", flaky, retry=RetryPolicy(max_attempts=3, **NO_WAIT))
    b.set_entry("flaky").add_edge("flaky", END)
    events = [e async for e in rt.stream(b.build(), {})]
    result = events[-1].result
    assert result is not None and result.status is RunStatus.COMPLETED
    assert attempts == [1, 2, 3] and result.state.count == 3
    retrying = [e for e in events if e.kind == "node_retrying"]
    assert [e.data["attempt"] for e in retrying] == [1, 2]
    assert all(e.node == "flaky" and e.data["delay"] == 0 for e in retrying)
    assert retrying[0].data["error"] == "ConnectionError: try 1"


async def test_retry_gives_up_after_max_attempts(rt: Runtime) -> None:
    attempts: list[int] = []

    def always(state: Flow) -> None:
        attempts.append(1)
        raise ConnectionError("down")

    b = WorkflowBuilder("retry", state=Flow)
    b.add_node("always", always, retry=RetryPolicy(max_attempts=4, **NO_WAIT))
    b.set_entry("always").add_edge("always", END)
    result = await rt.run(b.build(), {})
    assert len(attempts) == 4
    assert result.status is RunStatus.FAILED and result.error is not None
    assert result.error.type == "ConnectionError"


async def test_retry_on_filters_which_errors_are_retried(rt: Runtime) -> None:
    attempts: collections.Counter[str] = collections.Counter()

    def wrong_kind(state: Flow) -> None:
        attempts["wrong_kind"] += 1
        raise KeyError("not retried")

    b = WorkflowBuilder("retry", state=Flow)
    b.add_node("wrong_kind", wrong_kind,
               retry=RetryPolicy(max_attempts=5, retry_on=(ConnectionError,), **NO_WAIT))
    b.set_entry("wrong_kind").add_edge("wrong_kind", END)
    result = await rt.run(b.build(), {})
    assert attempts["wrong_kind"] == 1
    assert result.error is not None and result.error.type == "KeyError"


async def test_timeout_raises_timeout_error_in_the_task(rt: Runtime) -> None:
    cancelled: list[bool] = []

    async def sleepy(state: Flow) -> None:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    b = WorkflowBuilder("slow", state=Flow)
    b.add_node("sleepy", sleepy, timeout=0.05)
    b.set_entry("sleepy").add_edge("sleepy", END)
    result = await rt.run(b.build(), {})
    assert result.status is RunStatus.FAILED
    assert result.error is not None
    assert result.error.type == "TimeoutError" and result.error.node == "sleepy"
    assert cancelled == [True]


async def test_timeout_is_retried_when_the_policy_covers_it(rt: Runtime) -> None:
    attempts: list[int] = []

    async def first_slow(state: Flow) -> dict[str, Any]:
        attempts.append(1)
        if len(attempts) == 1:
            await asyncio.sleep(5)
        return {"count": len(attempts)}

    b = WorkflowBuilder("slow", state=Flow)
    b.add_node("first_slow", first_slow, timeout=0.05,
               retry=RetryPolicy(max_attempts=2, retry_on=(TimeoutError,), **NO_WAIT))
    b.set_entry("first_slow").add_edge("first_slow", END)
    result = await rt.run(b.build(), {})
    assert result.status is RunStatus.COMPLETED and result.state.count == 2


async def test_resume_after_a_fix_reruns_only_the_failed_task(
    rt: Runtime, store_factory: Callable[[], Any]
) -> None:
    calls: collections.Counter[str] = collections.Counter()
    broken = {"bad": True}
    b = builder("start", "good", "after", calls=calls)

    def bad(state: Flow) -> dict[str, Any]:
        calls["bad"] += 1
        if broken["bad"]:
            raise RuntimeError("bug")
        return {"log": ["bad"]}

    b.add_node("bad", bad)
    b.set_entry("start").add_edge("start", "good").add_edge("start", "bad")
    b.add_fan_in(["good", "bad"], "after")
    b.add_edge("after", END)
    wf = b.build()
    failed = await rt.run(wf, {})
    assert failed.status is RunStatus.FAILED
    assert calls == {"start": 1, "good": 1, "bad": 1}
    broken["bad"] = False
    async with Runtime(store_factory()) as rt2:
        fixed = await rt2.resume(wf, failed.run_id)
        info = (await rt2.list_runs())[0]
    assert fixed.status is RunStatus.COMPLETED and fixed.error is None
    assert info.status is RunStatus.COMPLETED and info.error is None
    assert calls == {"start": 1, "good": 1, "bad": 2, "after": 1}
    assert fixed.state.log == ["start", "bad", "good", "after"]


class Crash(BaseException):
    """Stands in for the process dying mid-superstep (not an error a node may catch)."""


async def test_after_a_crash_finished_siblings_and_steps_are_not_run_again(
    store_factory: Callable[[], Any],
) -> None:
    calls: collections.Counter[str] = collections.Counter()
    crash = {"on": True}
    probe = store_factory()  # a separate look at the same data
    await probe.setup()
    b = builder("start", "fast", "after", calls=calls)

    async def slow(state: Flow, ctx: NodeContext) -> dict[str, Any]:
        calls["slow"] += 1
        paid = await ctx.step("pay", lambda: calls.update(["pay"]) or "receipt")
        if crash["on"]:
            head = (await probe.get_run(ctx.run_id)).head_checkpoint_id
            while not await probe.get_task_writes(ctx.run_id, head):  # fast's write is saved
                await asyncio.sleep(0.005)
            raise Crash
        return {"log": [f"slow {paid}"]}

    b.add_node("slow", slow)
    b.set_entry("start").add_edge("start", "fast").add_edge("start", "slow")
    b.add_fan_in(["fast", "slow"], "after").add_edge("after", END)
    wf = b.build()
    # the default lease: a loaded machine's polls of `fast`'s write outlast a short one
    async with Runtime(store_factory()) as rt:
        with pytest.raises(Crash):
            await rt.run(wf, {}, run_id="crashed")
    record = await probe.get_run("crashed")
    assert record.status is RunStatus.RUNNING  # a crashed run stays running
    crash["on"] = False
    # the runtime saw the exception go by and freed the lease, so no one waits for it
    assert record.lease_owner is None
    async with Runtime(store_factory()) as rt2:
        [recovered] = await rt2.recover(wf)
    await probe.close()
    assert recovered.status is RunStatus.COMPLETED, recovered.error
    assert recovered.state.log == ["start", "fast", "slow receipt", "after"]
    assert calls == {"start": 1, "fast": 1, "slow": 2, "pay": 1, "after": 1}


def stuck_workflow(calls: collections.Counter[str], started: asyncio.Event,
                   release: dict[str, bool]) -> Workflow:
    """start -> (quick, stuck); stuck hangs until released."""
    b = builder("start", "quick", calls=calls)

    async def stuck(state: Flow) -> dict[str, Any]:
        calls["stuck"] += 1
        started.set()
        if not release["now"]:
            await asyncio.sleep(30)
        return {"log": ["stuck"]}

    b.add_node("stuck", stuck)
    b.set_entry("start").add_edge("start", "quick").add_edge("start", "stuck")
    b.add_edge("quick", END).add_edge("stuck", END)
    return b.build()


async def test_a_cancelled_caller_stops_the_run_but_leaves_it_resumable(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    release = {"now": False}
    started = asyncio.Event()
    wf = stuck_workflow(calls, started, release)
    caller = asyncio.create_task(rt.run(wf, {}, run_id="abandoned"))  # e.g. under wait_for
    await started.wait()
    head = (await rt.list_runs())[0].head_checkpoint_id
    while not await rt.store.get_task_writes("abandoned", head):  # 'quick' is saved
        await asyncio.sleep(0.005)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    [info] = await rt.list_runs()
    assert info.status is RunStatus.RUNNING  # not cancelled: nobody asked for that
    release["now"] = True
    done = await rt.resume(wf, "abandoned")  # no lease to wait for
    assert done.status is RunStatus.COMPLETED
    assert done.state.log == ["start", "quick", "stuck"]
    assert calls == {"start": 1, "quick": 1, "stuck": 2}


async def test_cancel_stops_a_running_run(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    started = asyncio.Event()
    wf = stuck_workflow(calls, started, {"now": False})
    running = asyncio.create_task(rt.run(wf, {}, run_id="doomed"))
    await started.wait()
    info = await rt.cancel("doomed")
    assert info.status is RunStatus.CANCELLED
    result = await running
    assert result.status is RunStatus.CANCELLED
    with pytest.raises(RunNotResumableError):
        await rt.resume(wf, "doomed")


# histories, events, listing ------------------------------------------------------------


async def test_node_histories_remember_and_returned_messages(rt: Runtime) -> None:
    seen: list[list[str]] = []

    async def chat(state: Flow, ctx: NodeContext) -> dict[str, Any]:
        seen.append([m.content for m in ctx.history])
        ctx.remember(Message.user(f"private {state.count}"))
        assert ctx.history[-1].content == f"private {state.count}"
        return {"count": 1, "messages": [Message.assistant(f"public {state.count}")]}

    b = WorkflowBuilder("chat", state=Flow)
    b.add_node("chat", chat).add_node("other", lambda s: {"messages": [Message.user("other")]})
    b.set_entry("chat")
    b.add_edge("chat", "chat", when="count < 2").add_edge("chat", "other", when="count >= 2")
    b.add_edge("other", END)
    result = await rt.run(b.build(), {})
    assert seen == [[], ["private 0", "public 0"]]
    assert [m.content for m in result.state.messages] == ["public 0", "public 1", "other"]
    snap = await rt.get_state(result.run_id)
    assert {k: [m.content for m in v] for k, v in snap.node_histories.items()} == {
        "chat": ["private 0", "public 0", "private 1", "public 1"],
        "other": ["other"],
    }
    first = (await rt.history(result.run_id))[-2]
    early = await rt.get_state(result.run_id, first.id)
    assert [m.content for m in early.node_histories["chat"]] == ["private 0", "public 0"]


async def test_stream_yields_events_in_order_and_ends_with_the_result(rt: Runtime) -> None:
    b = builder("a", "b")
    b.set_entry("a").add_edge("a", "b").add_edge("b", END)
    events: list[Event] = [e async for e in rt.stream(b.build(), {"topic": "t"})]
    kinds = [e.kind for e in events]
    assert kinds == [
        "run_started",
        "superstep_started", "node_started", "node_completed", "checkpoint_saved",
        "superstep_started", "node_started", "node_completed", "checkpoint_saved",
        "run_completed",
    ]
    last = events[-1]
    assert isinstance(last.result, RunResult) and last.result.status is RunStatus.COMPLETED
    assert last.result.state.log == ["a", "b"]
    assert all(e.result is None for e in events[:-1])
    assert {e.run_id for e in events} == {last.result.run_id}
    assert [e.node for e in events if e.kind == "node_started"] == ["a", "b"]
    assert [e.superstep for e in events if e.kind == "checkpoint_saved"] == [1, 2]
    assert all(e.namespace == "" for e in events)
    assert [e.ts for e in events] == sorted(e.ts for e in events)


async def test_list_runs_filters_by_status_and_workflow(rt: Runtime) -> None:
    ok = builder("a")
    ok.set_entry("a").add_edge("a", END)
    wf_ok = ok.build()
    bad = WorkflowBuilder("other", state=Flow)
    bad.add_node("x", lambda s: 1 / 0).set_entry("x").add_edge("x", END)
    wf_bad = bad.build()
    r1 = await rt.run(wf_ok, {})
    r2 = await rt.run(wf_bad, {})
    r3 = await rt.run(wf_ok, {})
    assert [r.run_id for r in await rt.list_runs()] == [r3.run_id, r2.run_id, r1.run_id]
    assert [r.run_id for r in await rt.list_runs(workflow_name="flow")] == [r3.run_id, r1.run_id]
    assert [r.run_id for r in await rt.list_runs(status="failed")] == [r2.run_id]
    assert await rt.list_runs(status=RunStatus.COMPLETED, workflow_name="other") == []
    info = (await rt.list_runs(status=RunStatus.FAILED))[0]
    assert info.workflow_name == "other" and info.error is not None
    assert info.error.type == "ZeroDivisionError" and info.forked_from is None
    assert info.head_checkpoint_id == r2.checkpoint_id
    assert info.created_at <= info.updated_at


# misuse --------------------------------------------------------------------------------------


async def test_resume_with_a_changed_graph_raises_workflow_mismatch(rt: Runtime) -> None:
    def make(extra: bool) -> Workflow:
        b = WorkflowBuilder("ask", state=Flow)

        async def ask(state: Flow, ctx: NodeContext) -> None:
            await ctx.request("ok?", response_type=bool)

        b.add_node("ask", ask).set_entry("ask").add_edge("ask", END)
        if extra:
            b.add_node("more", lambda s: None).add_edge("ask", "more").add_edge("more", END)
        return b.build()

    waiting = await rt.run(make(False), {})
    before = await rt.history(waiting.run_id)
    with pytest.raises(WorkflowMismatchError):
        await rt.resume(make(True), waiting.run_id,
                        responses={waiting.pending_requests[0].id: True})
    assert await rt.history(waiting.run_id) == before
    assert (await rt.get_state(waiting.run_id)).status is RunStatus.WAITING
    # the same structure (even with new function objects) resumes
    done = await rt.resume(make(False), waiting.run_id,
                           responses={waiting.pending_requests[0].id: True})
    assert done.status is RunStatus.COMPLETED


async def test_unknown_run_ids_raise_run_not_found(rt: Runtime) -> None:
    b = builder("a")
    b.set_entry("a").add_edge("a", END)
    wf = b.build()
    for call in (rt.resume(wf, "nope"), rt.get_state("nope"), rt.history("nope"),
                 rt.cancel("nope"), rt.fork(wf, "nope", "cp"),
                 rt.update_state(wf, "nope", {"x": 1})):
        with pytest.raises(RunNotFoundError, match="nope"):
            await call


@pytest.mark.parametrize("bad_input", [{"x": "many"}, {"unknown": 1}, {"log": "not a list"}])
async def test_bad_input_raises_invalid_input_and_stores_nothing(
    rt: Runtime, bad_input: dict[str, Any]
) -> None:
    b = builder("a")
    b.set_entry("a").add_edge("a", END)
    with pytest.raises(InvalidInputError):
        await rt.run(b.build(), bad_input)
    assert await rt.list_runs() == []


async def test_an_existing_run_id_is_refused(rt: Runtime) -> None:
    b = builder("a")
    b.set_entry("a").add_edge("a", END)
    wf = b.build()
    first = await rt.run(wf, {}, run_id="fixed-id")
    assert first.run_id == "fixed-id"
    with pytest.raises(InvalidInputError, match="already exists"):
        await rt.run(wf, {"x": 1}, run_id="fixed-id")
    assert len(await rt.list_runs()) == 1


async def test_input_may_be_a_blackboard_instance(rt: Runtime) -> None:
    b = builder("a")
    b.set_entry("a").add_edge("a", END)
    result = await rt.run(b.build(), Flow(topic="given", count=2))
    assert result.state.topic == "given" and result.state.count == 2


async def test_unknown_status_filter_is_invalid_input(rt: Runtime) -> None:
    with pytest.raises(InvalidInputError, match="bogus"):
        await rt.list_runs(status="bogus")


async def test_unknown_checkpoint_ids_raise_checkpoint_not_found(rt: Runtime) -> None:
    b = builder("a")
    b.set_entry("a").add_edge("a", END)
    wf = b.build()
    result = await rt.run(wf, {})
    with pytest.raises(CheckpointNotFoundError):
        await rt.get_state(result.run_id, "no-such-checkpoint")
    with pytest.raises(CheckpointNotFoundError):
        await rt.fork(wf, result.run_id, "no-such-checkpoint")
    with pytest.raises(CheckpointNotFoundError):
        await rt.get_state(result.run_id, namespace="no.such.namespace")
    assert [r.run_id for r in await rt.list_runs()] == [result.run_id]


# the acceptance test ----------------------------------------------------------------------


class Research(Blackboard):
    topic: str = ""
    rounds: int = 2
    round: Annotated[int, add] = 0
    findings: Annotated[list[str], append] = []
    summary: str = ""
    polish: bool = False
    done: bool = False


def research_workflow(calls: collections.Counter[str]) -> Workflow:
    """plan -> (r1, r2, r3 -> deep) -> join(r1, r2, deep) -> merge -> loop or extra -> finish."""
    b = WorkflowBuilder("research", state=Research)

    def plan(state: Research) -> dict[str, Any]:
        calls["plan"] += 1
        return {"round": 1, "messages": [Message.assistant(f"plan {state.round + 1}")]}

    def researcher(name: str) -> Callable[[Research], dict[str, Any]]:
        def node(state: Research) -> dict[str, Any]:
            calls[name] += 1
            return {"findings": [f"{name}:{state.round}"]}
        return node

    def merge_(state: Research) -> dict[str, Any]:
        calls["merge"] += 1
        return {"summary": ",".join(state.findings)}

    def extra(state: Research) -> dict[str, Any]:
        calls["extra"] += 1
        return {"summary": state.summary + "!"}

    def finish(state: Research) -> dict[str, Any]:
        calls["finish"] += 1
        return {"done": True}

    b.add_node("plan", plan)
    for name in ("r1", "r2", "r3", "deep"):
        b.add_node(name, researcher(name))
    b.add_node("merge", merge_).add_node("extra", extra, skip_if="not polish")
    b.add_node("finish", finish)
    b.set_entry("plan")
    for name in ("r1", "r2", "r3"):
        b.add_edge("plan", name)
    b.add_edge("r3", "deep")
    b.add_fan_in(["r1", "r2", "deep"], "merge")
    b.add_switch("merge", [("round < rounds", "plan")], default="extra")
    b.add_edge("extra", "finish").add_edge("finish", END)
    return b.build()


def round_findings(n: int) -> list[str]:
    return [f"r1:{n}", f"r2:{n}", f"r3:{n}", f"deep:{n}"]


async def test_acceptance_fan_out_join_loop_and_skip(rt: Runtime, store: Any) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = research_workflow(calls)
    result = await rt.run(wf, {"topic": "tides", "rounds": 2})
    assert result.status is RunStatus.COMPLETED, result.error
    r1, r2 = round_findings(1), round_findings(2)
    assert result.state.findings == r1 + r2
    assert result.state.summary == ",".join(r1 + r2) and result.state.done
    assert calls == {"plan": 2, "r1": 2, "r2": 2, "r3": 2, "deep": 2, "merge": 2, "finish": 1}

    history = await rt.history(result.run_id)
    expected: list[tuple[tuple[str, ...], dict[str, Any], tuple[str, ...]]] = [
        ((), {"round": 0, "findings": [], "summary": ""}, ("plan",)),
        (("plan",), {"round": 1, "findings": []}, ("r1", "r2", "r3")),
        (("r1", "r2", "r3"), {"findings": r1[:3]}, ("deep",)),
        (("deep",), {"findings": r1}, ("merge",)),
        (("merge",), {"summary": ",".join(r1), "round": 1}, ("plan",)),
        (("plan",), {"round": 2, "findings": r1}, ("r1", "r2", "r3")),
        (("r1", "r2", "r3"), {"findings": r1 + r2[:3]}, ("deep",)),
        (("deep",), {"findings": r1 + r2}, ("merge",)),
        (("merge",), {"summary": ",".join(r1 + r2), "done": False}, ("finish",)),
        (("finish",), {"done": True, "round": 2}, ()),
    ]
    assert len(history) == len(expected)
    assert [cp.superstep for cp in reversed(history)] == list(range(len(expected)))
    assert [cp.source for cp in reversed(history)] == ["input"] + ["loop"] * (len(expected) - 1)
    for cp, (nodes, values, next_tasks) in zip(reversed(history), expected, strict=True):
        assert cp.nodes == nodes, cp.superstep
        snap = await rt.get_state(result.run_id, cp.id)
        assert snap.checkpoint_id == cp.id and snap.superstep == cp.superstep
        for field, value in values.items():
            assert snap.values[field] == value, (cp.superstep, field)
        assert snap.values["topic"] == "tides"
        assert snap.next_tasks == next_tasks, cp.superstep
        assert [m["content"] for m in snap.values["messages"]] == \
            [f"plan {i + 1}" for i in range(snap.values["round"])]
    oldest_first = list(reversed(history))
    assert all(cp.parent_id == prev.id for prev, cp in itertools.pairwise(oldest_first))
    # the join buffer between supersteps, the loop's reason and the skip are recorded
    assert (await store.get_checkpoint(result.run_id, oldest_first[2].id)).joins == \
        {"merge": ("r1", "r2")}
    assert oldest_first[4].routing_reason == "merge: round < rounds -> plan"
    assert oldest_first[8].routing_reason == "merge: default -> extra; skipped extra"
    assert (await rt.get_state(result.run_id)).checkpoint_id == history[0].id


async def test_acceptance_with_polish_runs_the_optional_node(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    result = await rt.run(research_workflow(calls), {"rounds": 1, "polish": True})
    assert result.state.summary == ",".join(round_findings(1)) + "!"
    assert calls["extra"] == 1
    assert [cp.nodes for cp in await rt.history(result.run_id)][:2] == [("finish",), ("extra",)]


# properties -------------------------------------------------------------------------------


class Race(Blackboard):
    log: Annotated[list[str], append] = []
    total: Annotated[int, add] = 0
    table: Annotated[dict[str, str], merge] = {}
    last: str = ""


RACERS = ("n1", "n2", "n3", "n4")


def race_workflow(order: list[str], finished: list[str]) -> Workflow:
    """start -> n1..n4 in parallel -> join -> start again while total < 15.

    In every superstep the racers finish in ``order``: each waits for its gate
    and opens the next one's as it returns.
    """
    gates: dict[tuple[str, int], asyncio.Event] = collections.defaultdict(asyncio.Event)
    b = WorkflowBuilder("race", state=Race)

    def racer(name: str) -> Any:
        async def node(state: Race, ctx: NodeContext) -> dict[str, Any]:
            position = order.index(name)
            if position > 0:
                await gates[(name, state.total)].wait()
            ctx.remember(Message.user(f"{name} round {state.total}"))
            if position + 1 < len(order):
                nxt = gates[(order[position + 1], state.total)]
                asyncio.get_running_loop().call_soon(nxt.set)
            update: dict[str, Any] = {
                "log": [f"{name}.{state.total}"], "total": int(name[1:]),
                "table": {"shared": name, name: str(state.total)},
                "messages": [Message.assistant(name)],
            }
            if name == "n3":
                update["last"] = f"n3 saw {len(state.log)}"
            finished.append(name)
            return update
        return node

    b.add_node("start", lambda s: None)
    for name in RACERS:
        b.add_node(name, racer(name))
        b.add_edge("start", name)
    b.add_fan_in(list(RACERS), "again")
    b.add_node("again", lambda s: None)
    b.add_edge("again", "start", when="total < 15")
    b.set_entry("start")
    return b.build()


async def _race(order: list[str]) -> list[tuple[dict[str, Any], dict[str, list[str]]]]:
    """Run the race with tasks finishing in ``order``; the blackboard after each superstep."""
    finished: list[str] = []
    async with Runtime(MemoryStore()) as rt:
        result = await rt.run(race_workflow(order, finished), {})
        assert result.status is RunStatus.COMPLETED, result.error
        assert finished == order * 2  # the tasks really finished in that order
        out = []
        for cp in reversed(await rt.history(result.run_id)):
            snap = await rt.get_state(result.run_id, cp.id)
            out.append((snap.values, {k: [m.content for m in v]
                                      for k, v in snap.node_histories.items()}))
        out.append((result.state.model_dump(mode="json"), {}))
        return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.permutations(RACERS))
def test_property_merged_state_does_not_depend_on_finish_order(order: list[str]) -> None:
    reference = asyncio.run(_race(list(RACERS)))
    assert reference[-1][0]["log"] == ["n1.0", "n2.0", "n3.0", "n4.0",
                                       "n1.10", "n2.10", "n3.10", "n4.10"]
    assert asyncio.run(_race(list(order))) == reference


async def _fork_from_every_checkpoint(inputs: dict[str, Any]) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = research_workflow(calls)
    async with Runtime(MemoryStore()) as rt:
        original = await rt.run(wf, inputs)
        assert original.status is RunStatus.COMPLETED
        final = await rt.get_state(original.run_id)
        history = await rt.history(original.run_id)
        for cp in history:
            forked = await rt.fork(wf, original.run_id, cp.id)
            assert forked.status is RunStatus.COMPLETED, (cp.superstep, forked.error)
            assert forked.run_id != original.run_id
            assert forked.state == original.state, cp.superstep
            snap = await rt.get_state(forked.run_id)
            assert snap.values == final.values
            assert snap.node_histories == final.node_histories
            assert snap.superstep == final.superstep
        assert await rt.history(original.run_id) == history


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds=st.integers(1, 3), polish=st.booleans(),
       topic=st.text(max_size=10), seed=st.lists(st.text(max_size=5), max_size=3))
def test_property_a_fork_from_any_checkpoint_ends_like_the_uninterrupted_run(
    rounds: int, polish: bool, topic: str, seed: list[str]
) -> None:
    asyncio.run(_fork_from_every_checkpoint(
        {"rounds": rounds, "polish": polish, "topic": topic, "findings": seed}))
