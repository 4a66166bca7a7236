"""The blackboard: reducers, messages, update validation, the frozen snapshot."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import ValidationError

from durable_flow import (
    END,
    Blackboard,
    Message,
    RunStatus,
    Runtime,
    StateUpdateError,
    WorkflowBuilder,
    add,
    append,
    merge,
)
from durable_flow.model._blackboard import schema_for


def keep_max(current: int, update: int) -> int:
    return max(current, update)


def union(current: frozenset[str], update: Any) -> frozenset[str]:
    return frozenset(current) | frozenset(update)


class Board(Blackboard):
    title: str = ""
    count: Annotated[int, add] = 0
    notes: Annotated[list[str], append] = []
    meta: Annotated[dict[str, int], merge] = {}
    best: Annotated[int, keep_max] = 0
    labels: Annotated[frozenset[str], union] = frozenset()


def test_builtin_reducers() -> None:
    assert add(2, 3) == 5
    assert append([1], [2, 3]) == [1, 2, 3]
    assert merge({"a": 1, "b": 1}, {"b": 2, "c": 3}) == {"a": 1, "b": 2, "c": 3}


def test_schema_reads_reducers_from_annotated() -> None:
    schema = schema_for(Board)
    assert schema.fields["title"].is_lww
    assert schema.fields["count"].reducer is add
    assert schema.fields["notes"].is_log
    assert schema.fields["meta"].reducer is merge
    assert schema.fields["best"].reducer is keep_max
    assert schema.fields["messages"].is_log


def _returns(update: dict[str, Any]) -> Any:
    return lambda state: dict(update)


def fan_out_workflow(updates: dict[str, dict[str, Any]]) -> Any:
    """start -> every node in ``updates`` in parallel -> END."""
    b = WorkflowBuilder("board", state=Board)
    b.add_node("start", lambda s: None)
    for nid, update in updates.items():
        b.add_node(nid, _returns(update))
        b.add_edge("start", nid)
        b.add_edge(nid, END)
    b.set_entry("start")
    return b.build()


async def test_reducers_merge_parallel_writes(rt: Runtime) -> None:
    wf = fan_out_workflow({
        "a": {"title": "from a", "count": 2, "notes": ["a1", "a2"], "meta": {"x": 1, "y": 1},
              "best": 7, "labels": ["red"]},
        "b": {"count": 5, "notes": ["b1"], "meta": {"y": 2}, "best": 3, "labels": ["blue"]},
        "c": {"count": -1, "best": 9, "labels": ["red", "green"]},
    })
    result = await rt.run(wf, {"count": 10, "notes": ["n0"], "meta": {"z": 0}})
    assert result.status is RunStatus.COMPLETED
    st = result.state
    assert isinstance(st, Board)
    assert st.title == "from a"
    assert st.count == 16
    assert st.notes == ["n0", "a1", "a2", "b1"]
    assert st.meta == {"z": 0, "x": 1, "y": 2}
    assert st.best == 9
    assert st.labels == frozenset({"red", "blue", "green"})
    # the stored blackboard says the same
    values = (await rt.get_state(result.run_id)).values
    assert values["count"] == 16 and values["notes"] == ["n0", "a1", "a2", "b1"]
    assert values["meta"] == {"z": 0, "x": 1, "y": 2} and values["best"] == 9


async def test_messages_field_is_a_builtin_append_log(rt: Runtime) -> None:
    wf = fan_out_workflow({
        "a": {"messages": [Message.user("hello")]},
        "b": {"messages": [{"role": "assistant", "content": "hi"}]},
    })
    result = await rt.run(wf, {"messages": [Message.system("be brief")]})
    assert [m.content for m in result.state.messages] == ["be brief", "hello", "hi"]
    assert all(isinstance(m, Message) for m in result.state.messages)
    snap = await rt.get_state(result.run_id)
    assert [m["content"] for m in snap.values["messages"]] == ["be brief", "hello", "hi"]


@pytest.mark.parametrize(("update", "field", "reason"), [
    ({"nope": 1}, "nope", "no such field"),
    ({"count": "many"}, "count", "integer"),
    ({"notes": [1.5]}, "notes", "string"),
    ({"messages": [{"role": "wizard"}]}, "messages", "role"),
    ({"title": ["a"]}, "title", "string"),
])
async def test_bad_update_fails_the_run_with_state_update_error(
    rt: Runtime, update: dict[str, Any], field: str, reason: str
) -> None:
    b = WorkflowBuilder("bad", state=Board)
    b.add_node("writer", lambda s: update)
    b.set_entry("writer").add_edge("writer", END)
    result = await rt.run(b.build(), {"title": "kept"})
    assert result.status is RunStatus.FAILED
    err = result.error
    assert err is not None and err.type == "StateUpdateError" and err.node == "writer"
    assert f"'{field}'" in err.message and "'writer'" in err.message
    assert reason in err.message
    assert err.traceback and "StateUpdateError" in err.traceback
    assert result.state.title == "kept"
    assert (await rt.get_state(result.run_id)).values["title"] == "kept"


def test_state_update_error_names_node_and_field() -> None:
    schema = schema_for(Board)
    with pytest.raises(StateUpdateError) as info:
        schema.validate_update("n1", "count", "x")
    assert info.value.node == "n1" and info.value.field == "count"


async def test_node_cannot_assign_to_the_snapshot(rt: Runtime) -> None:
    b = WorkflowBuilder("frozen", state=Board)

    def sneaky(state: Board) -> None:
        state.title = "changed"  # type: ignore[misc]

    b.add_node("sneaky", sneaky)
    b.set_entry("sneaky").add_edge("sneaky", END)
    result = await rt.run(b.build(), {"title": "orig"})
    assert result.status is RunStatus.FAILED
    assert result.error is not None and result.error.type == "ValidationError"
    assert "frozen" in result.error.message
    assert result.state.title == "orig"
    with pytest.raises(ValidationError):
        result.state.title = "x"  # type: ignore[misc]


async def test_blackboard_rejects_unknown_input_fields() -> None:
    with pytest.raises(ValidationError):
        Board.model_validate({"nope": 1})


class Nested(Blackboard):
    notes: Annotated[list[str], append] = []
    table: dict[str, list[int]] = {}
    seen: Annotated[list[str], append] = []


async def test_in_place_changes_to_the_snapshot_raise_and_do_not_leak(rt: Runtime) -> None:
    b = WorkflowBuilder("mutate", state=Nested)

    def vandal(state: Nested) -> dict[str, Any]:
        attempts = [
            lambda: state.notes.append("leak"),
            lambda: state.messages.append(Message.user("leak")),
            lambda: state.table.setdefault("k", []),
            lambda: state.table["k"].append(99),
            lambda: state.table.__setitem__("new", [1]),
        ]
        for attempt in attempts:
            with pytest.raises(TypeError):
                attempt()
        return {"notes": ["ok"]}

    def observer(state: Nested) -> dict[str, Any]:
        return {"seen": [f"{state.notes}|{state.table}|{len(state.messages)}"]}

    b.add_node("vandal", vandal).add_node("observer", observer)
    b.set_entry("vandal").add_edge("vandal", "observer").add_edge("observer", END)
    result = await rt.run(b.build(), {"table": {"k": [1]}})
    assert result.status is RunStatus.COMPLETED, result.error
    assert result.state.seen == ["['ok']|{'k': [1]}|0"]
    snap = await rt.get_state(result.run_id)
    assert snap.values["notes"] == ["ok"] and snap.values["table"] == {"k": [1]}
    assert snap.values["messages"] == []
