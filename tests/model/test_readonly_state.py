"""The state a node receives is deeply read-only, shared, and frozen only once.

Mutating it raises at the mutation and changes nothing a sibling task, a
later superstep, ``RunResult.state`` or ``get_state`` sees; a superstep
freezes only what changed.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
from collections.abc import Callable
from typing import Annotated, Any

import orjson
import pytest
from pydantic import BaseModel, ValidationError

from durable_flow import (
    END,
    Blackboard,
    MemoryStore,
    Message,
    NodeContext,
    RunStatus,
    Runtime,
    ToolCall,
    WorkflowBuilder,
    add,
    append,
    merge,
)
from durable_flow.model import _frozen
from durable_flow.model._blackboard import FreeBlackboard


class Inner(BaseModel):
    level: int = 0
    marks: list[int] = []


class Item(BaseModel):
    name: str = ""
    tags: list[str] = []
    inner: Inner = Inner()


@dataclasses.dataclass
class Point:
    x: int = 0
    path: list[int] = dataclasses.field(default_factory=list)


class Board(Blackboard):
    notes: Annotated[list[str], append] = []
    rows: list[dict[str, Any]] = []
    table: Annotated[dict[str, list[int]], merge] = {}
    tags: set[str] = set()
    item: Item = Item()
    point: Point = Point()
    count: Annotated[int, add] = 0
    seen: Annotated[list[str], append] = []


INPUT: dict[str, Any] = {
    "notes": ["n0"],
    "rows": [{"k": 1, "more": [1]}],
    "table": {"x": [1]},
    "tags": {"t"},
    "item": {"name": "i", "tags": ["p"], "inner": {"level": 1, "marks": [3]}},
    "point": {"x": 1, "path": [2]},
    "messages": [{"role": "user", "content": "hi", "metadata": {"k": {"deep": [1]}},
                  "tool_calls": [{"id": "c", "name": "f", "arguments": {"q": [1]}}]}],
}


def describe(state: Board) -> str:
    """Everything a node can see, as text (plain copies, so nothing is shared)."""
    return json.dumps(copy.deepcopy(state).model_dump(mode="json"), sort_keys=True)


def _iadd(s: Board) -> None:
    s.notes += ["x"]  # type: ignore[misc]  # the list's own += raises, before the assignment


def _ior(s: Board) -> None:
    s.table |= {"n": [0]}  # type: ignore[misc]


MUTATIONS: dict[str, Callable[[Board], Any]] = {
    "list.append": lambda s: s.notes.append("x"),
    "list.iadd": _iadd,
    "list.setitem": lambda s: s.notes.__setitem__(0, "x"),
    "list.extend": lambda s: s.notes.extend(["x"]),
    "list.pop": lambda s: s.notes.pop(),
    "list.clear": lambda s: s.notes.clear(),
    "list.sort": lambda s: s.notes.sort(),
    "dict.update": lambda s: s.table.update(n=[0]),
    "dict.setitem": lambda s: s.table.__setitem__("n", [0]),
    "dict.pop": lambda s: s.table.pop("x"),
    "dict.setdefault": lambda s: s.table.setdefault("n", []),
    "dict.ior": _ior,
    "set.add": lambda s: s.tags.add("u"),
    "list in dict": lambda s: s.table["x"].append(9),
    "dict in list": lambda s: s.rows[0].__setitem__("k", 9),
    "list in dict in list": lambda s: s.rows[0]["more"].append(9),
    "model field": lambda s: setattr(s.item, "name", "x"),
    "nested model field": lambda s: setattr(s.item.inner, "level", 9),
    "list in nested model": lambda s: s.item.inner.marks.append(9),
    "dataclass field": lambda s: setattr(s.point, "x", 9),
    "list in dataclass": lambda s: s.point.path.append(9),
    "blackboard field": lambda s: setattr(s, "notes", []),
    "message metadata": lambda s: s.messages[0].metadata.__setitem__("k", 1),
    "nested message metadata": lambda s: s.messages[0].metadata["k"]["deep"].append(2),
    "message tool_calls": lambda s: s.messages[0].tool_calls.append(ToolCall(id="d", name="g")),
    "tool call arguments": lambda s: s.messages[0].tool_calls[0].arguments.__setitem__("q", 2),
    "messages list": lambda s: s.messages.append(Message.user("leak")),
}


def mutating_flow(mutate: Callable[[Board], Any], errors: list[BaseException]) -> Any:
    """vandal and sibling run together; after runs in the next superstep."""
    b = WorkflowBuilder("readonly", state=Board)
    tried = asyncio.Event()

    async def start(state: Board) -> None:
        return None

    async def vandal(state: Board) -> dict[str, Any]:
        before = describe(state)
        try:
            mutate(state)
        except (TypeError, ValidationError) as exc:
            errors.append(exc)
        finally:
            tried.set()
        assert describe(state) == before  # the failed mutation changed nothing, even here
        return {"notes": ["ok"], "seen": ["vandal:" + before]}

    async def sibling(state: Board) -> dict[str, Any]:
        await tried.wait()
        return {"seen": ["sibling:" + describe(state)]}

    async def after(state: Board) -> dict[str, Any]:
        return {"seen": ["after:" + describe(state)]}

    b.add_node("start", start).add_node("vandal", vandal).add_node("sibling", sibling)
    b.add_node("after", after).set_entry("start")
    b.add_edge("start", "vandal").add_edge("start", "sibling")
    b.add_edge("vandal", "after").add_edge("after", END)
    return b.build()


@pytest.mark.parametrize("name", sorted(MUTATIONS))
async def test_mutating_the_snapshot_raises_and_reaches_no_one(rt: Runtime, name: str) -> None:
    errors: list[BaseException] = []
    result = await rt.run(mutating_flow(MUTATIONS[name], errors), INPUT)
    assert result.status is RunStatus.COMPLETED, result.error
    assert len(errors) == 1, f"{name} did not raise"
    assert "read-only" in str(errors[0]) or "frozen" in str(errors[0])
    seen = dict(s.split(":", 1) for s in result.state.seen)
    original = seen["vandal"]
    assert seen["sibling"] == original
    after = json.loads(seen["after"])
    assert after["notes"] == ["n0", "ok"]  # the caught error, then a proper update: it works
    assert after | {"notes": ["n0"], "seen": []} == json.loads(original) | {"seen": []}
    assert result.state.item.inner.marks == [3] and result.state.table == {"x": [1]}
    assert result.state.messages[0].metadata == {"k": {"deep": [1]}}
    values = (await rt.get_state(result.run_id)).values
    assert values["notes"] == ["n0", "ok"] and values["rows"] == [{"k": 1, "more": [1]}]
    assert values["item"]["inner"]["marks"] == [3] and values["point"] == {"x": 1, "path": [2]}
    assert values["messages"][0]["metadata"] == {"k": {"deep": [1]}}


async def test_nodes_read_and_derive_new_values_naturally(rt: Runtime) -> None:
    b = WorkflowBuilder("reads", state=Board)
    checks: list[str] = []

    def derive(state: Board) -> dict[str, Any]:
        assert state.notes == ["n0"] and ["n0"] == state.notes  # noqa: SIM300
        assert isinstance(state.rows, list) and isinstance(state.rows[0], dict)
        assert len(state.rows) == 1 and "x" in state.table and "t" in state.tags
        assert [r["k"] for r in state.rows] == [1] and dict(state.table) == {"x": [1]}
        assert json.loads(json.dumps(state.rows)) == orjson.loads(orjson.dumps(state.rows))
        mine = copy.deepcopy(state.rows)
        mine[0]["k"] = 5
        item = state.item.model_copy(deep=True)
        item.inner.marks.append(4)
        checks.append("read")
        return {"rows": state.rows + [{"k": 2}],  # noqa: RUF005 - the + operator itself
                "table": {**state.table, "y": [2]},
                "tags": state.tags | {"u"},
                "item": item,
                "point": dataclasses.replace(state.point, x=7),
                "count": 1}

    def check(state: Board) -> dict[str, Any]:
        assert state.rows == [{"k": 1, "more": [1]}, {"k": 2}]
        assert state.item.inner.marks == [3, 4] and state.point.x == 7
        with pytest.raises(TypeError):
            state.rows[1]["k"] = 3  # the values it returned are read-only now
        with pytest.raises(ValidationError):
            state.item.inner.level = 2
        checks.append("check")
        return {"notes": ["done"]}

    b.add_node("derive", derive).add_node("check", check).set_entry("derive")
    b.add_edge("derive", "check").add_edge("check", END)
    result = await rt.run(b.build(), INPUT)
    assert result.status is RunStatus.COMPLETED, result.error
    assert checks == ["read", "check"]
    assert result.state.table == {"x": [1], "y": [2]} and result.state.tags == {"t", "u"}


async def test_run_result_state_is_read_only_and_deepcopy_gives_a_mutable_copy(
    rt: Runtime,
) -> None:
    b = WorkflowBuilder("result", state=Board)
    b.add_node("write", lambda s: {"notes": ["w"], "rows": [{"k": [1]}]}).set_entry("write")
    b.add_edge("write", END)
    wf = b.build()
    result = await rt.run(wf, INPUT)
    with pytest.raises(TypeError):
        result.state.notes.append("x")
    with pytest.raises(TypeError):
        result.state.rows[0]["k"].append(2)
    mine = copy.deepcopy(result.state)
    mine.notes.append("x")
    mine.rows[0]["k"].append(2)
    deep = result.state.model_copy(deep=True)
    deep.item.tags.append("q")
    assert result.state.notes == ["n0", "w"] and result.state.rows == [{"k": [1]}]
    assert result.state.item.tags == ["p"]
    again = await rt.fork(wf, result.run_id, result.checkpoint_id)
    assert again.state.rows == [{"k": [1]}] and again.state.notes == ["n0", "w"]
    snap = await rt.get_state(result.run_id)
    snap.values["notes"].append("local")  # get_state values are the caller's own plain copy
    assert (await rt.get_state(result.run_id)).values["notes"] == ["n0", "w"]


async def test_node_history_messages_are_read_only(rt: Runtime) -> None:
    b = WorkflowBuilder("history", state=Board)
    outcomes: list[str] = []

    async def talk(state: Board, ctx: NodeContext) -> dict[str, Any]:
        if ctx.history:
            with pytest.raises(TypeError):
                ctx.history[0].metadata["k"] = "changed"
            with pytest.raises(TypeError):
                ctx.history[0].metadata["tags"].append("y")
            outcomes.append(str(ctx.history[0].metadata))
            return {"count": 1}
        ctx.remember(Message(role="assistant", content="a", metadata={"tags": ["x"]}))
        return {"count": 1}

    b.add_node("talk", talk).set_entry("talk")
    b.add_edge("talk", "talk", when="count < 2").add_edge("talk", END, when="count >= 2")
    result = await rt.run(b.build(), {})
    assert result.status is RunStatus.COMPLETED, result.error
    assert outcomes == ["{'tags': ['x']}"]


async def test_a_reducer_gets_the_current_value_read_only(rt: Runtime) -> None:
    def push_in_place(current: list[int], update: list[int]) -> list[int]:
        current.extend(update)
        return current

    class Stack(Blackboard):
        items: Annotated[list[int], push_in_place] = []

    b = WorkflowBuilder("reducer", state=Stack)
    b.add_node("push", lambda s: {"items": [1]}).set_entry("push").add_edge("push", END)
    result = await rt.run(b.build(), {"items": [0]})
    assert result.status is RunStatus.FAILED
    assert result.error is not None and result.error.type == "TypeError"
    assert (await rt.get_state(result.run_id)).values["items"] == [0]


async def test_updates_from_update_state_and_fork_are_frozen_too(rt: Runtime) -> None:
    b = WorkflowBuilder("updated", state=Board)
    seen: list[str] = []

    async def ask(state: Board, ctx: NodeContext) -> None:
        await ctx.request("go?", response_type=bool)

    def touch(state: Board) -> dict[str, Any]:
        with pytest.raises(TypeError):
            state.rows[0]["k"] = "changed"
        with pytest.raises(TypeError):
            state.table["x"].append(2)
        seen.append(describe(state))
        return {}

    b.add_node("ask", ask).add_node("touch", touch).set_entry("ask")
    b.add_edge("ask", "touch").add_edge("touch", END)
    wf = b.build()
    first = await rt.run(wf, {})
    await rt.update_state(wf, first.run_id, {"rows": [{"k": "v"}], "table": {"x": [1]}},
                          as_node="ask")
    done = await rt.resume(wf, first.run_id)
    assert done.status is RunStatus.COMPLETED, done.error
    forked = await rt.fork(wf, first.run_id, first.checkpoint_id,
                           update={"rows": [{"k": "f"}], "table": {"x": [1]}})
    assert forked.status is RunStatus.WAITING
    assert forked.state.rows == [{"k": "f"}]
    with pytest.raises(TypeError):
        forked.state.rows[0]["k"] = "changed"
    assert len(seen) == 1 and json.loads(seen[0])["rows"] == [{"k": "v"}]


async def test_free_form_values_and_extras_are_read_only() -> None:
    b = WorkflowBuilder("free", state=FreeBlackboard)
    caught: list[str] = []

    def poke(state: Any) -> dict[str, Any]:
        for change in (lambda: state.box.__setitem__("k", 1), lambda: state.box["l"].append(1),
                       lambda: state.model_extra.__setitem__("box", None)):
            try:
                change()
            except TypeError:
                caught.append("raised")
        return {"done": True}

    b.add_node("poke", poke).set_entry("poke").add_edge("poke", END)
    async with Runtime(MemoryStore()) as rt:
        result = await rt.run(b.build(), {"box": {"l": [0]}})
    assert result.status is RunStatus.COMPLETED, result.error
    assert caught == ["raised"] * 3
    assert result.state.model_extra == {"box": {"l": [0]}, "done": True}


def _looping_flow(big: int) -> Any:
    class Big(Blackboard):
        payload: list[dict[str, Any]] = []
        lookup: dict[str, Any] = {}
        n: Annotated[int, add] = 0
        log: Annotated[list[dict[str, int]], append] = []

    b = WorkflowBuilder("loop", state=Big)
    b.add_node("step", lambda s: {"n": 1, "log": [{"i": s.n}]}).set_entry("step")
    b.add_edge("step", "step", when=lambda s: s.n < s.lookup["stop"])
    b.add_edge("step", END, when=lambda s: s.n >= s.lookup["stop"])
    return b.build(), {"payload": [{"i": i, "sub": [i]} for i in range(big)]}


@pytest.mark.parametrize("supersteps", [5, 25])
async def test_a_superstep_freezes_only_what_changed(
    monkeypatch: pytest.MonkeyPatch, supersteps: int,
) -> None:
    calls = {"walks": 0}
    walk = _frozen._freeze_slow

    def counting(value: Any) -> Any:
        calls["walks"] += 1
        return walk(value)

    monkeypatch.setattr(_frozen, "_freeze_slow", counting)
    big = 1_000
    wf, data = _looping_flow(big)
    async with Runtime(MemoryStore()) as rt:
        result = await rt.run(wf, {**data, "lookup": {"stop": supersteps}})
    assert result.status is RunStatus.COMPLETED and result.state.n == supersteps
    input_walks = 2 * big + 3  # the payload's dicts and lists, once, at the input
    per_superstep = 2  # the new log item: its list and its dict
    assert input_walks <= calls["walks"] <= input_walks + per_superstep * supersteps + 10
