"""Long runs stay cheap: appends grow shared buffers, never copies of the whole log.

The speed itself is measured by ``bench/longrun.py``; these tests pin the
shape: what one merge of a long run copies, and that growing logs in place
changes nothing that anyone else sees.
"""

from __future__ import annotations

import sqlite3
import tracemalloc
from pathlib import Path
from typing import Annotated, Any

import pytest

from durable_flow import (
    Blackboard,
    CheckpointCorruptedError,
    MemoryStore,
    Message,
    RunStatus,
    Runtime,
    SqliteStore,
    StoreError,
    WorkflowBuilder,
    add,
    append,
)
from durable_flow.engine._algo import apply_writes, refers_to_messages
from durable_flow.engine._state import LogGrowth, ThreadState, input_values
from durable_flow.engine._task import TaskResult
from durable_flow.model._clock import utcnow
from durable_flow.model._frozen import FrozenList, LogBuffer
from durable_flow.model._records import RunStatus as Status
from durable_flow.store._protocols import CheckpointMeta

LONG = 10_000


class Notes(Blackboard):
    notes: Annotated[list[str], append] = []
    count: Annotated[int, add] = 0
    kept: Any = None
    other: list[str] = []


def _loop(n: int, **extra: Any) -> Any:
    b = WorkflowBuilder("notes_loop", state=Notes)

    @b.node()
    async def step(state: Notes, ctx: Any) -> dict[str, Any]:
        return {"notes": [f"n{state.count}"], "count": 1,
                "messages": [Message(role="assistant", content=f"m{state.count}")]}

    b.set_entry("step")
    b.add_edge("step", "step", when=lambda s: s.count < n)
    return b.build()


def _state(workflow: Any, notes: list[str]) -> ThreadState:
    meta = CheckpointMeta(id="c0", run_id="r", thread="", namespace="", parent_id=None, seq=0,
                          superstep=0, created_at=utcnow(), status=Status.RUNNING,
                          source="input", next_tasks=("step",))
    values = input_values(workflow.schema, {"notes": notes})
    history = [Message(role="assistant", content=n) for n in notes]
    return ThreadState(meta=meta, values=values, histories={"step": FrozenList(history)})


def _merge(workflow: Any, writes: list[TaskResult], values: dict[str, Any],
           histories: dict[str, Any], grown: LogGrowth) -> None:
    apply_writes(workflow.schema, writes, values, histories, grown,
                 history_refs=refers_to_messages(workflow.schema))


def _write(text: str) -> TaskResult:
    msg = Message(role="assistant", content=text)
    return TaskResult(node="step", kind="done", update={"notes": [text]},
                      encoded={"notes": b'["%s"]' % text.encode()}, history=[msg])


def test_merging_a_superstep_of_a_long_run_copies_only_what_it_appends() -> None:
    workflow = _loop(1)
    st = _state(workflow, [f"note {i}" for i in range(LONG)])
    values, histories = dict(st.values), dict(st.histories)
    _merge(workflow, [_write("first")], values, histories, LogGrowth())  # the one copy, at load
    notes, history = values["notes"], histories["step"]
    assert type(notes) is LogBuffer and type(history) is LogBuffer

    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        _merge(workflow, [_write("second")], values, histories, LogGrowth())
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    # the same buffers, grown by exactly the appended items: nothing of the
    # 10,000 items before was copied (a copy of their pointers alone is 80 kB)
    assert values["notes"] is notes and histories["step"] is history
    assert len(notes) == LONG + 2 and notes[-2:] == ["first", "second"]
    assert len(history) == LONG + 2 and history[-1].content == "second"
    assert peak < 8 * LONG // 4, f"a merge allocated {peak} bytes"


def test_an_undone_merge_leaves_the_logs_as_they_were() -> None:
    workflow = _loop(1)
    st = _state(workflow, ["a", "b"])
    values, histories = dict(st.values), dict(st.histories)
    _merge(workflow, [_write("c")], values, histories, LogGrowth())
    grown = LogGrowth()
    _merge(workflow, [_write("d"), _write("e")], values, histories, grown)
    assert values["notes"] == ["a", "b", "c", "d", "e"]
    grown.undo()
    assert values["notes"] == ["a", "b", "c"]
    assert [m.content for m in histories["step"]] == ["a", "b", "c"]


async def test_a_long_loop_shares_one_buffer_and_ends_exactly_as_stored() -> None:
    seen: list[tuple[int, int]] = []
    b = WorkflowBuilder("shared", state=Notes)

    @b.node()
    async def step(state: Notes, ctx: Any) -> dict[str, Any]:
        seen.append((id(state.notes), len(state.notes)))
        return {"notes": [f"n{state.count}"], "count": 1}

    b.set_entry("step")
    b.add_edge("step", "step", when=lambda s: s.count < 50)
    workflow = b.build()
    async with Runtime(MemoryStore()) as rt:
        result = await rt.run(workflow, {"notes": ["start"]})
        stored = await rt.get_state(result.run_id)
    assert result.status is RunStatus.COMPLETED
    assert [n for _, n in seen] == list(range(1, 51))
    assert len({i for i, _ in seen[1:]}) == 1  # from the second superstep on: one buffer
    assert list(result.state.notes) == stored.values["notes"] == ["start"] + [
        f"n{i}" for i in range(50)]
    with pytest.raises(TypeError):
        result.state.notes.append("x")


async def test_a_log_written_to_another_field_does_not_grow_with_it() -> None:
    """A node keeping the log it saw (whole or nested) keeps it as it was."""
    b = WorkflowBuilder("alias", state=Notes)

    @b.node()
    async def step(state: Notes, ctx: Any) -> dict[str, Any]:
        update: dict[str, Any] = {"notes": [f"n{state.count}"], "count": 1}
        if state.count == 3:
            update["kept"] = {"at": 3, "notes": state.notes}
            update["other"] = state.notes
        return update

    b.set_entry("step")
    b.add_edge("step", "step", when=lambda s: s.count < 8)
    workflow = b.build()
    async with Runtime(MemoryStore()) as rt:
        result = await rt.run(workflow, {})
        stored = await rt.get_state(result.run_id)
    expected = ["n0", "n1", "n2"]
    assert result.state.kept == {"at": 3, "notes": expected} == stored.values["kept"]
    assert result.state.other == expected == stored.values["other"]
    assert len(result.state.notes) == 8


async def test_a_superstep_that_fails_after_appending_reports_the_head_as_stored() -> None:
    """The appends of a merge that did not commit are not in the failed run's state."""
    b = WorkflowBuilder("conflict", state=Notes)
    b.add_node("start", lambda s: {"notes": ["start"]})
    b.add_node("left", lambda s: {"notes": ["left"], "other": ["l"]})
    b.add_node("right", lambda s: {"notes": ["right"], "other": ["r"]})
    b.set_entry("start")
    b.add_edge("start", "left")
    b.add_edge("start", "right")  # both write the last-write-wins field: a conflict
    async with Runtime(MemoryStore()) as rt:
        result = await rt.run(b.build(), {"notes": ["input"]})
        stored = await rt.get_state(result.run_id)
    assert result.status is RunStatus.FAILED
    assert result.error is not None and result.error.type == "ConflictingUpdateError"
    assert list(result.state.notes) == stored.values["notes"] == ["input", "start"]


def _chatty(n: int) -> Any:
    b = WorkflowBuilder("chatty", state=Notes)

    @b.node()
    async def step(state: Notes, ctx: Any) -> dict[str, Any]:
        ctx.remember(Message(role="system", content=f"note {state.count}"))
        return {"count": 1, "messages": [Message(role="user", content=f"q{state.count}"),
                                         Message(role="assistant", content=f"a{state.count}")]}

    b.set_entry("step")
    b.add_edge("step", "step", when=lambda s: s.count < n)
    return b.build()


def _expected_history(upto: int) -> list[str]:
    return [text for i in range(upto) for text in (f"note {i}", f"q{i}", f"a{i}")]


async def test_a_history_refers_to_the_messages_its_node_returned(tmp_path: Path) -> None:
    """Returned messages are stored once; every checkpoint's history reads back exactly."""
    db = tmp_path / "refs.db"
    workflow = _chatty(20)
    async with Runtime(SqliteStore(db, synchronous="normal")) as rt:
        result = await rt.run(workflow, {})
        assert [m.content for m in result.state.messages] == [
            t for i in range(20) for t in (f"q{i}", f"a{i}")]
        for info in await rt.history(result.run_id):
            snap = await rt.get_state(result.run_id, info.id)
            assert [m.content for m in snap.node_histories.get("step", [])] == \
                _expected_history(info.superstep)
        middle = next(c for c in await rt.history(result.run_id) if c.superstep == 9)
        forked = await rt.fork(workflow, result.run_id, middle.id)
        assert forked.status is RunStatus.COMPLETED
        fork_head = await rt.get_state(forked.run_id)
        assert [m.content for m in fork_head.node_histories["step"]] == _expected_history(20)
    with sqlite3.connect(db) as conn:
        chunks = [bytes(r[0]) for r in conn.execute(
            "SELECT data FROM log_chunks WHERE run_id = ? AND channel = 'history:step'",
            (result.run_id,))]
    stored = b"".join(chunks)
    assert b"__df_messages__" in stored and b'"q3"' not in stored and b'"note 3"' in stored


async def test_a_history_reference_outside_the_log_is_reported_as_damage(tmp_path: Path) -> None:
    db = tmp_path / "bad.db"
    async with Runtime(SqliteStore(db, synchronous="normal")) as rt:
        result = await rt.run(_chatty(3), {})
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE log_chunks SET data = CAST(? AS BLOB) "
                     "WHERE channel = 'history:step' AND seq = 1",
                     (b'[{"__df_messages__":[40,2]}]',))
    async with Runtime(SqliteStore(db, synchronous="normal")) as rt:
        with pytest.raises(CheckpointCorruptedError, match="history:step"):
            await rt.get_state(result.run_id)


def test_expanding_references_keeps_order_gaps_and_what_was_remembered() -> None:
    from durable_flow.engine._histories import expand

    log = [f"m{i}" for i in range(10)]
    ref = "__df_messages__"
    # one node's messages, contiguous: one slice; cut to the checkpoint's length
    assert expand([{ref: [0, 2]}, {ref: [2, 3]}], lambda: log, 4) == ["m0", "m1", "m2", "m3"]
    # interleaved with another node's messages (gaps) and remembered items
    items = [{"role": "system"}, {ref: [1, 2]}, {ref: [6, 1]}, {"role": "user"}]
    assert expand(items, lambda: log, 5) == [{"role": "system"}, "m1", "m2", "m6",
                                             {"role": "user"}]
    for bad in ([{ref: [9, 2]}], [{ref: [-1, 1]}], [{ref: [0, "2"]}], [{ref: [0]}]):
        with pytest.raises(ValueError):
            expand(bad, lambda: log, 2)
    with pytest.raises(ValueError):  # shorter than the checkpoint says
        expand([{ref: [0, 1]}], lambda: log, 2)


_QUIET_RUN = """
import asyncio, json
from durable_flow import MemoryStore, Message, Runtime, WorkflowBuilder
from durable_flow.model import _records
from durable_flow.runtime.observability._tracing import otel_available, run_trace

built = []
original = _records.Event.__init__
def counting(self, *args, **kwargs):
    built.append(1)
    original(self, *args, **kwargs)
_records.Event.__init__ = counting

b = WorkflowBuilder("quiet")
b.add_node("a", lambda s: {"messages": [Message(role="user", content="hi")]})
b.set_entry("a")
async def main():
    async with Runtime(MemoryStore()) as rt:
        assert (await rt.run(b.build(), {})).status.value == "completed"
        plain = len(built)
        kinds = [e.kind async for e in rt.stream(b.build(), {})]
        return plain, len(built) - plain, kinds
plain, streamed, kinds = asyncio.run(main())
print(json.dumps({"plain": plain, "streamed": streamed, "kinds": kinds,
                  "traced": run_trace("r", "w") is not None, "otel": otel_available()}))
"""


@pytest.mark.process
def test_an_execution_nobody_logs_traces_or_streams_builds_no_events() -> None:
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _QUIET_RUN], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    # the plain run built at most its final event; the streamed one every event
    assert seen["plain"] <= 1 and seen["streamed"] >= 4, seen
    assert "node_completed" in seen["kinds"]
    assert seen["otel"] and not seen["traced"]  # the API, but no tracer provider set


class _FlakyCommits(MemoryStore):
    """A store whose next commit fails the way a lost connection does."""

    fail_next = False
    failed = 0

    async def commit(self, commit: Any) -> None:
        if self.fail_next and commit.checkpoint is not None:
            self.fail_next = False
            self.failed += 1
            raise StoreError.lost("PostgreSQL is unreachable (retried for 30s): refused")
        await super().commit(commit)


async def test_a_store_error_in_a_commit_stops_the_run_like_a_crash_never_fails_it() -> None:
    """The store's trouble is not the workflow's: the run stays resumable."""
    store = _FlakyCommits()
    steps: list[int] = []
    b = WorkflowBuilder("flaky", state=Notes)

    @b.node()
    async def step(state: Notes, ctx: Any) -> dict[str, Any]:
        await ctx.step("work", steps.append, state.count)
        if state.count == 2 and not store.failed:
            store.fail_next = True
        return {"notes": [f"n{state.count}"], "count": 1}

    b.set_entry("step")
    b.add_edge("step", "step", when=lambda s: s.count < 5)
    workflow = b.build()
    async with Runtime(store) as rt:
        with pytest.raises(StoreError):
            await rt.run(workflow, {}, run_id="flaky")
        info = (await rt.list_runs())[0]
        assert info.status is RunStatus.RUNNING and info.error is None
        result = await rt.resume(workflow, "flaky")
    assert result.status is RunStatus.COMPLETED
    assert list(result.state.notes) == [f"n{i}" for i in range(5)]
    assert steps == [0, 1, 2, 3, 4]  # the recorded step of the lost superstep is not run again
