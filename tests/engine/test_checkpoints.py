"""A thread's checkpoint rows: the first writes every channel, a later one what changed."""

from __future__ import annotations

from typing import Annotated, Any

from durable_flow import Blackboard, RunStatus, WorkflowBuilder, append
from durable_flow.engine._checkpoints import Place, first_write, next_meta, next_rows
from durable_flow.engine._state import encode_field, input_values
from durable_flow.model._routing import Routed
from durable_flow.model._task_id import TaskId

PLACE = Place("r1", "c0/sub", "sub")


class Board(Blackboard):
    title: str = ""
    kept: str = "same"
    notes: Annotated[list[str], append] = []


def _schema() -> Any:
    b = WorkflowBuilder("rows", state=Board)
    b.add_node("a", lambda s: None)
    b.set_entry("a")
    return b.build().schema


def _routed(*tasks: str) -> Routed:
    return Routed(next_tasks=tuple(TaskId(t) for t in tasks), joins={}, reason=None)


def test_the_first_checkpoint_writes_every_channel() -> None:
    schema = _schema()
    values = input_values(schema, {"title": "t", "notes": ["x", "y"]})
    write, state = first_write(PLACE, schema, values, _routed("a"))
    meta = write.meta
    assert (meta.run_id, meta.thread, meta.namespace) == ("r1", "c0/sub", "sub")
    assert meta.parent_id is None and meta.seq == 0 and meta.status is RunStatus.RUNNING
    assert set(write.values) == {"title", "kept"}  # and every log, messages too
    assert set(write.appends) == {"notes", "messages"}
    assert meta.log_lengths == {"notes": 2, "messages": 0} and meta.next_tasks == ("a",)
    assert state.value_bytes == write.values and state.values["title"] == "t"
    assert first_write(PLACE, schema, values, _routed())[0].meta.status is RunStatus.COMPLETED


def test_a_later_checkpoint_writes_only_the_channels_whose_bytes_changed() -> None:
    schema = _schema()
    values = input_values(schema, {"title": "t", "notes": ["x"]})
    _, state = first_write(PLACE, schema, values, _routed("a"))
    merged = {**state.values, "title": "u", "notes": ["x", "y"]}
    changed = {"title": None, "kept": encode_field("<merge>", "kept", "same")}
    rows = next_rows(state, merged, {}, changed, {"notes": [b'["y"]']})
    assert set(rows.values) == {"title"}  # "kept" was written with the same bytes
    assert rows.value_bytes["title"] == rows.values["title"] and "kept" in rows.value_bytes
    assert rows.appends == {"notes": b'["y"]'}
    assert rows.log_lengths == {"notes": 2, "messages": 0}

    meta = next_meta(PLACE, state.meta, rows, _routed(), superstep=1, status=RunStatus.COMPLETED,
                     source="loop", nodes=("a",), parked=())
    assert meta.parent_id == state.meta.id and meta.seq == 1 and meta.superstep == 1
    assert meta.value_versions == {"title": 1, "kept": 0}
    assert meta.status is RunStatus.COMPLETED and meta.nodes == ("a",)
