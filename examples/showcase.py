"""The durable-flow showcase (``make demo``).

1. A child process starts a run on ``demo.db``: three research tasks run in
   parallel, each recording its work as a durable step.
2. While the run is mid-way, the child is killed with SIGKILL.
3. This process resumes the run: nothing that was committed runs again.
4. The run pauses for a person's approval inside the ``review`` sub-workflow;
   the approval is answered and the run finishes.
5. It prints the ``durable-flow`` commands to inspect what it left.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

from rich.console import Console
from rich.table import Table

from durable_flow import (
    Blackboard,
    NodeContext,
    RunLockedError,
    RunStatus,
    Runtime,
    SqliteStore,
    WorkflowBuilder,
    add,
    append,
)

DB = Path(os.environ.get("DEMO_DB", "demo.db"))
LOG = DB.with_suffix(".log")
RUN_ID = "showcase-run"
console = Console()


class Signoff(Blackboard):
    summary: str = ""
    approved: bool = False


class Report(Blackboard):
    topic: str = ""
    sources: Annotated[list[str], append] = []
    pages: Annotated[int, add] = 0
    summary: str = ""
    approved: bool = False


def note(line: str) -> None:
    with LOG.open("a") as fh:
        fh.write(line + "\n")


def fetcher(name: str, seconds: float) -> Any:
    async def fetch(state: Report, ctx: NodeContext) -> dict[str, Any]:
        note(f"{name} started")

        async def work() -> int:
            await asyncio.sleep(seconds)
            note(f"{name} did its work")
            return len(name) * 3

        pages = await ctx.step("download", work)
        return {"sources": [f"{name}: {pages} pages on {state.topic}"], "pages": pages}

    return fetch


def build() -> Any:
    legal = WorkflowBuilder("signoff", state=Signoff)

    @legal.node()
    async def approve(state: Signoff, ctx: NodeContext) -> dict[str, Any]:
        ok = await ctx.request({"summary": state.summary, "question": "publish?"},
                               response_type=bool)
        return {"approved": ok}

    legal.set_entry("approve")

    b = WorkflowBuilder("showcase", state=Report)
    b.add_node("plan", lambda s: {"sources": [f"plan for {s.topic}"]})
    for name, secs in (("archive", 0.2), ("papers", 0.3), ("news", 0.4)):
        b.add_node(name, fetcher(name, secs))
        b.add_edge("plan", name)

    async def summarize(state: Report) -> dict[str, Any]:
        note("summarize started")
        await asyncio.sleep(3.0)  # long work: the demo kills the process here
        return {"summary": f"{state.pages} pages from {len(state.sources) - 1} sources"}

    b.add_node("summarize", summarize)
    b.add_fan_in(["archive", "papers", "news"], "summarize")
    b.add_subworkflow("review", legal.build(), inputs=["summary"], outputs=["approved"])
    b.add_edge("summarize", "review")
    b.set_entry("plan")
    return b.build()


workflow = build()


async def child() -> None:
    async with Runtime(SqliteStore(DB), lease_ttl=2.0) as rt:
        await rt.run(workflow, {"topic": "tides"}, run_id=RUN_ID,
                     workflow_ref="examples.showcase:workflow")


async def wait_for_superstep(n: int, proc: asyncio.subprocess.Process) -> None:
    async with Runtime(SqliteStore(DB)) as rt:
        while proc.returncode is None:
            runs = await rt.list_runs()
            if runs and any(cp.superstep >= n for cp in await rt.history(RUN_ID)):
                return
            await asyncio.sleep(0.05)


async def resume_after_crash() -> Any:
    async with Runtime(SqliteStore(DB)) as rt:
        for _ in range(100):
            try:
                return await rt.resume(workflow, RUN_ID)
            except RunLockedError:
                await asyncio.sleep(0.1)  # the dead child's lease has not expired yet
    raise RuntimeError("lease never expired")


def show_log(title: str) -> None:
    counts = Counter(LOG.read_text().splitlines())
    table = Table(title=title)
    table.add_column("what happened")
    table.add_column("times", justify="right")
    for line, times in counts.items():
        table.add_row(line, str(times))
    console.print(table)


async def parent() -> None:
    for path in (DB, LOG, Path(f"{DB}-wal"), Path(f"{DB}-shm")):
        path.unlink(missing_ok=True)
    console.rule("[bold]durable-flow showcase")
    console.print("1. A child process starts the run: plan, then 3 parallel fetches, then a summary.")
    proc = await asyncio.create_subprocess_exec(sys.executable, __file__, "--child")
    await wait_for_superstep(2, proc)
    await asyncio.sleep(0.5)  # let the summary start
    console.print(f"2. The fetches are committed; [red]SIGKILL[/red] to the child (pid {proc.pid}).")
    proc.send_signal(signal.SIGKILL)
    await proc.wait()
    show_log("before the crash")
    console.print("3. Resuming the run in this process...")
    result = await resume_after_crash()
    show_log("after resuming: the fetches did not run again")
    assert result.status is RunStatus.WAITING
    [req] = result.pending_requests
    console.print(f"4. The run waits for [bold]{req.node}[/bold]: {req.payload}")
    console.print("   Answering as the approver: yes.")
    async with Runtime(SqliteStore(DB)) as rt:
        result = await rt.resume(workflow, RUN_ID, responses={req.id: True})
    console.print(f"   status: [green]{result.status.value}[/green], state: {result.state}")
    console.rule("Inspect what it left")
    # every command shown has something to show: the run is complete, so the
    # inbox is empty and is left out
    for cmd in SUGGESTED:
        console.print(f"  .venv/bin/durable-flow --db {DB} {cmd}")


SUGGESTED = ("runs", f"show {RUN_ID}", f"history {RUN_ID}",
             f"history {RUN_ID} --namespace review", f"diff {RUN_ID} @0 @1")


if __name__ == "__main__":
    asyncio.run(child() if "--child" in sys.argv else parent())
