"""``ctx.run_input()`` reads the thread's input checkpoint, not every checkpoint of the run."""

from __future__ import annotations

from typing import Any

import pytest

from durable_flow import END, Blackboard, NodeContext, RunStatus, Runtime, WorkflowBuilder


class Counter(Blackboard):
    count: int = 0
    limit: int = 0
    topic: str = ""


def chain(seen: list[dict[str, Any]]) -> Any:
    b = WorkflowBuilder("run-input", state=Counter)

    @b.node()
    async def step(state: Counter, ctx: NodeContext) -> dict[str, Any]:
        if state.count == state.limit - 1:  # the last superstep of a long run
            seen.append(await ctx.run_input())
        return {"count": state.count + 1, "topic": f"changed {state.count}"}

    b.set_entry("step")
    b.add_switch("step", [("count < limit", "step")], default=END)
    return b.build()


async def test_run_input_of_a_long_run_reads_one_checkpoint(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    store = rt.store
    read: list[str] = []
    listing, loading = store.list_checkpoints, store.load_checkpoint

    async def list_checkpoints(run_id: str, **kw: Any) -> Any:
        page = await listing(run_id, **kw)
        read.extend(m.id for m in page)
        return page

    async def load_checkpoint(run_id: str, checkpoint_id: str) -> Any:
        read.append(checkpoint_id)
        return await loading(run_id, checkpoint_id)

    seen: list[dict[str, Any]] = []
    wf = chain(seen)
    # the run's input checkpoint is read once the last superstep asks for it
    monkeypatch.setattr(store, "list_checkpoints", list_checkpoints)
    monkeypatch.setattr(store, "load_checkpoint", load_checkpoint)
    result = await rt.run(wf, {"limit": 300, "topic": "tides"}, max_supersteps=301)
    assert result.status is RunStatus.COMPLETED, result.error
    assert seen == [{"count": 0, "limit": 300, "topic": "tides", "messages": []}]
    during = list(read)
    [first] = [c for c in await rt.history(result.run_id, limit=1000) if c.superstep == 0]
    assert during == [first.id]  # one checkpoint read, not 300
