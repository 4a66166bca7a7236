"""``get_state`` decodes straight from the stored JSON: it builds no model instance."""

from __future__ import annotations

import gc
from typing import Any

import pytest
from pydantic import field_validator

from durable_flow import (
    END,
    Blackboard,
    CheckpointCorruptedError,
    Message,
    RunStatus,
    Runtime,
    WorkflowBuilder,
)
from durable_flow.model._messages import MessageList

VALIDATED: list[int] = []


class Counted(Blackboard):
    count: int = 0
    limit: int = 0

    @field_validator("count")
    @classmethod
    def _seen(cls, value: int) -> int:
        VALIDATED.append(value)
        return value


def chain() -> Any:
    b = WorkflowBuilder("plain-state", state=Counted)

    @b.node()
    def step(state: Counted) -> dict[str, Any]:
        call = {"id": f"c{state.count}", "name": "lookup", "arguments": {"n": state.count}}
        said = Message.assistant(f"message {state.count}", tool_calls=[call],
                                 metadata={"n": state.count})
        return {"messages": [said], "count": state.count + 1}

    b.set_entry("step")
    b.add_switch("step", [("count < limit", "step")], default=END)
    return b.build()


def live_messages() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, Message))


async def test_get_state_of_a_long_run_builds_no_model(rt: Runtime) -> None:
    result = await rt.run(chain(), {"limit": 200}, max_supersteps=201)
    assert result.status is RunStatus.COMPLETED
    run_id = result.run_id
    del result
    VALIDATED.clear()
    before = live_messages()
    snap = await rt.get_state(run_id)
    middle = await rt.get_state(run_id, (await rt.history(run_id, limit=101))[-1].id)
    assert live_messages() == before  # no Message built for either snapshot
    assert VALIDATED == []  # nor the blackboard: its validators never ran
    assert snap.values["count"] == 200
    assert snap.values["messages"][-1]["tool_calls"][0]["arguments"] == {"n": 199}
    assert len(snap.node_histories["step"]) == 200
    assert len(middle.node_histories["step"]) == middle.values["count"]
    # read, a history item is a Message, built then (and kept)
    last = snap.node_histories["step"][-1]
    assert isinstance(last, Message) and last.content == "message 199"
    assert last.tool_calls[0].arguments == {"n": 199}
    assert snap.node_histories["step"][-1] is last
    assert [m.content for m in middle.node_histories["step"]] == [
        f"message {i}" for i in range(middle.values["count"])]


async def test_get_state_of_an_older_checkpoint_reads_its_children_not_the_runs_history(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch,
) -> None:
    result = await rt.run(chain(), {"limit": 200}, max_supersteps=201)
    pages = await rt.history(result.run_id, limit=101)
    calls: list[str] = []
    for name in ("list_checkpoints", "child_checkpoints"):
        real = getattr(rt.store, name)

        async def counted(*args: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
            calls.append(_name)
            return await _real(*args, **kw)
        monkeypatch.setattr(rt.store, name, counted)
    middle = await rt.get_state(result.run_id, pages[-1].id)
    assert middle.checkpoint_id == pages[-1].id and middle.values["count"] == 100
    # the checkpoint's children, a row or two of an index: never the run's 200 checkpoints
    assert "list_checkpoints" not in calls
    assert 1 <= calls.count("child_checkpoints") <= 2, calls


def test_a_damaged_history_item_raises_when_read() -> None:
    def damaged(exc: Exception) -> Exception:
        return CheckpointCorruptedError("run-1", "cp-1", str(exc))

    history = MessageList([{"role": "user", "content": "hi"}, {"role": "nobody"}], damaged)
    assert len(history) == 2 and history[0].content == "hi"
    assert history.plain() == [{"role": "user", "content": "hi"}, {"role": "nobody"}]
    with pytest.raises(CheckpointCorruptedError) as err:
        list(history)
    assert err.value.run_id == "run-1" and err.value.checkpoint_id == "cp-1"


@pytest.mark.parametrize("collecting", [True, False])
async def test_a_referring_history_is_expanded_a_row_at_a_time_with_collections_paused(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch, collecting: bool) -> None:
    # A history's references are tracked objects (a dict holding a list): each
    # row is decoded and expanded before the next is decoded, with automatic
    # collections paused, so none of them is alive when a collection may run.
    from durable_flow.engine import _lazy

    result = await rt.run(chain(), {"limit": 60}, max_supersteps=61)
    assert result.status is RunStatus.COMPLETED
    head = (await rt.get_run(result.run_id)).head_checkpoint_id
    loaded = await rt.store.load_checkpoint(result.run_id, head)
    rows = loaded.logs["history:step"]
    assert len(rows) > 1 and all(b"__df_messages__" in bytes(r) for r in rows)
    events: list[tuple[str, bool]] = []
    decode, expand = _lazy.decode, _lazy.expand

    def spy_decode(data: Any) -> Any:
        if b"__df_messages__" in bytes(data):
            events.append(("decode", gc.isenabled()))
        return decode(data)

    def spy_expand(*args: Any, **kw: Any) -> Any:
        events.append(("expand", gc.isenabled()))
        return expand(*args, **kw)

    monkeypatch.setattr(_lazy, "decode", spy_decode)
    monkeypatch.setattr(_lazy, "expand", spy_expand)
    if not collecting:
        gc.disable()
    try:
        snap = await rt.get_state(result.run_id)
        assert gc.isenabled() is collecting  # restored as it was, off left off
    finally:
        gc.enable()
    history = snap.node_histories["step"]
    assert isinstance(history, MessageList)
    assert [m["content"] for m in history.plain()] == [f"message {i}" for i in range(60)]
    assert events == [("decode", False), ("expand", False)] * len(rows)
