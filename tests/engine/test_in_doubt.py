"""``ctx.step(..., in_doubt="ask", reconcile=...)``: a start without a result is asked about.

A crash between the start record and the result is made here by a step
function that raises ``BaseException`` (nothing below it records a result,
and the node fails without a retry); the run is then resumed, as after a
restart. The process-level kills are in ``test_in_doubt_crash.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from durable_flow import (
    END,
    NOT_DONE,
    Blackboard,
    InDoubtDecision,
    InvalidInputError,
    RunStatus,
    Runtime,
    WorkflowBuilder,
)


class Pay(Blackboard):
    order: str = "A-1"
    receipt: str = ""


class Cut(BaseException):
    """Stands for the process dying right after the effect started."""


def paying(calls: list[str], *, cut: list[bool], reconcile: Any = None,
           in_doubt: str = "ask") -> Any:
    b = WorkflowBuilder("paying", state=Pay)

    def charge(order: str, amount: int) -> str:
        calls.append(order)
        if cut and cut.pop(0):
            raise Cut
        return f"paid {order} {amount}"

    @b.node()
    async def pay(state: Pay, ctx: Any) -> dict[str, Any]:
        receipt = await ctx.step("charge", charge, state.order, amount=30,
                                 in_doubt=in_doubt, reconcile=reconcile)
        return {"receipt": receipt}

    b.set_entry("pay")
    b.add_edge("pay", END)
    return b.build()


async def _cut_run(rt: Runtime, wf: Any) -> str:
    """Start the run; its step is cut off after it started; the run is left failed."""
    with pytest.raises(Cut):
        await rt.run(wf, {"order": "A-1"}, run_id="pay-1")
    return "pay-1"


async def test_default_rerun_writes_no_start_record_and_runs_again(rt: Runtime) -> None:
    calls: list[str] = []
    wf = paying(calls, cut=[True], in_doubt="rerun")
    await _cut_run(rt, wf)
    steps = await rt.store.get_steps("pay-1", (await rt.history("pay-1"))[-1].id, "pay")
    assert steps == {}  # nothing recorded before fn: the default costs no write
    r = await rt.resume(wf, "pay-1")
    assert r.status is RunStatus.COMPLETED and r.state.receipt == "paid A-1 30"
    assert calls == ["A-1", "A-1"]


async def test_a_start_without_a_result_asks_a_person_and_does_not_run(rt: Runtime) -> None:
    calls: list[str] = []
    wf = paying(calls, cut=[True])
    await _cut_run(rt, wf)
    r = await rt.resume(wf, "pay-1")
    assert r.status is RunStatus.WAITING and calls == ["A-1"]
    [req] = r.pending_requests
    assert req.payload["kind"] == "in_doubt"
    assert req.payload["node"] == "pay" and req.payload["step"] == "charge"
    assert req.payload["started_at"] is not None
    assert "A-1" in req.payload["arguments"] and "30" in req.payload["arguments"]
    assert "charge" in req.title
    r = await rt.resume(wf, "pay-1", responses={req.id: {"done": True, "result": "bank: ok"}})
    assert r.status is RunStatus.COMPLETED and r.state.receipt == "bank: ok"
    assert calls == ["A-1"]  # the person said it happened: it never ran again
    [decision] = [d for d in await rt.decisions("pay-1") if d.kind == "answer"]
    assert decision.request_id == req.id


async def test_not_done_runs_the_effect_once_more_and_a_second_cut_asks_again(
        rt: Runtime) -> None:
    calls: list[str] = []
    wf = paying(calls, cut=[True, True])
    await _cut_run(rt, wf)
    r = await rt.resume(wf, "pay-1")
    [first] = r.pending_requests
    with pytest.raises(Cut):  # the person says "not done": it runs, and is cut off again
        await rt.resume(wf, "pay-1", responses={first.id: InDoubtDecision(done=False)})
    assert calls == ["A-1", "A-1"]
    r = await rt.resume(wf, "pay-1")
    assert r.status is RunStatus.WAITING
    [second] = r.pending_requests
    assert second.id != first.id and second.payload["attempt"] == 2
    assert calls == ["A-1", "A-1"]  # the earlier "not done" does not cover this attempt
    r = await rt.resume(wf, "pay-1", responses={second.id: {"done": False}})
    assert r.status is RunStatus.COMPLETED and r.state.receipt == "paid A-1 30"
    assert calls == ["A-1", "A-1", "A-1"]


async def test_reconcile_answers_instead_of_a_person(rt: Runtime) -> None:
    calls: list[str] = []
    seen: list[tuple[Any, ...]] = []

    async def found(order: str, amount: int) -> str:
        seen.append((order, amount))
        return f"found {order}"

    wf = paying(calls, cut=[True], reconcile=found)
    await _cut_run(rt, wf)
    r = await rt.resume(wf, "pay-1")
    assert r.status is RunStatus.COMPLETED and r.state.receipt == "found A-1"
    assert seen == [("A-1", 30)] and calls == ["A-1"]
    assert await rt.pending_requests() == []


async def test_reconcile_not_done_runs_the_effect(rt: Runtime) -> None:
    calls: list[str] = []
    wf = paying(calls, cut=[True], reconcile=lambda order, amount: NOT_DONE)
    await _cut_run(rt, wf)
    r = await rt.resume(wf, "pay-1")
    assert r.status is RunStatus.COMPLETED and r.state.receipt == "paid A-1 30"
    assert calls == ["A-1", "A-1"]


async def test_a_reconcile_that_raises_asks_a_person(rt: Runtime) -> None:
    calls: list[str] = []

    def broken(order: str, amount: int) -> str:
        raise ConnectionError("bank unreachable")

    wf = paying(calls, cut=[True], reconcile=broken)
    await _cut_run(rt, wf)
    r = await rt.resume(wf, "pay-1")
    assert r.status is RunStatus.WAITING and r.pending_requests[0].payload["kind"] == "in_doubt"
    assert calls == ["A-1"]


async def test_an_uninterrupted_ask_step_runs_once_and_records_its_start(rt: Runtime) -> None:
    calls: list[str] = []
    wf = paying(calls, cut=[])
    r = await rt.run(wf, {"order": "B-2"}, run_id="pay-2")
    assert r.status is RunStatus.COMPLETED and r.state.receipt == "paid B-2 30"
    steps = await rt.store.get_steps("pay-2", (await rt.history("pay-2"))[-1].id, "pay")
    assert set(steps) == {"charge", "#started:charge:1"}
    assert calls == ["B-2"]


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"in_doubt": "maybe"}, "in_doubt must be"),
    ({"in_doubt": "rerun", "reconcile": print}, "reconcile= is used only"),
])
async def test_bad_options_fail_the_node(rt: Runtime, kwargs: dict[str, Any], match: str) -> None:
    b = WorkflowBuilder("bad", state=Pay)

    @b.node()
    async def pay(state: Pay, ctx: Any) -> dict[str, Any]:
        return {"receipt": await ctx.step("charge", str, 1, **kwargs)}

    b.set_entry("pay")
    b.add_edge("pay", END)
    r = await rt.run(b.build(), {})
    assert r.status is RunStatus.FAILED and r.error is not None and match in r.error.message
    assert InvalidInputError.__name__ == r.error.type


async def test_a_node_timeout_inside_the_effect_leaves_it_in_doubt_for_the_retry(
        rt: Runtime) -> None:
    import asyncio

    from durable_flow import RetryPolicy

    calls: list[str] = []

    async def slow_charge(order: str) -> str:
        calls.append(order)
        await asyncio.sleep(5)  # the bank hangs; the node's timeout cuts it off
        return "never"

    b = WorkflowBuilder("hanging", state=Pay)

    async def pay(state: Pay, ctx: Any) -> dict[str, Any]:
        return {"receipt": await ctx.step("charge", slow_charge, state.order, in_doubt="ask")}

    b.add_node("pay", pay, timeout=0.3, retry=RetryPolicy(max_attempts=3, initial_delay=0.01))
    b.set_entry("pay")
    b.add_edge("pay", END)
    r = await rt.run(b.build(), {"order": "C-3"})
    assert r.status is RunStatus.WAITING and calls == ["C-3"]  # the retry asked, did not charge
    [req] = r.pending_requests
    assert req.payload["kind"] == "in_doubt" and req.payload["attempt"] == 1
