"""One attempt's durable calls: a shared call index, new wait rows, recorded answers."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter

from durable_flow import (
    CheckpointCorruptedError,
    InvalidInputError,
    MemoryStore,
    SerializationError,
)
from durable_flow.engine._context import TaskCalls, TaskIO
from durable_flow.engine._run import RunContext
from durable_flow.model._clock import utcnow
from durable_flow.store._protocols import Lease


def _calls(**io: Any) -> TaskCalls:
    lease = Lease(run_id="r1", owner="t", epoch=1, expires_at=utcnow())
    rc = RunContext(MemoryStore(), lease, "flow", None)
    task_io = TaskIO(run=rc, checkpoint_id="c7", thread="", request_prefix="outer@2/", **io)
    return TaskCalls(task_io, "sub.review", 3, None)  # type: ignore[arg-type]


def test_requests_timers_and_event_waits_share_one_call_index() -> None:
    calls = _calls()
    assert [calls.next_index() for _ in range(3)] == [0, 1, 2]
    row = calls.new_request(0, {"question": "ok?"}, TypeAdapter(bool))
    timer = calls.new_wait(1, "timer", b"{}", b"{}", None)
    assert row.id == "outer@2/review@3#0" and timer.id == "outer@2/review@3#1"
    assert (row.run_id, row.checkpoint_id, row.node, row.workflow_name) == (
        "r1", "c7", "sub.review", "flow")
    assert row.kind == "request" and timer.kind == "timer" and not row.parked


def test_a_parked_task_names_its_first_superstep_and_marks_its_requests() -> None:
    calls = _calls(origin=1, parks=True)
    row = calls.new_request(0, "ok?", TypeAdapter(str))
    assert row.id == "outer@2/review@1#0" and row.parked
    assert not calls.new_wait(1, "event", b'"go"', b"{}", None).parked


def test_a_recorded_wait_of_another_kind_means_the_code_changed() -> None:
    calls = _calls()
    timer = calls.new_wait(0, "timer", b"{}", b"{}", None)
    calls.io.answered[0] = timer
    assert calls.recorded(0, "timer", "ctx.sleep") == timer
    assert calls.recorded(1, "request", "ctx.request") is None
    with pytest.raises(InvalidInputError, match="same order") as err:
        calls.recorded(0, "request", "ctx.request")
    assert err.value.raised_by_runtime


def test_a_recorded_value_decodes_and_damage_names_the_checkpoint() -> None:
    calls = _calls()
    assert calls.decode_recorded(b'{"a":1}', "c7", "an answer") == {"a": 1}
    with pytest.raises(CheckpointCorruptedError, match="c7"):
        calls.decode_recorded(b"\xff not json", "c7", "an answer")


def test_an_unstorable_payload_is_the_runtimes_own_error() -> None:
    calls = _calls()
    with pytest.raises(SerializationError) as err:
        calls.new_request(0, object(), TypeAdapter(str))
    assert err.value.raised_by_runtime
