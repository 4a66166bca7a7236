"""Workflows that sleep and wait for events, and the child process that runs and kills itself.

Started as ``python tests/crashkit_waits.py DB RUN_ID SCENARIO ACTION`` (DB is
a SQLite path or a postgresql:// URL; ACTION is ``start``, ``resume`` or
``send``); it SIGKILLs itself at CRASH_POINT. Nodes append one line per
execution to CRASH_LOG, so the parent can count what ran.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Annotated, Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from durable_flow import END, Blackboard, Runtime, WorkflowBuilder, append
from durable_flow.store._protocols import CheckpointStore

POINT = os.environ.get("CRASH_POINT", "")
NAP = 0.5  # seconds


def record(line: str) -> None:
    """Append one execution record, flushed and fsynced before going on."""
    log = os.environ.get("CRASH_LOG")
    if not log:
        return
    with Path(log).open("a") as fh:
        fh.write(line + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def die() -> None:
    """Die like a power cut: no cleanup, no flush."""
    os.kill(os.getpid(), signal.SIGKILL)


class Trip(Blackboard):
    got: Annotated[list[Any], append] = []
    trail: Annotated[list[str], append] = []


def sleeper() -> Any:
    """start -> nap (sleeps NAP seconds) -> done."""
    b = WorkflowBuilder("crash-sleeper", state=Trip)

    @b.node()
    async def start(state: Trip) -> dict[str, Any]:
        record("start")
        return {"trail": ["start"]}

    @b.node()
    async def nap(state: Trip, ctx: Any) -> dict[str, Any]:
        record("nap")
        await ctx.sleep(NAP)
        record("woke")
        if POINT == "woke":
            die()
        return {"trail": ["napped"]}

    @b.node()
    async def done(state: Trip) -> dict[str, Any]:
        record("done")
        return {"trail": ["done"]}

    b.set_entry("start").add_edge("start", "nap").add_edge("nap", "done")
    b.add_edge("done", END)
    return b.build()


def listener(*, nap_first: bool = False) -> Any:
    """(nap ->) listen (waits for one event ``paid``) -> END."""
    b = WorkflowBuilder("crash-listener", state=Trip)

    @b.node()
    async def listen(state: Trip, ctx: Any) -> dict[str, Any]:
        record("listen")
        if nap_first:
            await ctx.sleep(NAP)
        paid = await ctx.wait_event("paid")
        record(f"heard {paid}")
        if POINT == "heard":
            die()
        return {"got": [paid]}

    b.set_entry("listen").add_edge("listen", END)
    return b.build()


SCENARIOS = {"sleeper": sleeper, "listener": listener,
             "late-listener": lambda: listener(nap_first=True)}


def open_store(db: str) -> CheckpointStore:
    """The store a DB argument names (a SQLite path or a PostgreSQL URL)."""
    if db.startswith("postgresql://"):
        from durable_flow.store.postgres._postgres import PostgresStore

        return PostgresStore(db, max_size=2)
    from durable_flow.store.sqlite._sqlite import SqliteStore

    return SqliteStore(db)


async def child(db: str, run_id: str, scenario: str, action: str) -> None:
    """Start, resume, or send an event to the run; die at CRASH_POINT."""
    wf = SCENARIOS[scenario]()
    async with Runtime(open_store(db), lease_ttl=1.0) as rt:
        if action == "send":
            await rt.send_event(run_id, "paid", int(os.environ.get("EVENT", "1")))
            if POINT == "sent":
                die()
            return
        events = rt.stream(wf, {}, run_id=run_id) if action == "start" \
            else rt.stream_resume(wf, run_id)
        async for event in events:
            if event.kind == "run_waiting" and POINT == "waiting":
                die()


if __name__ == "__main__":
    asyncio.run(child(*sys.argv[1:5]))
