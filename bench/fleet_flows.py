"""The workflows the fleet benchmark runs: ``fleet_flows:io`` and ``fleet_flows:cpu``.

Both have the same shape, three supersteps with a fan-out of three parallel
nodes and a fan-in::

    plan -> (fetch_a, fetch_b, fetch_c) -> merge -> END

In ``io`` every node awaits ``IO_SECONDS`` (a call to a model or a web
service); in ``cpu`` every node returns at once, so a run costs only the
engine and the store.

When ``FLEET_GATE`` is set (``bench/fleet.py`` sets it), importing this
module marks the process ready (``$FLEET_GATE.<pid>``) and then waits for
the gate file to appear. ``durable-flow worker`` imports the workflow
module before it opens the store, so every worker process has paid its
start-up (Python, durable-flow, the CLI, the store modules imported here)
before any of them claims a run, and the fleet starts claiming together.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import time
from pathlib import Path
from typing import Annotated, Any

from durable_flow import END, Blackboard, Workflow, WorkflowBuilder, add, append

IO_SECONDS = 0.020
BRANCHES = ("fetch_a", "fetch_b", "fetch_c")


class Job(Blackboard):
    n: int = 0
    parts: Annotated[list[str], append] = []
    total: Annotated[int, add] = 0
    summary: str = ""


def _build(name: str, delay: float) -> Workflow:
    b = WorkflowBuilder(name, state=Job)

    async def pause() -> None:
        if delay:
            await asyncio.sleep(delay)

    async def plan(state: Job) -> dict[str, Any]:
        await pause()
        return {"total": 1}

    def fetch(branch: str) -> Any:
        async def node(state: Job) -> dict[str, Any]:
            await pause()
            return {"parts": [f"{branch}:{state.n}"], "total": 1}
        return node

    async def merge(state: Job) -> dict[str, Any]:
        await pause()
        return {"summary": ",".join(sorted(state.parts))}

    b.add_node("plan", plan)
    for branch in BRANCHES:
        b.add_node(branch, fetch(branch))
        b.add_edge("plan", branch)
    b.add_node("merge", merge)
    b.add_fan_in(list(BRANCHES), "merge")
    b.add_edge("merge", END)
    b.set_entry("plan")
    return b.build()


def _wait_for_gate() -> None:
    gate = os.environ.get("FLEET_GATE")
    if not gate:
        return
    # Imported by the worker only once it opens the store, after the gate: ~0.2 s of
    # CPU per process that would otherwise land inside the measurement.
    for module in ("asyncpg", "durable_flow.store.postgres._postgres", "durable_flow.store.sqlite._sqlite"):
        importlib.import_module(module)

    Path(f"{gate}.{os.getpid()}").touch()
    while not Path(gate).exists():
        time.sleep(0.002)


io = _build("fleet_io", IO_SECONDS)
cpu = _build("fleet_cpu", 0.0)
_wait_for_gate()
