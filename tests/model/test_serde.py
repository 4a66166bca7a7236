"""Serialization: tagged round trips, write-time failures, the reserved tag key."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import functools
import math
from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Annotated, Any

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
    append,
)
from durable_flow.model._serde import UnknownTagError, decode, encode


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


# -- values orjson would silently change ----------------------------------------------------

NAN, INF = float("nan"), float("inf")


def same(a: Any, b: Any) -> bool:
    """Equal and of the same type at every depth, NaN included."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, dict):
        return len(a) == len(b) and all(k in b and same(v, b[k]) for k, v in a.items())
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


EXACT: dict[str, Any] = {
    "nan": NAN,
    "inf": INF,
    "-inf": -INF,
    "non-finite in a list": [1.5, NAN, -INF],
    "non-finite deep in dicts": {"a": {"b": [{"c": INF}]}},
    "int keys": {1: "a", 2: "b"},
    "int and str keys that print alike": {1: "int", "1": "str"},
    "None, bool and float keys": {None: 0, True: 1, 1.5: 2},
    "tuple keys": {(1, "x"): "pair"},
    "datetime keys": {datetime(2024, 1, 2, tzinfo=UTC): "new year"},
    "bytes keys": {b"\x00k": 1},
    "non-str keys inside str keys": {"outer": {7: [NAN]}},
    "int beyond 64 bits": 2**64,
    "int below -2**63": -(2**63) - 1,
    "huge ints deep": [{"x": 3**200}, -(10**40)],
    "set of datetimes": {datetime(2024, 1, 1, tzinfo=UTC), datetime(2023, 1, 1, tzinfo=UTC)},
    "set of tuples": {(1, 2), (3, 4)},
    "frozenset of frozensets": frozenset({frozenset({1, 2}), frozenset()}),
    "set with a NaN": {NAN},
    "timedelta a float cannot hold": timedelta(days=999_999_999, microseconds=1),
    "64-bit edges": [-(2**63), 2**64 - 1],
}


@pytest.mark.parametrize("name", sorted(EXACT))
def test_values_orjson_would_change_round_trip_exactly(name: str) -> None:
    value = EXACT[name]
    back = decode(encode(value))
    if name == "set with a NaN":
        assert type(back) is set and len(back) == 1 and math.isnan(next(iter(back)))
    else:
        assert same(back, value), (back, value)


def test_non_finite_floats_inside_models_and_messages_round_trip_through_the_schema() -> None:
    class Reading(BaseModel):
        value: float
        by_hour: dict[int, float] = {}

    reading = Reading(value=NAN, by_hour={3: INF, 4: 1.0})
    back = TypeAdapter(Reading).validate_python(decode(encode(reading)))
    assert math.isnan(back.value) and back.by_hour == {3: INF, 4: 1.0}
    msg = Message(role="tool", content="x", metadata={"score": -INF, "ids": {1: "a"}})
    assert Message.model_validate(decode(encode(msg))) == msg


def test_tuples_and_enums_are_stored_plainly_and_come_back_through_their_type() -> None:
    value = {"pair": (1, 2), "color": Color.RED}
    assert decode(encode(value)) == {"pair": [1, 2], "color": "red"}
    adapter = TypeAdapter(dict[str, tuple[int, int] | Color])
    assert adapter.validate_python(decode(encode(value))) == value


def test_plain_values_keep_their_compact_untagged_bytes() -> None:
    assert encode({"a": None, "b": [None, 1.5]}) == b'{"a":null,"b":[null,1.5]}'
    assert encode(2**64 - 1) == b"18446744073709551615"
    assert encode(NAN) == b'{"__df__":"float","v":"nan"}'
    assert encode({1: "a"}) == b'{"__df__":"dict","v":[[1,"a"]]}'


@pytest.mark.parametrize(("value", "reason"), [
    pytest.param(10**5000, "too long", id="int-of-5000-digits"),
    pytest.param("\ud800", "surrogates", id="lone-surrogate"),
    pytest.param(functools.reduce(lambda inner, _: [inner], range(300), []),
                 "nested too deeply", id="300-levels"),
    pytest.param({1: {"__df__": "x"}}, "__df__", id="reserved-key-under-int-key"),
    pytest.param({1: object()}, "object", id="object-under-int-key"),
])
def test_values_that_cannot_be_stored_exactly_are_refused(value: Any, reason: str) -> None:
    with pytest.raises(TypeError, match=reason):
        encode(value)


def test_a_value_that_contains_itself_is_refused() -> None:
    loop: list[Any] = [NAN]
    loop.append(loop)
    with pytest.raises(TypeError, match="nested too deeply"):
        encode(loop)
    table: dict[Any, Any] = {}
    table[1] = table
    with pytest.raises(TypeError, match="nested too deeply"):
        encode(table)


@pytest.mark.parametrize("data", [
    b'{"__df__":"float","v":"1.5"}',
    b'{"__df__":"float","v":null}',
    b'{"__df__":"int","v":5}',
    b'{"__df__":"int","v":"x"}',
    b'{"__df__":"dict","v":[1]}',
    b'{"__df__":"dict","v":[[{},1]]}',
    b'{"__df__":"set","v":{}}',
    b'{"__df__":"timedelta","v":"soon"}',
    b'{"__df__":"datetime","v":5}',
    b'{"__df__":"bytes","v":"***"}',
    b'{"__df__":"decimal","v":"one"}',
    b'{"__df__":"nope","v":1}',
    b'{"__df__":7,"v":1}',
])
def test_a_bad_tagged_value_raises_unknown_tag_error(data: bytes) -> None:
    with pytest.raises(UnknownTagError):
        decode(data)


class Sensor(Blackboard):
    reading: float = 0.0
    readings: Annotated[list[float], append] = []
    by_key: dict[Any, Any] = {}
    big: int = 0
    anything: Any = None
    answer: float = 0.0
    measured: float = 0.0


def _non_finite_workflow(gate: asyncio.Event | None = None) -> Any:
    b = WorkflowBuilder("sensor", state=Sensor)

    async def measure(state: Sensor, ctx: Any) -> dict[str, Any]:
        measured = await ctx.step("probe", lambda: -INF)
        return {"reading": INF, "readings": [NAN, 1.0], "by_key": {1: NAN, "1": "one"},
                "big": 2**70, "anything": {"t": (1, NAN)}, "measured": measured}

    async def ask(state: Sensor, ctx: Any) -> dict[str, Any]:
        if gate is not None:
            await gate.wait()
        answer = await ctx.request({"limits": [-INF, INF]}, response_type=float)
        return {"answer": answer}

    b.add_node("measure", measure).add_node("ask", ask)
    b.set_entry("measure").add_edge("measure", "ask").add_edge("ask", END)
    return b.build()


def _check_sensor(values: Any) -> None:
    get = values.get if isinstance(values, dict) else lambda k: getattr(values, k)
    assert get("reading") == INF and get("measured") == -INF
    assert math.isnan(get("readings")[0]) and get("readings")[1:] == [1.0]
    assert math.isnan(get("by_key")[1]) and get("by_key")["1"] == "one"
    assert get("big") == 2**70 and get("anything")["t"][0] == 1
    assert math.isnan(get("anything")["t"][1])


async def test_non_finite_values_survive_waiting_answers_and_a_second_runtime(
    store_factory: Callable[[], Any],
) -> None:
    wf = _non_finite_workflow()
    async with Runtime(store_factory()) as rt:
        first = await rt.run(wf, {"anything": [NAN]})
    assert first.status is RunStatus.WAITING
    _check_sensor(first.state)
    [req] = first.pending_requests
    assert req.payload == {"limits": [-INF, INF]}
    async with Runtime(store_factory()) as rt2:
        assert (await rt2.pending_requests())[0].payload == {"limits": [-INF, INF]}
        _check_sensor((await rt2.get_state(first.run_id)).values)
        done = await rt2.resume(wf, first.run_id, responses={req.id: NAN})
        snap = await rt2.get_state(done.run_id)
    assert done.status is RunStatus.COMPLETED, done.error
    _check_sensor(done.state)
    _check_sensor(snap.values)
    assert math.isnan(done.state.answer) and math.isnan(snap.values["answer"])
    input_snap = await _input_values(store_factory, first.run_id)
    assert math.isnan(input_snap["anything"][0])


async def _input_values(store_factory: Callable[[], Any], run_id: str) -> dict[str, Any]:
    async with Runtime(store_factory()) as rt:
        oldest = (await rt.history(run_id))[-1]
        return (await rt.get_state(run_id, oldest.id)).values


async def test_non_finite_values_survive_a_crash_while_running(
    store_factory: Callable[[], Any],
) -> None:
    gate = asyncio.Event()
    wf = _non_finite_workflow(gate)
    async with Runtime(store_factory()) as rt:
        task = asyncio.create_task(rt.run(wf, {}, run_id="crashy"))
        await _until_checkpoints(rt, "crashy", 2)
        task.cancel()  # the process goes away with the run still running
        with pytest.raises(asyncio.CancelledError):
            await task
        assert (await rt.get_run("crashy")).status is RunStatus.RUNNING
    gate.set()
    async with Runtime(store_factory()) as rt2:
        resumed = await rt2.resume(wf, "crashy")
    assert resumed.status is RunStatus.WAITING, resumed.error
    _check_sensor(resumed.state)


async def _until_checkpoints(rt: Runtime, run_id: str, count: int) -> None:
    for _ in range(1000):
        if any(r.run_id == run_id for r in await rt.list_runs()) and \
                len(await rt.history(run_id)) >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"run {run_id} never reached {count} checkpoints")


@pytest.mark.parametrize(("value", "reason"), [
    pytest.param(10**5000, "too long", id="int-of-5000-digits"),
    pytest.param("\ud800", "surrogates", id="lone-surrogate"),
])
async def test_a_value_refused_by_the_codec_fails_the_run_naming_node_and_field(
    rt: Runtime, value: Any, reason: str
) -> None:
    b = WorkflowBuilder("refused", state=Rich)
    b.add_node("writer", lambda s: {"anything": value})
    b.set_entry("writer").add_edge("writer", END)
    result = await rt.run(b.build(), {})
    assert result.status is RunStatus.FAILED and result.error is not None
    assert result.error.type == "SerializationError" and result.error.node == "writer"
    assert "'anything'" in result.error.message and reason in result.error.message
