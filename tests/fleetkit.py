"""The workflow the worker-fleet process tests run: ``fleetkit:workflow``.

Each run splits into two parallel branches whose durable step appends
lines to the journal (``FLEET_JOURNAL``): ``run_id node pid phase time`` when
it starts (``start``) and when it ends (``done``, or ``cancelled`` when its
process stopped it). A step that ran twice is visible there, which process
ran it, and whether two executions overlapped. A step takes
``FLEET_STEP_DELAY`` seconds (default 0.005).
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from durable_flow import END, Blackboard, WorkflowBuilder, add, append


class Order(Blackboard):
    n: int = 0
    parts: Annotated[list[str], append] = []
    total: Annotated[int, add] = 0
    receipt: str = ""


def journal(run_id: str, node: str, phase: str) -> None:
    """Record one phase of one execution of a step, durably."""
    path = Path(os.environ["FLEET_JOURNAL"])
    with path.open("a") as fh:
        fh.write(f"{run_id} {node} {os.getpid()} {phase} {time.time():.6f}\n")
        fh.flush()
        os.fsync(fh.fileno())


@dataclass
class Execution:
    """One execution of one step, as the journal tells it."""

    pid: int
    started: float
    ended: float | None = None
    outcome: str | None = None  # "done", "cancelled", or None: its process died


def executions(path: Path) -> dict[tuple[str, str], list[Execution]]:
    """Every step execution in the journal, by (run id, node), in start order."""
    out: dict[tuple[str, str], list[Execution]] = {}
    running: dict[tuple[str, str, int], Execution] = {}
    for line in path.read_text().splitlines():
        run_id, node, pid, phase, at = line.split()
        key = (run_id, node, int(pid))
        if phase == "start":
            running[key] = Execution(int(pid), float(at))
            out.setdefault((run_id, node), []).append(running[key])
        else:
            done = running.pop(key)
            done.ended, done.outcome = float(at), phase
    return out


def expected(n: int) -> dict[str, Any]:
    """The final values of a run with input ``n``, as an uninterrupted run ends."""
    return {"n": n, "parts": [f"a{n}", f"b{n}"], "total": 3 * n, "receipt": f"paid {3 * n}"}


b = WorkflowBuilder("fleet", state=Order)


def _branch(name: str, factor: int) -> Any:
    async def branch(state: Order, ctx: Any) -> dict[str, Any]:
        async def charge() -> int:
            journal(ctx.run_id, name, "start")
            try:
                await asyncio.sleep(float(os.environ.get("FLEET_STEP_DELAY", "0.005")))
            except asyncio.CancelledError:
                journal(ctx.run_id, name, "cancelled")
                raise
            journal(ctx.run_id, name, "done")
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
