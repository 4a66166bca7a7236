"""The workflow the worker-fleet process tests run: ``fleetkit:workflow``.

Each run splits into two parallel branches whose durable step appends one
line per execution to the journal (``FLEET_JOURNAL``): ``run_id node pid``.
A step that ran twice is visible there, and so is which process ran it.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Annotated, Any

from durable_flow import END, Blackboard, WorkflowBuilder, add, append


class Order(Blackboard):
    n: int = 0
    parts: Annotated[list[str], append] = []
    total: Annotated[int, add] = 0
    receipt: str = ""


def journal(run_id: str, node: str) -> None:
    """Record one execution of a step, durably, before its result is returned."""
    path = Path(os.environ["FLEET_JOURNAL"])
    with path.open("a") as fh:
        fh.write(f"{run_id} {node} {os.getpid()}\n")
        fh.flush()
        os.fsync(fh.fileno())


def expected(n: int) -> dict[str, Any]:
    """The final values of a run with input ``n``, as an uninterrupted run ends."""
    return {"n": n, "parts": [f"a{n}", f"b{n}"], "total": 3 * n, "receipt": f"paid {3 * n}"}


b = WorkflowBuilder("fleet", state=Order)


def _branch(name: str, factor: int) -> Any:
    async def branch(state: Order, ctx: Any) -> dict[str, Any]:
        async def charge() -> int:
            journal(ctx.run_id, name)
            await asyncio.sleep(0.005)
            return factor * state.n

        amount = await ctx.step("charge", charge)
        return {"parts": [f"{name}{state.n}"], "total": amount}

    return branch


@b.node()
async def split(state: Order) -> dict[str, Any]:
    return {}


b.add_node("a", _branch("a", 1))
b.add_node("b", _branch("b", 2))


@b.node()
async def settle(state: Order) -> dict[str, Any]:
    return {"receipt": f"paid {state.total}"}


b.set_entry("split")
b.add_edge("split", "a").add_edge("split", "b")
b.add_fan_in(["a", "b"], "settle")
b.add_edge("settle", END)
workflow = b.build()
