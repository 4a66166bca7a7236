"""A run's stream log as server-sent events: ``GET /api/runs/{run_id}/stream?after=N``.

Each entry is one event named ``entry`` whose ``id`` is its ``seq`` and
whose data is the entry as JSON; when the run is no longer running (and
everything it streamed was sent) one ``end`` event closes the stream. A
client that reconnects asks with ``after=`` the last ``seq`` it saw (a
browser's ``EventSource`` sends it as ``Last-Event-ID`` by itself; the
larger of the two counts), so it misses nothing and sees nothing twice.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
from sse_starlette import EventSourceResponse, ServerSentEvent

from ..model._records import StreamEntry
from ..runtime._runtime import Runtime

__all__ = ["entry_json", "start_after", "stream_response"]

#: a comment every this many seconds keeps proxies from closing a quiet stream
PING_SECONDS = 15
#: how often the store is asked for new entries while the run is running
POLL_SECONDS = 0.1


def start_after(after: int, last_event_id: str | None) -> int:
    """Where to start: ``after``, or the ``Last-Event-ID`` a reconnecting browser sent."""
    seen = int(last_event_id) if last_event_id and last_event_id.isdecimal() else 0
    return max(after, seen)


def entry_json(entry: StreamEntry) -> dict[str, Any]:
    """An entry as plain JSON (the ``data`` of its event)."""
    return {"seq": entry.seq, "kind": entry.kind, "node": entry.node,
            "namespace": entry.namespace, "superstep": entry.superstep,
            "ts": entry.ts.isoformat(), "data": entry.data, "epoch": entry.epoch,
            "cut": entry.cut}


async def _events(runtime: Runtime, run_id: str, after: int) -> AsyncIterator[ServerSentEvent]:
    async for entry in runtime.follow_stream(run_id, after=after, poll=POLL_SECONDS):
        yield ServerSentEvent(orjson.dumps(entry_json(entry)).decode(), event="entry",
                              id=str(entry.seq))
    yield ServerSentEvent("{}", event="end")


def stream_response(runtime: Runtime, run_id: str, after: int) -> EventSourceResponse:
    """The live response (the run was checked to exist first)."""
    return EventSourceResponse(_events(runtime, run_id, after), ping=PING_SECONDS,
                               headers={"cache-control": "no-store", "x-accel-buffering": "no"})
