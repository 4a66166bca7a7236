"""Workflows with parked tasks (``waits="branch"``), shared by the parked-task tests.

``fork_join``: ``start`` fans out to ``ask`` (one request) and a chain
``w1 -> w2 -> w3``; a fan-in ``[ask, w3] -> join`` ends the run. While ``ask``
waits, the chain runs on; ``join`` waits for ``ask``.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from durable_flow import END, Blackboard, NodeContext, Workflow, WorkflowBuilder, append

Hook = Callable[[NodeContext], Awaitable[None]]


class Board(Blackboard):
    log: Annotated[list[str], append] = []
    answer: str = ""
    joined: bool = False


Waiting = Callable[[Board, NodeContext], Awaitable[str]]


def fork_join(calls: collections.Counter[str] | None = None, *, waits: str = "branch",
              on_w2: Hook | None = None, asks: int = 1, wait: Waiting | None = None,
              delay: float | dict[str, float] = 0.0) -> Workflow:
    """The fork-join workflow; ``on_w2`` runs inside ``w2`` (e.g. answering mid-run).

    ``wait`` replaces what ``ask`` waits for (its result is the answer);
    ``delay`` makes each chain node take that many seconds (or by node name).
    """
    calls = calls if calls is not None else collections.Counter()
    b = WorkflowBuilder("parking", state=Board, waits=waits)  # type: ignore[arg-type]

    def start(state: Board) -> dict[str, Any]:
        calls["start"] += 1
        return {"log": ["start"]}

    async def ask(state: Board, ctx: NodeContext) -> dict[str, Any]:
        calls["ask"] += 1
        if wait is not None:
            answers = [await wait(state, ctx)]
        else:
            answers = [await ctx.request({"question": f"q{i}", "seen": list(state.log)},
                                         response_type=str) for i in range(asks)]
        return {"answer": "+".join(answers), "log": [f"ask saw {len(state.log)}"]}

    def worker(name: str) -> Callable[..., Any]:
        async def work(state: Board, ctx: NodeContext) -> dict[str, Any]:
            calls[name] += 1
            await asyncio.sleep(delay.get(name, 0.0) if isinstance(delay, dict) else delay)
            if name == "w2" and on_w2 is not None:
                await on_w2(ctx)
            return {"log": [name]}
        return work

    def join(state: Board) -> dict[str, Any]:
        calls["join"] += 1
        return {"joined": True, "log": ["join"]}

    b.add_node("start", start).add_node("ask", ask).add_node("join", join)
    for name in ("w1", "w2", "w3"):
        b.add_node(name, worker(name))
    b.set_entry("start")
    b.add_edge("start", "ask").add_edge("start", "w1")
    b.add_edge("w1", "w2").add_edge("w2", "w3")
    b.add_fan_in(["ask", "w3"], "join")
    b.add_edge("join", END)
    return b.build()
