"""An escalating approval, and the child process that dies right after its escalation.

Started as ``python tests/crashkit_approvals.py DB RUN_ID``: it resumes the
run (whose deadline has passed: the claim records the escalation and its
notification) and SIGKILLs itself as soon as that claim returned, before any
notifier could have been called.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from crashkit_waits import die, open_store

from durable_flow import END, Blackboard, RunLockedError, Runtime, WorkflowBuilder

WINDOW = 2.0  # seconds, each deadline (the second must outlast the dead child's lease)


class Expense(Blackboard):
    approved: bool | None = None


def escalating() -> Any:
    """One request for alice that escalates to the manager role at its deadline."""
    b = WorkflowBuilder("escalating", state=Expense)

    @b.node()
    async def approve(state: Expense, ctx: Any) -> dict[str, Any]:
        answer = await ctx.request({"question": "Approve 900 EUR?"}, bool, assignees=["alice"],
                                   timeout=WINDOW, escalate_to=["role:manager"])
        return {"approved": answer}

    b.set_entry("approve")
    b.add_edge("approve", END)
    return b.build()


async def resume_when_free(rt: Runtime, wf: Any, run_id: str) -> Any:
    """Resume, waiting out a dead child's lease (it expires after its lease_ttl)."""
    for _ in range(100):
        try:
            return await rt.resume(wf, run_id)
        except RunLockedError:
            await asyncio.sleep(0.1)
    raise AssertionError("the dead process' lease never expired")


async def child(db: str, run_id: str) -> None:
    """Resume the run past its deadline; die in the node."""
    store = open_store(db)
    claim = store.claim

    async def claim_then_die(*args: Any, **kwargs: Any) -> Any:
        await claim(*args, **kwargs)
        die()  # the claim that escalated committed; nobody was told yet

    store.claim = claim_then_die  # type: ignore[method-assign]
    async with Runtime(store, lease_ttl=0.5) as rt:
        await rt.resume(escalating(), run_id)


if __name__ == "__main__":
    asyncio.run(child(*sys.argv[1:3]))
