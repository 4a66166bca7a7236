"""A workflow with a parked task, and the child process that runs it and kills itself.

Started as ``python tests/crashkit_parked.py DB RUN_ID`` (DB a SQLite path or a
postgresql:// URL); with SHAPE=nested, ``ask`` is a sub-workflow whose inner
node asks. It SIGKILLs itself at CRASH_POINT:

* ``parked``: right after the checkpoint that parks ``ask`` is saved;
* ``answered``: inside ``w2``, right after it answered ``ask``'s request
  while the run executes (the answer is recorded, the barrier not reached);
* ``rerun``: inside ``ask`` run again with its answer, before it returns;
* ``merged``: right after the checkpoint that merged ``ask``'s update.

Nodes append one line per execution to CRASH_LOG (``charge`` once per side
effect, fsynced), so the parent counts what ran.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Annotated, Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from crashkit_waits import die, open_store, record

from durable_flow import END, Blackboard, NodeContext, Runtime, WorkflowBuilder, append

POINT = os.environ.get("CRASH_POINT", "")
NESTED = os.environ.get("SHAPE") == "nested"
REQUEST = "ask@2/approve@1#0" if NESTED else "ask@2#0"
#: the runtime ``w2`` answers through (the child's, or the parent test's)
ANSWERING: list[Runtime] = []


class Job(Blackboard):
    log: Annotated[list[str], append] = []
    answer: str = ""
    receipt: str = ""
    seen: str = ""
    joined: bool = False


async def ask(state: Job, ctx: NodeContext) -> dict[str, Any]:
    """Charge once (a recorded step), ask, and say how much of the log it saw."""
    record("ask")

    def charge() -> str:
        record("charge")
        return "paid"

    receipt = await ctx.step("charge", charge)
    answer = await ctx.request({"question": "ship?"}, response_type=str)
    if POINT == "rerun":
        die()
    return {"answer": answer, "receipt": receipt, "seen": f"saw {len(state.log)}"}


def parked_job() -> Any:
    """start -> ask (charges once, asks) and w1 -> w2 (answers ask) -> w3; [ask, w3] -> join."""
    b = WorkflowBuilder("crash-parked", state=Job, waits="branch")

    @b.node()
    async def start(state: Job) -> dict[str, Any]:
        record("start")
        return {"log": ["start"]}

    if NESTED:
        inner = WorkflowBuilder("crash-parked-inner", state=Job)
        inner.add_node("approve", ask).set_entry("approve").add_edge("approve", END)
        b.add_subworkflow("ask", inner.build(), inputs=["log"],
                          outputs=["answer", "receipt", "seen"])
    else:
        b.add_node("ask", ask)

    def chain(name: str) -> Any:
        async def work(state: Job, ctx: NodeContext) -> dict[str, Any]:
            record(name)
            if name == "w2":
                await ANSWERING[0].respond(ctx.run_id, {REQUEST: "yes"})
                if POINT == "answered":
                    die()
            return {"log": [name]}
        return work

    @b.node()
    async def join(state: Job) -> dict[str, Any]:
        record("join")
        return {"joined": True, "log": ["join"]}

    for name in ("w1", "w2", "w3"):
        b.add_node(name, chain(name))
    b.set_entry("start").add_edge("start", "ask").add_edge("start", "w1")
    b.add_edge("w1", "w2").add_edge("w2", "w3").add_fan_in(["ask", "w3"], "join")
    b.add_edge("join", END)
    return b.build()


async def child(db: str, run_id: str) -> None:
    """Start the run; die at CRASH_POINT."""
    async with Runtime(open_store(db), lease_ttl=3.0) as rt:
        ANSWERING[:] = [rt]
        async for event in rt.stream(parked_job(), {}, run_id=run_id):
            if event.kind != "checkpoint_saved":
                continue
            nodes = event.data.get("nodes", []) if event.namespace == "" else []
            if (POINT == "parked" and event.superstep == 2 and event.namespace == "") \
                    or (POINT == "merged" and "ask" in nodes):
                die()


if __name__ == "__main__":
    asyncio.run(child(*sys.argv[1:3]))
