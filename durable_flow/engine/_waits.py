"""Durable time and events inside a node: ``ctx.sleep``, ``ctx.wait_event``, request deadlines.

Each is a recorded wait of the task, stored like a request (a ``RequestRow``
of kind ``timer`` or ``event``, keyed by base checkpoint, node and call
index; the calls of one task share one index, so a node mixing them keeps a
stable order). The first call records the wait and stops the task
(``Interrupt``); the superstep is saved ``waiting`` and the store sets the
run's ``wake_at`` to the earliest time any open wait ends. The store closes
waits, never the node: a claim delivers kept events and closes the waits
whose time has come, so when the task runs again each call finds its wait
closed and returns (or raises) at once, and after a crash nothing waits
twice and no event is delivered twice.
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import orjson
from pydantic import TypeAdapter, ValidationError

from ..errors import (
    DurableFlowError,
    EventTimeoutError,
    InvalidInputError,
    LeaseLostError,
    RequestTimeoutError,
)
from ..model._clock import utcnow
from ..model._serde import encode
from ..store._protocols import RequestRow
from ._context import NO_DEFAULT, Interrupt, own

if TYPE_CHECKING:
    from ._context import TaskCalls

__all__ = ["seconds", "sleep", "sleep_until", "timed_out_request", "wait_event", "with_deadline"]


def seconds(name: str, value: float | timedelta) -> float:
    """A duration given to ``ctx`` in seconds (a number or a ``timedelta``)."""
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise own(InvalidInputError(f"{name} must be seconds (a number) or a timedelta, "
                                     f"got {value!r}"))
    return float(value)


def _after(start: datetime, name: str, duration: float | timedelta) -> datetime:
    """``start`` plus a duration; a negative one counts as zero."""
    try:
        return start + timedelta(seconds=max(seconds(name, duration), 0.0))
    except OverflowError:
        raise own(InvalidInputError(f"{name} is too long: {duration!r}")) from None


async def sleep(calls: TaskCalls, duration: float | timedelta) -> None:
    """``ctx.sleep``: stop the task for ``duration``; zero or less returns at once."""
    when = _after(utcnow(), "sleep", duration)
    await sleep_until(calls, when)


async def sleep_until(calls: TaskCalls, when: datetime) -> None:
    """``ctx.sleep_until``: stop the task until ``when`` (a recorded timer); at once if past."""
    if not isinstance(when, datetime):
        raise own(InvalidInputError(f"sleep_until needs a datetime, got {when!r}"))
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)  # naive times are UTC, like every stored time
    index = calls.next_index()
    row = calls.recorded(index, "timer", "ctx.sleep")
    if row is not None:
        if row.answer is not None:
            return  # the timer fired
        raise Interrupt([])  # its time came after this run was claimed: the next claim fires it
    if when <= utcnow():
        return
    raise Interrupt([calls.new_wait(index, "timer", encode({"until": when}), b"{}", when)])


async def wait_event(calls: TaskCalls, name: str, response_type: Any,
                     timeout: float | timedelta | None) -> Any:
    """``ctx.wait_event``: the next event ``name`` sent to the run, validated into the type."""
    if not isinstance(name, str) or not name:
        raise own(InvalidInputError(f"an event name is a non-empty string, got {name!r}"))
    adapter: TypeAdapter[Any] = TypeAdapter(response_type)
    index = calls.next_index()
    row = calls.recorded(index, "event", "ctx.wait_event")
    if row is None:
        due = None if timeout is None else _after(utcnow(), "timeout", timeout)
        row = calls.new_wait(index, "event", encode(name), orjson.dumps(adapter.json_schema()),
                             due)
        rc = calls.io.run
        try:
            row = await rc.wait_event(row)  # a kept event is taken at once
        except LeaseLostError as exc:
            rc.fence.lose(exc)
            raise
        except DurableFlowError as exc:
            raise own(exc) from None
    if row.timed_out:
        raise own(EventTimeoutError(calls.node, name, row.expires_at))
    if row.answer is None:
        raise Interrupt([])
    payload = calls.decode_recorded(row.answer, row.checkpoint_id, f"the event {name!r}")
    try:
        return adapter.validate_python(payload)
    except ValidationError as exc:
        # a kept event that does not fit: dropped (logged), and the wait goes on
        reason = "; ".join(e["msg"] for e in exc.errors())
        raise Interrupt([], reopen={row.id: f"event {name!r} dropped: {reason}"}) from None


def with_deadline(row: RequestRow, timeout: float | timedelta | None) -> RequestRow:
    """A new request with its deadline (``ctx.request(..., timeout=...)``)."""
    if timeout is None:
        return row
    return replace(row, expires_at=_after(row.created_at, "timeout", timeout))


def timed_out_request(calls: TaskCalls, row: RequestRow, default: Any) -> Any:
    """What ``ctx.request`` gives once its deadline closed the request."""
    if default is not NO_DEFAULT:
        return default
    raise own(RequestTimeoutError(calls.node, row.id, row.expires_at))

