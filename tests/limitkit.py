"""The workflow the limit process tests run: ``limitkit:workflow``.

Its one node uses the limit ``api``; each call appends ``run_id pid start|end
time`` to the journal (``LIMIT_JOURNAL``), so a test counts how many calls
ran at once, and when they started, across worker processes. A call takes
``LIMIT_CALL_SECONDS`` (default 0.1).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

from durable_flow import END, Blackboard, WorkflowBuilder


class Call(Blackboard):
    n: int = 0


def note(run_id: str, phase: str) -> None:
    """Append one line to the journal, durably."""
    with Path(os.environ["LIMIT_JOURNAL"]).open("a") as fh:
        fh.write(f"{run_id} {os.getpid()} {phase} {time.time():.6f}\n")
        fh.flush()
        os.fsync(fh.fileno())


def spans(path: Path, *, dead: dict[int, float] | None = None) -> list[tuple[float, float]]:
    """Each call's (start, end); a call whose process died ends when it died (``dead``)."""
    open_calls: dict[tuple[str, int], float] = {}
    out: list[tuple[float, float]] = []
    for line in path.read_text().splitlines():
        run_id, pid, phase, at = line.split()
        key = (run_id, int(pid))
        if phase == "start":
            open_calls[key] = float(at)
        else:
            out.append((open_calls.pop(key), float(at)))
    for (_, pid), began in open_calls.items():
        out.append((began, (dead or {}).get(pid, float("inf"))))
    return out


def peak(calls: list[tuple[float, float]]) -> int:
    """The most calls running at one moment."""
    edges = sorted([(s, 1) for s, _ in calls] + [(e, -1) for _, e in calls])
    now = top = 0
    for _, step in edges:
        now += step
        top = max(top, now)
    return top


b = WorkflowBuilder("limited", state=Call)


@b.node(uses=("api",))
async def call(state: Call, ctx: Any) -> dict[str, Any]:
    note(ctx.run_id, "start")
    try:
        await asyncio.sleep(float(os.environ.get("LIMIT_CALL_SECONDS", "0.1")))
    finally:  # a call cancelled (its run's lease lost) ends here too, before its grant returns
        note(ctx.run_id, "end")
    return {"n": state.n + 1}


b.set_entry("call").add_edge("call", END)
workflow = b.build()
