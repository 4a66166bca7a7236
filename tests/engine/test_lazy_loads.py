"""Loading a head: trusted through digests, typed only where read, in pieces."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from durable_flow import (
    Blackboard,
    CheckpointCorruptedError,
    Message,
    RunStatus,
    Runtime,
    SqliteStore,
    WorkflowBuilder,
)
from durable_flow.engine import _lazy
from durable_flow.engine._lazy import LazyHistory

VALIDATED: list[int] = []


class Chat(Blackboard):
    count: int = 0
    limit: int = 0
    seen: int = -1


def chain(read_history: bool = False) -> Any:
    b = WorkflowBuilder("lazy-loads", state=Chat)

    @b.node()
    async def step(state: Chat, ctx: Any) -> dict[str, Any]:
        if state.count >= state.limit:
            if read_history:
                history = ctx.history
                assert all(type(m) is Message for m in history)
                return {"seen": len(history), "count": state.count + 1}
            ok = await ctx.request({"q": "go on?"}, response_type=bool)
            return {"count": state.count + 1 if ok else state.count}
        said = Message.assistant(f"m{state.count}", tool_calls=[
            {"id": f"c{state.count}", "name": "f", "arguments": {"n": state.count}}],
            metadata={"n": state.count})
        return {"messages": [said], "count": state.count + 1}

    b.set_entry("step")
    b.add_edge("step", "step", when=lambda s: s.count <= s.limit)
    return b.build()


def counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Count every ``Message`` validated or built without validation."""
    seen: list[str] = []
    original = Message.model_validate.__func__  # type: ignore[attr-defined]

    def validate(cls: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append("validate")
        return original(cls, *args, **kwargs)

    built = _lazy._message

    def trusted(d: Any) -> Message:
        seen.append("built")
        return built(d)

    monkeypatch.setattr(Message, "model_validate", classmethod(validate))
    monkeypatch.setattr(_lazy, "_message", trusted)
    return seen


async def test_a_resumed_head_types_only_what_the_next_task_reads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "lazy.db"
    async with Runtime(SqliteStore(db, synchronous="normal")) as rt:
        first = await rt.run(chain(), {"limit": 300}, max_supersteps=400)
        assert first.status is RunStatus.WAITING
        head = (await rt.get_run(first.run_id)).head_checkpoint_id
    seen = counting(monkeypatch)
    from durable_flow.engine._loop import RunContext, ThreadRunner
    from durable_flow.store._protocols import Lease
    async with Runtime(SqliteStore(db)) as rt:
        runner = ThreadRunner(RunContext(rt.store, Lease(first.run_id, "", 0, None), "w",
                                         lambda e: None), chain())  # type: ignore[arg-type]
        state = await runner.load(head)
        # the log is built without validating any message; the history is not built at all
        assert "validate" not in seen and seen.count("built") == 300
        history = state.histories["step"]
        assert type(history) is LazyHistory and not history.built and len(history) == 300
        assert [m.content for m in state.values["messages"]][-1] == "m299"
        assert state.values["messages"][5].tool_calls[0].arguments == {"n": 5}
        seen.clear()
        assert history[299] == state.values["messages"][299] and history.built
        assert "validate" not in seen
        # resume: the node that reads its history sees typed messages
        done = await resume(rt, chain(read_history=True), first.run_id)
        assert done.status is RunStatus.COMPLETED and done.state.seen == 300, done.error


async def resume(rt: Runtime, workflow: Any, run_id: str) -> Any:
    """Answer the run's open request and continue it."""
    (pending,) = [p for p in await rt.pending_requests() if p.run_id == run_id]
    return await rt.resume(workflow, run_id, responses={pending.id: True})


def _edit(db: Path, sql: str, *args: Any) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute(sql, args)


@pytest.mark.parametrize("table", ["log_chunks", "channel_values"])
async def test_an_edited_byte_is_damage_on_resume_and_get_state(tmp_path: Path, table: str) -> None:
    """A byte changed so the row still validates is caught by the digest alone."""
    db = tmp_path / "edit.db"
    async with Runtime(SqliteStore(db, synchronous="normal")) as rt:
        first = await rt.run(chain(), {"limit": 20}, max_supersteps=40)
        assert first.status is RunStatus.WAITING
    if table == "log_chunks":  # one message's text in a merged segment: still a valid message
        _edit(db, "UPDATE log_chunks SET data = CAST(replace(CAST(data AS TEXT), '\"m3\"', "
                  "'\"mX\"') AS BLOB) WHERE channel = 'messages' AND seq = 0")
    else:  # the limit, still an int
        _edit(db, "UPDATE channel_values SET data = CAST('21' AS BLOB) WHERE channel = 'limit'")
    async with Runtime(SqliteStore(db)) as rt:
        with pytest.raises(CheckpointCorruptedError, match="digest"):
            await rt.get_state(first.run_id)
        with pytest.raises(CheckpointCorruptedError, match="digest"):
            await resume(rt, chain(), first.run_id)
        assert (await rt.get_run(first.run_id)).status is RunStatus.WAITING


async def test_rows_without_digests_are_validated_as_before(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    async with Runtime(SqliteStore(db, synchronous="normal")) as rt:
        first = await rt.run(chain(), {"limit": 10}, max_supersteps=40)
        second = await rt.run(chain(), {"limit": 10}, max_supersteps=40)
    _edit(db, "UPDATE checkpoints SET digests = NULL")
    async with Runtime(SqliteStore(db)) as rt:
        snap = await rt.get_state(first.run_id)
        assert snap.values["messages"][-1]["content"] == "m9"
        done = await resume(rt, chain(read_history=True), first.run_id)
        assert done.status is RunStatus.COMPLETED and done.state.seen == 10
    _edit(db, "UPDATE log_chunks SET data = CAST('[{\"role\": 5}]' AS BLOB) "
              "WHERE channel = 'messages' AND seq = 0 AND run_id = ?", second.run_id)
    async with Runtime(SqliteStore(db)) as rt:
        with pytest.raises(CheckpointCorruptedError):
            await resume(rt, chain(), second.run_id)


async def test_a_large_load_lets_other_tasks_run(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A small run's supersteps interleave with a long run's head being built."""
    monkeypatch.setattr(_lazy, "PIECE", 50)
    db = tmp_path / "big.db"
    async with Runtime(SqliteStore(db, synchronous="normal")) as rt:
        big = await rt.run(chain(), {"limit": 2000}, max_supersteps=2100)
        head = (await rt.get_run(big.run_id)).head_checkpoint_id
        events: list[str] = []
        built = _lazy._message

        def trusted(d: Any) -> Message:
            events.append("load")
            return built(d)

        monkeypatch.setattr(_lazy, "_message", trusted)
        small = WorkflowBuilder("small", state=Chat)

        @small.node()
        async def tick(state: Chat) -> dict[str, Any]:
            events.append("tick")
            return {"count": state.count + 1}

        small.set_entry("tick")
        small.add_edge("tick", "tick", when=lambda s: s.count < 2000)
        from durable_flow.engine._loop import RunContext, ThreadRunner
        from durable_flow.store._protocols import Lease
        runner = ThreadRunner(RunContext(rt.store, Lease(big.run_id, "", 0, None), "w",
                                         lambda e: None), chain())  # type: ignore[arg-type]
        running = asyncio.create_task(rt.run(small.build(), {}, max_supersteps=2100))
        while events.count("tick") < 3:
            await asyncio.sleep(0.001)
        await runner.load(head)
        ran = await running
    assert ran.status is RunStatus.COMPLETED and events.count("load") == 2000
    first, last = events.index("load"), len(events) - 1 - events[::-1].index("load")
    # the load was cut into pieces with supersteps of the small run between them
    assert events[first:last].count("tick") >= 5, events[first:last].count("tick")
