"""The workflow the per-key concurrency process tests run: ``keykit:workflow``.

``max_runs_per_key=1``: workers run one run of a ``concurrency_key`` at a time.
Its one node appends ``run_id pid start|end time`` to the journal
(``KEY_JOURNAL``) around a call of ``KEY_CALL_SECONDS`` (default 0.2); the
tests name runs ``<key>-<n>`` (``none-<n>`` for runs without a key), so the
journal tells which key each call was of.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

from durable_flow import END, Blackboard, WorkflowBuilder


class Job(Blackboard):
    done: bool = False


def note(run_id: str, phase: str) -> None:
    """Append one line to the journal, durably."""
    with Path(os.environ["KEY_JOURNAL"]).open("a") as fh:
        fh.write(f"{run_id} {os.getpid()} {phase} {time.time():.6f}\n")
        fh.flush()
        os.fsync(fh.fileno())


def calls(path: Path) -> dict[str, tuple[float, float]]:
    """Each run's call, (start, end), by run id (a run called twice would fail the test)."""
    started: dict[str, float] = {}
    out: dict[str, tuple[float, float]] = {}
    for line in path.read_text().splitlines():
        run_id, _, phase, at = line.split()
        if phase == "start":
            assert run_id not in started, f"{run_id} started twice"
            started[run_id] = float(at)
        else:
            out[run_id] = (started[run_id], float(at))
    return out


b = WorkflowBuilder("keyed", state=Job, max_runs_per_key=1)


@b.node()
async def work(state: Job, ctx: Any) -> dict[str, Any]:
    note(ctx.run_id, "start")
    await asyncio.sleep(float(os.environ.get("KEY_CALL_SECONDS", "0.2")))
    note(ctx.run_id, "end")
    return {"done": True}


b.set_entry("work").add_edge("work", END)
workflow = b.build()
