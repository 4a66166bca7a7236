"""What the web UI tests share: their workflows, a real server, a headless browser.

The workflows are importable as ``uikit:approval`` (and so on), so the tests
start the server the way a user does: ``durable-flow --db FILE ui
uikit:approval ...`` in a subprocess, on a free localhost port. The browser
is Debian's Chromium driven by Playwright (never a downloaded browser).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

import forkrun
from clikit import CONSOLE_SCRIPT
from pydantic import BaseModel, Field

from durable_flow import END, Blackboard, Message, WorkflowBuilder, append

HERE = Path(__file__).resolve().parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TARGETS = ["uikit:approval", "uikit:review", "uikit:parent", "uikit:slow", "uikit:research"]


class Draft(Blackboard):
    topic: str = ""
    approved: bool = False


class Verdict(BaseModel):
    score: int = Field(ge=0, le=10, description="0 (worst) to 10 (best)")
    verdict: Literal["accept", "reject"]
    comment: str | None = None
    tags: list[str] = []


class Paper(Blackboard):
    title: str = ""
    score: int = -1
    verdict: str = ""
    tags: list[str] = []


def _approval() -> Any:
    b = WorkflowBuilder("approval", state=Draft)

    @b.node()
    async def draft(state: Draft, ctx: Any) -> dict[str, Any]:
        ctx.remember(Message.user(f"write about {state.topic}"),
                     Message.assistant(f"Here is a draft about {state.topic}."))
        return {}

    @b.node()
    async def approve(state: Draft, ctx: Any) -> dict[str, Any]:
        ok = await ctx.request({"question": f"Publish {state.topic}?"}, response_type=bool)
        return {"approved": ok}

    b.set_entry("draft").add_edge("draft", "approve").add_edge("approve", END)
    return b.build()


def _review() -> Any:
    b = WorkflowBuilder("review", state=Paper)

    @b.node()
    async def referee(state: Paper, ctx: Any) -> dict[str, Any]:
        v = await ctx.request({"question": f"Review {state.title!r}"}, response_type=Verdict)
        return {"score": v.score, "verdict": v.verdict, "tags": list(v.tags)}

    b.set_entry("referee").add_edge("referee", END)
    return b.build()


def _parent() -> Any:
    inner = WorkflowBuilder("legal", state=Draft)

    @inner.node()
    async def sign(state: Draft, ctx: Any) -> dict[str, Any]:
        ok = await ctx.request({"question": f"Sign off {state.topic}?"}, response_type=bool)
        return {"approved": ok}

    inner.set_entry("sign").add_edge("sign", END)
    b = WorkflowBuilder("contract", state=Draft)
    b.add_subworkflow("legal", inner.build(), inputs=["topic"], outputs=["approved"])
    b.set_entry("legal").add_edge("legal", END)
    return b.build()


def _slow() -> Any:
    b = WorkflowBuilder("slow", state=Draft)

    @b.node()
    async def approve(state: Draft, ctx: Any) -> dict[str, Any]:
        ok = await ctx.request({"question": f"Start {state.topic}?"}, response_type=bool)
        return {"approved": ok}

    @b.node()
    async def work(state: Draft, ctx: Any) -> dict[str, Any]:
        await asyncio.sleep(1.5)  # long enough to watch the run page follow it
        return {}

    b.set_entry("approve").add_edge("approve", "work").add_edge("work", END)
    return b.build()


class Study(Blackboard):
    topic: str = ""
    notes: Annotated[list[str], append] = []
    approved: bool = False


#: set by a test to hold the research branch of ``research`` (None: it does not wait)
research_gate: asyncio.Event | None = None


def _research() -> Any:
    """``waits="branch"``: research goes on while ``approve`` is parked; ``report`` joins both."""
    b = WorkflowBuilder("research", state=Study, waits="branch")

    @b.node()
    async def brief(state: Study) -> dict[str, Any]:
        return {}

    @b.node()
    async def approve(state: Study, ctx: Any) -> dict[str, Any]:
        ok = await ctx.request({"question": f"Fund {state.topic}?"}, response_type=bool)
        return {"approved": ok}

    @b.node()
    async def market(state: Study) -> dict[str, Any]:
        return {"notes": ["market"]}

    @b.node()
    async def check(state: Study) -> dict[str, Any]:
        if research_gate is not None:
            await research_gate.wait()
        return {"notes": ["checked"]}

    @b.node()
    async def report(state: Study) -> dict[str, Any]:
        return {"notes": ["report"]}

    b.set_entry("brief").add_edge("brief", "approve").add_edge("brief", "market")
    b.add_edge("market", "check").add_fan_in(["approve", "check"], "report")
    b.add_edge("report", END)
    return b.build()


class Claim(Blackboard):
    claimant: str = ""
    amount: int = 0
    deadline: float = 3600.0
    approved: bool | None = None


def _expense() -> Any:
    """An expense for the finance role: small ones by policy, escalated to managers at the deadline."""
    from datetime import timedelta

    from durable_flow import Policy

    b = WorkflowBuilder("expense", state=Claim)

    @b.node()
    async def approve(state: Claim, ctx: Any) -> dict[str, Any]:
        claim = {"question": f"Approve {state.amount} EUR for {state.claimant}?",
                 "claimant": state.claimant, "amount": state.amount}
        answer = await ctx.request(claim, bool, roles=["finance"],
                                   timeout=timedelta(seconds=state.deadline),
                                   escalate_to=["role:manager"], default=False,
                                   policy=Policy("small", "amount < 100", True))
        return {"approved": answer}

    b.set_entry("approve").add_edge("approve", END)
    return b.build()


approval = _approval()
expense = _expense()
slow = _slow()
review = _review()
parent = _parent()
research = _research()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def ui_server(db: Path, *args: str, port: int | None = None,
              env: dict[str, str] | None = None) -> Iterator[str]:
    """``durable-flow --db DB ui ARGS`` in a process of its own; yields its base URL.

    The console script is forked from the test process's warm server
    (``forkrun.start``), so a server costs its start-up, not an interpreter's.
    """
    port = port or free_port()
    with tempfile.TemporaryDirectory(prefix="ui-server-") as folder:
        log = Path(folder, "ui.log")
        proc = forkrun.start([CONSOLE_SCRIPT, "--db", str(db), "ui", *args, "--port", str(port)],
                             env={**os.environ, **(env or {})}, log=log, cwd=HERE, console=True)
        try:
            _wait_listening(proc, port, log)
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait_listening(proc: forkrun.Child, port: int, log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"ui server exited {proc.returncode}: {log.read_text()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise TimeoutError(f"ui server did not listen on {port}")


@contextlib.contextmanager
def browser() -> Iterator[Any]:
    """Headless Chromium from /usr/bin/chromium through Playwright."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def expect(actual: Any, message: str | None = None) -> Any:
    """Playwright's ``expect``, imported when first used (not when a browser test file is
    collected: importing Playwright costs every test process a third of a second)."""
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(actual, message)
