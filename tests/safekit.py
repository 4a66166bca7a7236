"""Workflows for the tests of ``assert_crash_safe``; its child processes import them from here.

``tally`` appends a line to a file named by the run and returns how many
lines the file has. In ``unsafe_workflow`` the append is outside ``ctx.step``,
so a resume that runs the node again appends twice; in ``safe_workflow`` it is
the step itself. The folder comes from ``SAFEKIT_DIR``. ``waits_workflow``
sleeps, then waits for the event ``ping``.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from durable_flow import Blackboard, NodeContext, WorkflowBuilder


class Tally(Blackboard):
    lines: int = 0
    sent: str = ""


def _file(ctx: NodeContext) -> Path:
    return Path(os.environ["SAFEKIT_DIR"]) / f"{ctx.run_id}.txt"


def _append(path: Path) -> int:
    with path.open("a") as fh:
        fh.write("x\n")
    return len(path.read_text().splitlines())


def _build(name: str, *, in_step: bool) -> Any:
    b = WorkflowBuilder(name, state=Tally)
    b.add_node("start", lambda s: None)

    @b.node()
    async def tally(state: Tally, ctx: NodeContext) -> dict[str, Any]:
        path = _file(ctx)
        if in_step:
            lines = await ctx.step("append", _append, path)
        else:
            _append(path)  # a side effect outside ctx.step: done again on a resume
            lines = len(path.read_text().splitlines())
        sent = await ctx.step("notify", lambda: "sent")
        return {"lines": lines, "sent": sent}

    b.set_entry("start")
    b.add_edge("start", "tally")
    return b.build()


unsafe_workflow = _build("tally-unsafe", in_step=False)
safe_workflow = _build("tally-safe", in_step=True)


class Signal(Blackboard):
    slept: bool = False
    heard: str = ""


def _waits() -> Any:
    b = WorkflowBuilder("waits", state=Signal)

    @b.node()
    async def nap(state: Signal, ctx: NodeContext) -> dict[str, Any]:
        await ctx.sleep(0.2)
        return {"slept": True}

    @b.node()
    async def hear(state: Signal, ctx: NodeContext) -> dict[str, Any]:
        return {"heard": await ctx.wait_event("ping", response_type=str)}

    b.set_entry("nap")
    b.add_edge("nap", "hear")
    return b.build()


waits_workflow = _waits()


class Expense(Blackboard):
    amount: int = 40
    approved: bool = False
    paid: int = 0


def _approvals() -> Any:
    b = WorkflowBuilder("expense_roles", state=Expense)

    @b.node()
    async def approve(state: Expense, ctx: NodeContext) -> dict[str, Any]:
        ok = await ctx.request({"question": f"pay {state.amount}?"}, response_type=bool,
                               roles=["finance"])
        return {"approved": ok}

    @b.node()
    async def pay(state: Expense, ctx: NodeContext) -> dict[str, Any]:
        paid = await ctx.step("pay", lambda: state.amount if state.approved else 0)
        return {"paid": paid}

    b.set_entry("approve")
    b.add_edge("approve", "pay")
    return b.build()


approvals_workflow = _approvals()


def _hangs() -> Any:
    b = WorkflowBuilder("hangs", state=Tally)

    @b.node()
    async def stuck(state: Tally) -> dict[str, Any]:
        Path(os.environ["SAFEKIT_DIR"], "stuck.pid").write_text(str(os.getpid()))
        await asyncio.sleep(600)
        return {}

    b.set_entry("stuck")
    return b.build()


#: a run whose only node never finishes (it writes its pid to ``stuck.pid`` first)
hanging_workflow = _hangs()
