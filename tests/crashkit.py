"""Workflows for the crash tests, and the child process that runs and kills itself.

The child is started as ``python tests/crashkit.py DB RUN_ID SCENARIO POINT LOGFILE``;
it runs the scenario's workflow on the SQLite file and SIGKILLs itself at the
chosen point. Nodes append one line per execution to LOGFILE, so the parent
can count what ran.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
from pathlib import Path
from typing import Annotated, Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from durable_flow import (
    END,
    Blackboard,
    Command,
    RetryPolicy,
    Runtime,
    Send,
    WorkflowBuilder,
    add,
    append,
)
from durable_flow.store.sqlite._sqlite import SqliteStore

LOG = Path(os.environ["CRASH_LOG"]) if os.environ.get("CRASH_LOG") else None
POINT = os.environ.get("CRASH_POINT", "")


def record(line: str) -> None:
    """Append one execution record (flushed and fsynced before going on)."""
    if LOG is None:
        return
    with LOG.open("a") as fh:
        fh.write(line + "\n")
        fh.flush()
        os.fsync(fh.fileno())


async def saved_siblings(run_id: str, count: int) -> None:
    """Wait until ``count`` task writes of the run are committed (read on our own connection)."""
    db = sys.argv[1]
    for _ in range(1000):
        with sqlite3.connect(db) as conn:
            (n,) = conn.execute("SELECT count(*) FROM task_writes WHERE run_id = ?",
                                (run_id,)).fetchone()
        if n >= count:
            return
        await asyncio.sleep(0.01)
    raise RuntimeError("the siblings' task writes never appeared")


def die() -> None:
    """Die like a power cut: no cleanup, no flush."""
    os.kill(os.getpid(), signal.SIGKILL)


class Work(Blackboard):
    log: Annotated[list[str], append] = []
    count: Annotated[int, add] = 0
    rounds: int = 6


def _node(name: str) -> Any:
    async def fn(state: Work, ctx: Any) -> dict[str, Any]:
        if f"after_commit:{ctx.superstep - 1}" == POINT:
            die()  # superstep - 1 is committed; nothing of this one has happened
        record(f"{name}@{ctx.superstep}")
        if f"inside:{name}:{ctx.superstep}" == POINT:
            die()
        if f"sibling:{name}" == POINT:
            await saved_siblings(ctx.run_id, 2)  # the fast siblings' writes are committed
            die()
        return {"log": [f"{name}@{ctx.superstep}"], "count": 1}

    fn.__name__ = name
    return fn


def parallel_workflow() -> Any:
    """start -> a, b, c (fan-out) -> join -> loop (until count reaches rounds) -> END."""
    b = WorkflowBuilder("crash-parallel", state=Work)
    for name in ("start", "a", "b", "c", "join", "loop"):
        b.add_node(name, _node(name))
    b.set_entry("start")
    for name in ("a", "b", "c"):
        b.add_edge("start", name)
    b.add_fan_in(["a", "b", "c"], "join")
    b.add_edge("join", "loop")
    b.add_switch("loop", [(lambda s: s.count < s.rounds + 4, "loop")], default=END)
    return b.build()


class Approval(Blackboard):
    draft: str = ""
    approved: bool = False
    published: int = 0


def approval_workflow() -> Any:
    """write -> approve (asks a person) -> publish (a durable step)."""
    b = WorkflowBuilder("crash-approval", state=Approval)

    @b.node()
    async def write(state: Approval, ctx: Any) -> dict[str, Any]:
        record(f"write@{ctx.superstep}")
        return {"draft": "hello"}

    @b.node()
    async def approve(state: Approval, ctx: Any) -> dict[str, Any]:
        record(f"approve@{ctx.superstep}")
        ok = await ctx.request({"draft": state.draft}, response_type=bool)
        return {"approved": ok}

    attempts = {"publish": 0}

    @b.node(retry=RetryPolicy(max_attempts=3, initial_delay=0.01, jitter=False))
    async def publish(state: Approval, ctx: Any) -> dict[str, Any]:
        record(f"publish@{ctx.superstep}")
        attempts["publish"] += 1

        def side_effect() -> int:
            record("SIDE-EFFECT")
            return 1

        n = await ctx.step("publish", side_effect)
        if attempts["publish"] == 1:
            raise ConnectionError("the feed is down")  # retried: the step is not redone
        if POINT == "after_step":
            die()
        return {"published": n}

    b.set_entry("write")
    b.add_edge("write", "approve")
    b.add_edge("approve", "publish", when="approved")
    b.add_edge("publish", END)
    return b.build()


class Inner(Blackboard):
    topic: str = ""
    steps: Annotated[list[str], append] = []
    answer: str = ""


class Outer(Blackboard):
    topic: str = ""
    result: str = ""
    trail: Annotated[list[str], append] = []


def nested_workflow() -> Any:
    """outer: prep -> review (inner: s1 -> s2 -> s3 -> s4) -> done."""
    ib = WorkflowBuilder("crash-inner", state=Inner)
    names = ["s1", "s2", "s3", "s4"]
    for i, name in enumerate(names):
        def make(n: str, last: bool) -> Any:
            async def fn(state: Inner, ctx: Any) -> dict[str, Any]:
                record(f"{ctx.node}@{ctx.superstep}")
                if f"inside:{ctx.node}" == POINT:
                    die()
                out: dict[str, Any] = {"steps": [n]}
                if last:
                    out["answer"] = f"{state.topic}:{'+'.join([*state.steps, n])}"
                return out
            return fn
        ib.add_node(name, make(name, i == len(names) - 1))
        if i:
            ib.add_edge(names[i - 1], name)
    ib.set_entry("s1")
    inner = ib.build()

    ob = WorkflowBuilder("crash-outer", state=Outer)

    @ob.node()
    async def prep(state: Outer, ctx: Any) -> dict[str, Any]:
        record(f"prep@{ctx.superstep}")
        return {"trail": ["prep"]}

    @ob.node()
    async def done(state: Outer, ctx: Any) -> dict[str, Any]:
        record(f"done@{ctx.superstep}")
        return {"trail": ["done"]}

    ob.add_subworkflow("review", inner, inputs=["topic"], outputs={"result": "answer"})
    ob.set_entry("prep")
    ob.add_edge("prep", "review")
    ob.add_edge("review", "done")
    return ob.build()


class Level(Blackboard):
    text: str = ""
    ok: bool = False
    trail: Annotated[list[str], append] = []


def deep_workflow() -> Any:
    """Three levels: top -> review -> legal -> approve (asks a person)."""
    lb = WorkflowBuilder("deep-legal", state=Level)

    @lb.node()
    async def approve(state: Level, ctx: Any) -> dict[str, Any]:
        record(f"{ctx.node}@{ctx.superstep}")
        ok = await ctx.request({"text": state.text}, response_type=bool)
        return {"ok": ok, "trail": ["approved" if ok else "rejected"]}

    lb.set_entry("approve")
    rb = WorkflowBuilder("deep-review", state=Level)
    rb.add_node("read", lambda s: {"trail": ["read"]})
    rb.add_subworkflow("legal", lb.build(), inputs=["text"], outputs=["ok"])
    rb.set_entry("read")
    rb.add_edge("read", "legal")
    tb = WorkflowBuilder("deep-top", state=Level)
    tb.add_node("write", lambda s: {"text": "terms", "trail": ["write"]})
    tb.add_subworkflow("review", rb.build(), inputs=["text"], outputs=["ok"])
    tb.set_entry("write")
    tb.add_edge("write", "review")
    return tb.build()


class Items(Blackboard):
    items: list[int] = []
    squares: Annotated[list[int], append] = []
    total: int = 0


def map_workflow() -> Any:
    """split -> square[i] (one Send per item) -> total."""
    b = WorkflowBuilder("crash-map", state=Items)

    @b.node(goto=["square"])
    async def split(state: Items, ctx: Any) -> Command:
        record(f"split@{ctx.superstep}")
        return Command(goto=[Send("square", n) for n in state.items])

    @b.node(arg_type=int, max_concurrency=4)
    async def square(state: Items, ctx: Any) -> dict[str, Any]:
        if f"after_commit:{ctx.superstep - 1}" == POINT:
            die()  # the Sends are committed; no instance has run
        record(f"{ctx.node}@{ctx.superstep}")
        if f"sibling:{ctx.node}" == POINT:
            await saved_siblings(ctx.run_id, len(state.items) - 1)
            die()
        return {"squares": [ctx.arg * ctx.arg]}

    @b.node()
    async def total(state: Items, ctx: Any) -> dict[str, Any]:
        record(f"total@{ctx.superstep}")
        return {"total": sum(state.squares)}

    b.set_entry("split")
    b.add_edge("square", "total")
    return b.build()


SCENARIOS = {"parallel": parallel_workflow, "approval": approval_workflow,
             "nested": nested_workflow, "deep": deep_workflow, "map": map_workflow}
INPUTS: dict[str, dict[str, Any]] = {"parallel": {"rounds": 6}, "approval": {},
                                     "nested": {"topic": "tides"}, "deep": {},
                                     "map": {"items": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]}}


async def child(db: str, run_id: str, scenario: str) -> None:
    """Start the scenario's run, or answer its pending request; die at CRASH_POINT."""
    wf = SCENARIOS[scenario]()
    async with Runtime(SqliteStore(db), lease_ttl=1.0) as rt:
        if await rt.store.get_run(run_id) is None:
            events = rt.stream(wf, INPUTS[scenario], run_id=run_id)
        else:
            snap = await rt.get_state(run_id)
            answers = {req.id: True for req in snap.pending_requests}
            events = rt.stream_resume(wf, run_id, responses=answers)
        async for event in events:
            if event.kind == "run_waiting" and POINT == "waiting":
                die()


if __name__ == "__main__":
    asyncio.run(child(sys.argv[1], sys.argv[2], sys.argv[3]))
