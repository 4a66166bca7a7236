"""A streaming agent for the SIGKILL test: the child process dies in the middle of a reply.

Started as ``python tests/crashkit_stream.py DB RUN_ID``: it runs ``workflow()`` on
the SQLite file; the model's first call asks for the ``forecast`` tool, its
second streams a reply word by word. With ``CRASH_POINT=mid-stream`` the child
SIGKILLs itself once three words of that reply are in the stream log. Tool runs
and model calls append one line each to ``CRASH_LOG``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from durable_flow import (
    END,
    Blackboard,
    ChatChunk,
    ChatResponse,
    Message,
    Runtime,
    ToolCall,
    WorkflowBuilder,
)
from durable_flow.store.sqlite._sqlite import SqliteStore

WORDS = ["Pack", " a", " coat", " and", " boots", " for", " Oslo."]


def record(line: str) -> None:
    log = os.environ.get("CRASH_LOG")
    if log:
        with open(log, "a") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def forecast(city: str) -> str:
    """The forecast for a city."""
    record("tool:forecast")
    return f"cold in {city}"


async def deltas_stored(db: str, count: int) -> None:
    """Wait until ``count`` model deltas are committed to the stream log (our own connection)."""
    for _ in range(2000):
        with sqlite3.connect(db) as conn:
            n = conn.execute("SELECT count(*) FROM stream_entries WHERE kind = 'model_delta'"
                             ).fetchone()[0]
        if n >= count:
            return
        await asyncio.sleep(0.01)
    raise RuntimeError("the deltas never reached the stream log")


class Planner:
    """Asks for the tool first, then streams its reply."""

    name = "planner-model"

    async def complete(self, messages: Sequence[Message], **_: Any) -> ChatResponse:
        raise AssertionError("streamed models are not asked to complete")

    async def stream(self, messages: Sequence[Message], **_: Any) -> AsyncIterator[ChatChunk]:
        if not any(m.role == "tool" for m in messages):
            record("model:ask-tool")
            call = ToolCall(id="c1", name="forecast", arguments={"city": "Oslo"})
            yield ChatChunk(response=ChatResponse(Message.assistant("", tool_calls=[call])))
            return
        record("model:reply")
        for i, word in enumerate(WORDS):
            yield ChatChunk(text=word)
            if i == 2 and os.environ.get("CRASH_POINT") == "mid-stream":
                await deltas_stored(sys.argv[1], 3)
                os.kill(os.getpid(), signal.SIGKILL)  # a power cut: no cleanup, no flush
        yield ChatChunk(response=ChatResponse(Message.assistant("".join(WORDS))))


class Trip(Blackboard):
    question: str = ""
    answer: str = ""


def workflow() -> Any:
    b = WorkflowBuilder("trip", Trip)
    b.add_agent("planner", Planner(), instructions="Plan the trip.", tools=[forecast])
    b.set_entry("planner")
    b.add_edge("planner", END)
    return b.build()


async def child(db: str, run_id: str) -> None:
    async with Runtime(SqliteStore(db), lease_ttl=1.0) as rt:
        await rt.run(workflow(), {"question": "Oslo in March?"}, run_id=run_id)


if __name__ == "__main__":
    asyncio.run(child(sys.argv[1], sys.argv[2]))
