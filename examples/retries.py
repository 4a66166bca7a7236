"""Retries and timeouts: a flaky node retried with backoff, then fixed and resumed.

``fetch`` fails twice and succeeds on its third attempt under a RetryPolicy;
``slow`` times out and is retried; ``strict`` always fails, so the run is
saved as failed; after the "fix" a ``resume`` re-runs only the failed task.

    python examples/retries.py
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from durable_flow import Blackboard, RetryPolicy, RunStatus, Runtime, SqliteStore, WorkflowBuilder


class Job(Blackboard):
    fetched: str = ""
    computed: int = 0
    checked: bool = False


attempts = {"fetch": 0, "slow": 0, "strict": 0}
FIXED = {"strict": False}


async def fetch(state: Job) -> dict[str, Any]:
    attempts["fetch"] += 1
    if attempts["fetch"] < 3:
        raise ConnectionError("flaky network")
    return {"fetched": "payload"}


async def slow(state: Job) -> dict[str, Any]:
    attempts["slow"] += 1
    if attempts["slow"] == 1:
        await asyncio.sleep(1.0)  # longer than the timeout: TimeoutError, retried
    return {"computed": 42}


def strict(state: Job) -> dict[str, Any]:
    attempts["strict"] += 1
    if not FIXED["strict"]:
        raise ValueError("validation rule not met")
    return {"checked": True}


quick = RetryPolicy(max_attempts=3, initial_delay=0.01, jitter=False)
b = WorkflowBuilder("retries", state=Job)
b.add_node("fetch", fetch, retry=quick)
b.add_node("slow", slow, retry=quick, timeout=0.2)
b.add_node("strict", strict)
b.add_node("start", lambda s: None)
b.set_entry("start")
for n in ("fetch", "slow", "strict"):
    b.add_edge("start", n)
workflow = b.build()


async def main(db: Path = Path("retries.db")) -> dict[str, int]:
    """Fail, fix, resume; returns how often each node ran."""
    async with Runtime(SqliteStore(db)) as rt:
        result = await rt.run(workflow, {})
        assert result.status is RunStatus.FAILED and result.error is not None
        print(f"failed in {result.error.node}: {result.error.type}: {result.error.message}")
        FIXED["strict"] = True  # deploy the fix
        result = await rt.resume(workflow, result.run_id)
        print("after the fix:", result.status.value, result.state)
        print("attempts:", attempts)
        return dict(attempts)


if __name__ == "__main__":
    asyncio.run(main())
