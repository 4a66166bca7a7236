"""Errors inside a node: the runtime's own are never retried, durable steps survive
timeouts and retries, and a node raising ``CancelledError`` itself fails like any other."""

from __future__ import annotations

import asyncio
import collections
from typing import Any

import pytest

from durable_flow import (
    END,
    Blackboard,
    DurableFlowError,
    ModelError,
    NodeContext,
    RetryPolicy,
    RunStatus,
    Runtime,
    WorkflowBuilder,
)

NO_WAIT = {"initial_delay": 0.0, "jitter": False}


class Box(Blackboard):
    value: str = ""


def one_node(fn: Any, **options: Any) -> Any:
    b = WorkflowBuilder("errors", state=Box)
    b.add_node("work", fn, **options)
    b.set_entry("work").add_edge("work", END)
    return b.build()


RETRY3 = {"retry": RetryPolicy(max_attempts=3, **NO_WAIT)}


# the runtime's own errors are never retried --------------------------------------------


async def test_a_fenced_out_step_is_not_retried_so_its_side_effect_runs_once(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()

    async def work(state: Box, ctx: NodeContext) -> dict[str, Any]:
        calls["work"] += 1
        await rt.store.cancel_run(ctx.run_id)  # another process moves the lease epoch on
        paid = await ctx.step("charge", lambda: calls.update(["charge"]) or "receipt")
        return {"value": paid}

    result = await asyncio.wait_for(rt.run(one_node(work, **RETRY3), {}), 10)
    assert result.status is RunStatus.CANCELLED
    assert calls == {"work": 1, "charge": 1}


async def test_a_runtime_error_wrapped_in_the_nodes_own_error_is_not_retried(
        rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()

    class PaymentError(Exception):
        pass

    async def work(state: Box, ctx: NodeContext) -> dict[str, Any]:
        calls["work"] += 1
        if calls["work"] == 1:
            await rt.store.cancel_run(ctx.run_id)
        try:
            paid = await ctx.step("charge", lambda: calls.update(["charge"]) or "receipt")
        except Exception as exc:
            raise PaymentError("the charge was not recorded") from exc
        return {"value": paid}

    result = await asyncio.wait_for(rt.run(one_node(work, **RETRY3), {}), 10)
    assert result.status is RunStatus.CANCELLED
    assert calls == {"work": 1, "charge": 1}


async def test_a_runtime_error_caught_and_replaced_inside_except_is_not_retried(
        rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()

    async def work(state: Box, ctx: NodeContext) -> dict[str, Any]:
        calls["work"] += 1
        try:
            await ctx.step("blob", lambda: calls.update(["blob"]) or object())
        except DurableFlowError:
            raise RuntimeError("could not keep the blob") from None
        return {}

    result = await rt.run(one_node(work, **RETRY3), {})
    assert result.status is RunStatus.FAILED and result.error is not None
    assert result.error.type == "RuntimeError"
    assert calls == {"work": 1, "blob": 1}


async def test_an_unserializable_step_result_fails_the_node_without_retrying(
        rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()

    async def work(state: Box, ctx: NodeContext) -> dict[str, Any]:
        await ctx.step("blob", lambda: calls.update(["blob"]) or object())
        return {}

    result = await rt.run(one_node(work, **RETRY3), {})
    assert result.status is RunStatus.FAILED and result.error is not None
    assert result.error.type == "SerializationError"
    assert calls == {"blob": 1}


async def test_a_duplicate_step_name_fails_the_node_without_retrying(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()

    async def work(state: Box, ctx: NodeContext) -> dict[str, Any]:
        calls["work"] += 1
        await ctx.step("same", lambda: 1)
        await ctx.step("same", lambda: 2)
        return {}

    result = await rt.run(one_node(work, **RETRY3), {})
    assert result.error is not None and result.error.type == "DuplicateStepError"
    assert calls == {"work": 1}


async def test_an_unserializable_request_payload_fails_the_node_without_retrying(
        rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()

    async def work(state: Box, ctx: NodeContext) -> dict[str, Any]:
        calls["work"] += 1
        return {"value": await ctx.request(object(), response_type=str)}

    result = await rt.run(one_node(work, **RETRY3), {})
    assert result.error is not None and result.error.type == "SerializationError"
    assert calls == {"work": 1}


async def test_the_nodes_own_errors_are_still_retried_durable_flow_ones_included(
        rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()

    async def flaky_call() -> str:
        calls["call"] += 1
        if calls["call"] < 3:
            raise ConnectionError("down")
        return "ok"

    async def work(state: Box, ctx: NodeContext) -> dict[str, Any]:
        calls["work"] += 1
        if calls["work"] == 1:
            raise ModelError("the model replied badly")
        return {"value": await ctx.step("call", flaky_call)}

    result = await rt.run(one_node(work, retry=RetryPolicy(max_attempts=4, **NO_WAIT)), {})
    assert result.status is RunStatus.COMPLETED and result.state.value == "ok"  # type: ignore[attr-defined]
    assert calls == {"work": 4, "call": 3}


# durable steps across a timeout and a retry ---------------------------------------------


def paying_node(calls: collections.Counter[str], timeout: float = 0.2) -> Any:
    """Charges once through ctx.step, then hangs on its first attempt only."""

    async def work(state: Box, ctx: NodeContext) -> dict[str, Any]:
        calls["work"] += 1
        receipt = await ctx.step("charge", lambda: calls.update(["charge"]) or "receipt-1")
        if calls["work"] == 1:
            await asyncio.sleep(30)
        return {"value": receipt}

    return one_node(work, timeout=timeout,
                    retry=RetryPolicy(max_attempts=2, retry_on=(TimeoutError,), **NO_WAIT))


async def test_a_recorded_step_is_not_run_again_after_a_timeout_and_a_retry(
        rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    result = await rt.run(paying_node(calls), {})
    assert result.status is RunStatus.COMPLETED, result.error
    assert result.state.value == "receipt-1"  # type: ignore[attr-defined]
    assert calls == {"work": 2, "charge": 1}


@pytest.mark.parametrize("write_first", [True, False], ids=["ack-lost", "write-slow"])
async def test_a_step_whose_write_the_timeout_interrupts_is_recorded_and_not_run_again(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch, write_first: bool) -> None:
    calls: collections.Counter[str] = collections.Counter()
    put_step = rt.store.put_step

    async def slow_put_step(lease: Any, row: Any) -> None:
        # the first attempt times out (0.5 s) while this write is in flight; the
        # second finds it finished within its own 0.5 s
        if write_first:
            await put_step(lease, row)
            await asyncio.sleep(0.75)
        else:
            await asyncio.sleep(0.75)
            await put_step(lease, row)

    monkeypatch.setattr(rt.store, "put_step", slow_put_step)
    result = await rt.run(paying_node(calls, timeout=0.5), {})
    assert result.status is RunStatus.COMPLETED, result.error
    assert result.state.value == "receipt-1"  # type: ignore[attr-defined]
    assert calls == {"work": 2, "charge": 1}
    head = (await rt.history(result.run_id))[-1].id
    assert set(await rt.store.get_steps(result.run_id, head, "work")) == {"charge"}


async def test_a_step_write_cut_by_a_final_timeout_is_recorded_before_the_run_fails(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: collections.Counter[str] = collections.Counter()
    put_step = rt.store.put_step

    async def slow_put_step(lease: Any, row: Any) -> None:
        await asyncio.sleep(0.3)  # outlives the node's 0.1 s timeout
        await put_step(lease, row)

    async def work(state: Box, ctx: NodeContext) -> dict[str, Any]:
        receipt = await ctx.step("charge", lambda: calls.update(["charge"]) or "receipt-1")
        return {"value": receipt}

    wf = one_node(work, timeout=0.1)
    monkeypatch.setattr(rt.store, "put_step", slow_put_step)
    failed = await rt.run(wf, {})
    assert failed.status is RunStatus.FAILED and failed.error is not None
    assert failed.error.type == "TimeoutError"
    monkeypatch.setattr(rt.store, "put_step", put_step)
    done = await rt.resume(wf, failed.run_id)
    assert done.status is RunStatus.COMPLETED
    assert done.state.value == "receipt-1"  # type: ignore[attr-defined]
    assert calls == {"charge": 1}


async def test_a_step_write_in_flight_when_the_caller_goes_away_is_kept(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: collections.Counter[str] = collections.Counter()
    writing = asyncio.Event()
    put_step = rt.store.put_step

    async def slow_put_step(lease: Any, row: Any) -> None:
        writing.set()
        await asyncio.sleep(0.3)
        await put_step(lease, row)

    async def work(state: Box, ctx: NodeContext) -> dict[str, Any]:
        receipt = await ctx.step("charge", lambda: calls.update(["charge"]) or "receipt-1")
        return {"value": receipt}

    wf = one_node(work)
    monkeypatch.setattr(rt.store, "put_step", slow_put_step)
    caller = asyncio.create_task(rt.run(wf, {}, run_id="left"))
    await writing.wait()
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    monkeypatch.setattr(rt.store, "put_step", put_step)
    done = await rt.resume(wf, "left")
    assert done.status is RunStatus.COMPLETED
    assert calls == {"charge": 1}


async def test_a_step_wrapped_runtime_error_raised_from_is_not_retried(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()

    async def work(state: Box, ctx: NodeContext) -> dict[str, Any]:
        calls["work"] += 1
        try:
            await ctx.step("blob", lambda: object())
        except Exception as exc:
            raise RuntimeError("could not keep the blob") from exc
        return {}

    result = await rt.run(one_node(work, **RETRY3), {})
    assert result.error is not None and result.error.type == "RuntimeError"
    assert calls == {"work": 1}


# a node raising CancelledError itself ---------------------------------------------------


async def test_a_node_raising_cancelled_error_itself_fails_like_any_other_node(
        rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()

    async def work(state: Box) -> dict[str, Any]:
        calls["work"] += 1
        raise asyncio.CancelledError("the node gave up")

    result = await asyncio.wait_for(rt.run(one_node(work, **RETRY3), {}), 10)
    assert result.status is RunStatus.FAILED and result.error is not None
    assert (result.error.type, result.error.node) == ("CancelledError", "work")
    assert result.error.message == "the node gave up"
    assert calls == {"work": 1}  # a BaseException: retry_on=(Exception,) does not cover it
    assert (await rt.get_run(result.run_id)).status is RunStatus.FAILED


async def test_a_sync_node_raising_cancelled_error_fails_the_run(rt: Runtime) -> None:
    def work(state: Box) -> dict[str, Any]:
        raise asyncio.CancelledError("no")

    result = await asyncio.wait_for(rt.run(one_node(work), {}), 10)
    assert result.status is RunStatus.FAILED and result.error is not None
    assert result.error.type == "CancelledError"


async def test_a_node_cancelled_error_is_retried_when_the_policy_lists_it(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()

    async def work(state: Box) -> dict[str, Any]:
        calls["work"] += 1
        if calls["work"] == 1:
            raise asyncio.CancelledError("once")
        return {"value": "second try"}

    policy = RetryPolicy(max_attempts=2, retry_on=(asyncio.CancelledError,), **NO_WAIT)
    result = await asyncio.wait_for(rt.run(one_node(work, retry=policy), {}), 10)
    assert result.status is RunStatus.COMPLETED and calls == {"work": 2}


async def test_cancelling_a_run_is_not_retried_even_when_the_policy_lists_cancelled_error(
        rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    started = asyncio.Event()

    async def work(state: Box) -> dict[str, Any]:
        calls["work"] += 1
        started.set()
        await asyncio.sleep(30)
        return {}

    policy = RetryPolicy(max_attempts=3, retry_on=(BaseException,), **NO_WAIT)
    running = asyncio.create_task(rt.run(one_node(work, retry=policy), {}, run_id="stop"))
    await started.wait()
    info = await asyncio.wait_for(rt.cancel("stop"), 5)
    assert info.status is RunStatus.CANCELLED
    assert (await asyncio.wait_for(running, 5)).status is RunStatus.CANCELLED
    assert calls == {"work": 1}


async def test_a_cancelled_caller_still_sees_cancellation_when_the_policy_lists_it(
        rt: Runtime) -> None:
    started = asyncio.Event()

    async def work(state: Box) -> dict[str, Any]:
        started.set()
        await asyncio.sleep(30)
        return {}

    policy = RetryPolicy(max_attempts=3, retry_on=(asyncio.CancelledError,), **NO_WAIT)
    caller = asyncio.create_task(rt.run(one_node(work, retry=policy), {}, run_id="gone"))
    await started.wait()
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(caller, 5)
    assert (await rt.get_run("gone")).status is RunStatus.RUNNING
