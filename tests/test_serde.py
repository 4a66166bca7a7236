"""Serialization: tagged round trips, write-time failures, the reserved tag key."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter

from durable_flow import (
    END,
    Blackboard,
    Message,
    RunStatus,
    Runtime,
    SerializationError,
    ToolCall,
    WorkflowBuilder,
)
from durable_flow.model._serde import decode, encode


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Address(BaseModel):
    city: str
    since: datetime


class Rich(Blackboard):
    when: datetime = datetime(2000, 1, 1, tzinfo=UTC)
    day: date = date(2000, 1, 1)
    at: time = time(0, 0)
    span: timedelta = timedelta(0)
    blob: bytes = b""
    tags: set[str] = set()
    price: Decimal = Decimal("0")
    color: Color = Color.RED
    point: Point = Point(0, 0)
    address: Address | None = None
    note: Message | None = None
    anything: Any = None


VALUES: dict[str, Any] = {
    "when": datetime(2024, 5, 17, 13, 45, 1, 123456, tzinfo=UTC),
    "day": date(2024, 2, 29),
    "at": time(23, 59, 58, 7),
    "span": timedelta(days=2, seconds=3, microseconds=4),
    "blob": b"\x00\xffbinary\n",
    "tags": {"b", "a", "c"},
    "price": Decimal("12345678901234567890.0000000001"),
    "color": Color.BLUE,
    "point": Point(3, -4),
    "address": Address(city="Oslo", since=datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC)),
    "note": Message(role="assistant", content="hi", name="bot",
                    tool_calls=[ToolCall(id="t1", name="search", arguments={"q": "tides"})],
                    metadata={"k": [1, 2]}),
}


@pytest.mark.parametrize("name", sorted(VALUES))
def test_each_tagged_type_round_trips_through_encode_and_the_schema(name: str) -> None:
    value = VALUES[name]
    adapter = TypeAdapter(Rich.model_fields[name].annotation)
    back = adapter.validate_python(decode(encode(value)))
    assert back == value
    assert type(back) is type(value)


def test_plain_json_values_are_stored_as_they_are() -> None:
    value = {"a": [1, 2.5, None, True, "x"], "b": {"c": "d"}}
    assert decode(encode(value)) == value
    assert encode(value) == b'{"a":[1,2.5,null,true,"x"],"b":{"c":"d"}}'


def test_unencodable_value_raises_type_error() -> None:
    with pytest.raises(TypeError, match="object"):
        encode({"x": object()})


def test_reserved_tag_key_is_refused_in_user_values() -> None:
    with pytest.raises(TypeError, match="__df__"):
        encode({"__df__": "datetime", "v": "2020-01-01"})
    with pytest.raises(TypeError, match="__df__"):
        encode([{"nested": {"__df__": 1}}])
    # the text of the tag inside a string is fine
    assert decode(encode('"__df__": x')) == '"__df__": x'


async def test_typed_values_survive_the_store_and_a_second_runtime(
    store_factory: Callable[[], Any],
) -> None:
    b = WorkflowBuilder("rich", state=Rich)
    seen: list[Rich] = []

    @b.node()
    def write(state: Rich) -> dict[str, Any]:
        return dict(VALUES)

    @b.node()
    async def check(state: Rich, ctx: Any) -> None:
        await ctx.request("continue?", response_type=bool)
        seen.append(state)

    b.set_entry("write").add_edge("write", "check").add_edge("check", END)
    wf = b.build()
    async with Runtime(store_factory()) as rt:
        first = await rt.run(wf, {})
    assert first.status is RunStatus.WAITING
    async with Runtime(store_factory()) as rt2:
        done = await rt2.resume(wf, first.run_id,
                                responses={first.pending_requests[0].id: True})
        snap = await rt2.get_state(first.run_id)
    assert done.status is RunStatus.COMPLETED
    for name, value in VALUES.items():
        assert getattr(seen[0], name) == value, name
        # read-only snapshots hold read-only subclasses (a set is a FrozenSet)
        assert isinstance(getattr(seen[0], name), type(value)), name
        assert getattr(done.state, name) == value, name
    # get_state needs no workflow code: tagged scalars come back typed, models as dicts
    assert snap.values["when"] == VALUES["when"]
    assert snap.values["tags"] == VALUES["tags"]
    assert snap.values["address"]["city"] == "Oslo"
    assert snap.values["color"] == "blue"


@pytest.mark.parametrize(("value", "reason"), [
    (object(), "object"),
    ({"__df__": "x"}, "__df__"),
    ({1j: 2}, ""),
])
async def test_unencodable_write_fails_the_run_naming_node_and_field(
    rt: Runtime, value: Any, reason: str
) -> None:
    b = WorkflowBuilder("bad", state=Rich)
    b.add_node("writer", lambda s: {"anything": value})
    b.set_entry("writer").add_edge("writer", END)
    wf = b.build()
    result = await rt.run(wf, {})
    assert result.status is RunStatus.FAILED
    assert result.error is not None
    assert result.error.type == "SerializationError"
    assert result.error.node == "writer"
    assert "'anything'" in result.error.message and "'writer'" in result.error.message
    assert reason in result.error.message
    info = (await rt.list_runs())[0]
    assert info.status is RunStatus.FAILED and info.error == result.error
    snap = await rt.get_state(result.run_id)
    assert snap.status is RunStatus.FAILED and snap.error is not None
    assert snap.error.type == "SerializationError"
    assert snap.values["anything"] is None
    assert issubclass(SerializationError, Exception)


async def test_unencodable_request_payload_and_step_result_fail_the_run(rt: Runtime) -> None:
    async def ask(state: Rich, ctx: Any) -> None:
        await ctx.request({"when": object()})

    async def step(state: Rich, ctx: Any) -> None:
        await ctx.step("fetch", lambda: object())

    for name, fn, field in (("ask", ask, "request payload"), ("step", step, "step 'fetch'")):
        b = WorkflowBuilder(name, state=Rich)
        b.add_node(name, fn).set_entry(name).add_edge(name, END)
        result = await rt.run(b.build(), {})
        assert result.status is RunStatus.FAILED and result.error is not None
        assert result.error.type == "SerializationError" and result.error.node == name
        assert field in result.error.message
        assert result.pending_requests == ()
