"""Crash and resume: a child process is SIGKILLed mid-run, the parent resumes it.

The child counts to 20, one superstep per number, and is killed after the
10th superstep committed. The parent resumes from the head: supersteps 1-10
are not repeated, and the final state equals an uninterrupted run.

    python examples/crash_resume.py
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

from durable_flow import END, Blackboard, RunLockedError, Runtime, SqliteStore, WorkflowBuilder, add, append


class Counter(Blackboard):
    n: Annotated[int, add] = 0
    seen: Annotated[list[int], append] = []


b = WorkflowBuilder("counter", state=Counter)


@b.node()
async def tick(state: Counter, ctx: Any) -> dict[str, Any]:
    if os.environ.get("KILL_AT") == str(ctx.superstep):
        os.kill(os.getpid(), signal.SIGKILL)  # superstep - 1 is committed
    return {"n": 1, "seen": [ctx.superstep]}


b.set_entry("tick")
b.add_switch("tick", [("n < 20", "tick")], default=END)
workflow = b.build()


async def child(db: str) -> None:
    async with Runtime(SqliteStore(db), lease_ttl=0.5) as rt:
        await rt.run(workflow, {}, run_id="counter-run")


async def main(db: Path = Path("crash_resume.db")) -> list[int]:
    """Kill a child at superstep 11, resume here; returns the supersteps seen."""
    env = {**os.environ, "KILL_AT": "11"}
    proc = await asyncio.to_thread(
        subprocess.run, [sys.executable, __file__, "--child", str(db)], env=env, check=False)
    print("child exit code:", proc.returncode, "(-9 is SIGKILL)")
    async with Runtime(SqliteStore(db)) as rt:
        print("committed before the crash:", len(await rt.history("counter-run")) - 1, "supersteps")
        while True:
            try:
                result = await rt.resume(workflow, "counter-run")
                break
            except RunLockedError:
                await asyncio.sleep(0.1)  # the dead child's lease expires soon
        seen: list[int] = list(result.state.seen)  # type: ignore[attr-defined]
        print("final:", result.status.value, "n =", result.state.n, "seen =", seen)  # type: ignore[attr-defined]
        return seen


if __name__ == "__main__":
    if "--child" in sys.argv:
        asyncio.run(child(sys.argv[-1]))
    else:
        asyncio.run(main())
