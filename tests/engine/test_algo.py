"""The pure planning of a superstep: writes merged through the reducers, then routed."""

from __future__ import annotations

from typing import Annotated, Any

import pytest

from durable_flow import Blackboard, ConflictingUpdateError, Message, WorkflowBuilder, add, append
from durable_flow.engine._algo import apply_writes, next_tasks, refers_to_messages
from durable_flow.engine._state import LogGrowth, input_values
from durable_flow.engine._task import TaskResult
from durable_flow.model._frozen import LogBuffer
from durable_flow.model._task_id import TaskId


class Board(Blackboard):
    title: str = ""
    count: Annotated[int, add] = 0
    notes: Annotated[list[str], append] = []


def _workflow() -> Any:
    b = WorkflowBuilder("plan", state=Board)
    for name in ("a", "b", "big", "small"):
        b.add_node(name, lambda s: None)
    b.set_entry("a")
    b.add_edge("a", "big", when=lambda s: s.count > 5)
    b.add_edge("a", "small", when=lambda s: s.count <= 5)
    b.add_edge("small", "b")
    return b.build()


def _done(node: str, **update: Any) -> TaskResult:
    encoded = {k: repr(v).encode() for k, v in update.items()}  # the task's own bytes
    return TaskResult(node=TaskId(node), kind="done", update=update, encoded=encoded)


def _merge(wf: Any, writes: list[TaskResult], values: dict[str, Any],
           histories: dict[str, Any] | None = None, grown: LogGrowth | None = None) -> Any:
    return apply_writes(wf.schema, writes, values, histories if histories is not None else {},
                        grown or LogGrowth(), history_refs=refers_to_messages(wf.schema))


def test_writes_merge_through_each_fields_reducer_in_task_order() -> None:
    wf = _workflow()
    values = input_values(wf.schema, {"count": 1, "notes": ["x"]})
    changed, appended = _merge(wf, [_done("a", count=2, notes=["y"]),
                                    _done("b", count=3, notes=["z"], title="t")], values)
    assert values["count"] == 6 and values["title"] == "t"
    assert values["notes"] == ["x", "y", "z"] and type(values["notes"]) is LogBuffer
    # a last-write-wins field keeps the task's bytes; a reducer's result is encoded later
    assert changed == {"count": None, "title": b"'t'"}
    assert appended == {"notes": [b"['y']", b"['z']"]}


def test_two_writers_of_a_last_write_wins_field_conflict() -> None:
    wf = _workflow()
    values = input_values(wf.schema, {})
    with pytest.raises(ConflictingUpdateError) as err:
        _merge(wf, [_done("a", title="one"), _done("b", title="two")], values)
    assert "a" in str(err.value) and "b" in str(err.value) and "title" in str(err.value)


def test_a_task_history_is_appended_to_its_node_and_can_be_undone() -> None:
    wf = _workflow()
    values = input_values(wf.schema, {})
    histories: dict[str, Any] = {}
    first = _done("a")
    first.history = [Message(role="assistant", content="hi")]
    first.history_bytes = b'[{"role":"assistant","content":"hi"}]'
    _merge(wf, [first], values, histories)
    grown = LogGrowth()
    _, appended = _merge(wf, [first], values, histories, grown)
    assert [m.content for m in histories["a"]] == ["hi", "hi"]
    assert appended == {"history:a": [first.history_bytes]}
    grown.undo()
    assert [m.content for m in histories["a"]] == ["hi"]


def test_next_tasks_follow_the_conditions_over_the_merged_state() -> None:
    wf = _workflow()
    for count, expected in ((9, "big"), (2, "small")):
        state = wf.schema.build(input_values(wf.schema, {"count": count}))
        routed = next_tasks(wf, state, [_done("a")], {})
        assert routed.next_tasks == (TaskId(expected),)


def test_a_command_goto_overrides_the_edges() -> None:
    wf = _workflow()
    state = wf.schema.build(input_values(wf.schema, {"count": 9}))
    write = _done("a")
    write.goto = ("small",)
    assert next_tasks(wf, state, [write], {}).next_tasks == (TaskId("small"),)
