"""The workflow of the pause and bulk-retry process tests: ``pausekit:workflow``.

A chain of six nodes, one superstep each. Every execution of a node appends
``run_id node pid time`` to the journal (``PAUSE_JOURNAL``) and takes
``PAUSE_STEP_DELAY`` seconds (default 0.005). While the file named by
``PAUSE_BROKEN`` exists, node ``s1`` raises (a provider outage); removing the
file is the fix.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

from durable_flow import END, Blackboard, WorkflowBuilder

NODES = tuple(f"s{i}" for i in range(6))


class Chain(Blackboard):
    n: int = 0
    done: list[str] = []


def journal(path: Path) -> list[tuple[str, str, int]]:
    """Every node execution recorded: (run id, node, pid), in order."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        run_id, node, pid, _at = line.split()
        out.append((run_id, node, int(pid)))
    return out


def _node(name: str) -> Any:
    async def step(state: Chain, ctx: Any) -> dict[str, Any]:
        with Path(os.environ["PAUSE_JOURNAL"]).open("a") as fh:
            fh.write(f"{ctx.run_id} {name} {os.getpid()} {time.time():.6f}\n")
        await asyncio.sleep(float(os.environ.get("PAUSE_STEP_DELAY", "0.005")))
        broken = os.environ.get("PAUSE_BROKEN")
        if name == "s1" and broken and Path(broken).exists():
            raise RuntimeError("provider down")
        return {"done": [*state.done, name]}

    return step


b = WorkflowBuilder("pausing", state=Chain)
for _name in NODES:
    b.add_node(_name, _node(_name))
b.set_entry(NODES[0])
for _a, _c in zip(NODES, [*NODES[1:], END], strict=True):
    b.add_edge(_a, _c)
workflow = b.build()
