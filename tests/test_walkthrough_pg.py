"""The README and the workers guide followed as a newcomer would, on PostgreSQL.

Real processes only: runs submitted from one Python process, two
`durable-flow worker` processes serving them, answers and events given from
the command line in a directory without the workflow's code, one worker
killed with SIGKILL while it executes, and every run completing.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import forkrun
import pytest
from clikit import CONSOLE_SCRIPT
from pgdb import fresh_database

from durable_flow import PostgresStore, Runtime

pytestmark = [pytest.mark.crash, pytest.mark.fleet]

SHOP = textwrap.dedent('''
    import asyncio
    import os
    from pathlib import Path

    from pydantic import BaseModel

    from durable_flow import END, Blackboard, WorkflowBuilder

    class Payment(BaseModel):
        amount: int

    class Order(Blackboard):
        item: str = ""
        ok: bool = False
        paid: int = 0
        packed: str = ""

    async def approve(state, ctx):
        return {"ok": await ctx.request({"item": state.item}, response_type=bool)}

    async def pay(state, ctx):
        return {"paid": (await ctx.wait_event("paid", response_type=Payment)).amount}

    async def pack(state, ctx):
        (Path(os.environ["WALK_DIR"]) / f"packing-{state.item}-{os.getpid()}").touch()
        await asyncio.sleep(1.5)
        return {"packed": state.item}

    b = WorkflowBuilder("order", state=Order)
    b.add_node("approve", approve)
    b.add_node("pay", pay)
    b.add_node("pack", pack)
    b.set_entry("approve").add_edge("approve", "pay").add_edge("pay", "pack")
    b.add_edge("pack", END)
    order = b.build()
''')

SUBMIT = textwrap.dedent('''
    import asyncio, sys
    from durable_flow import PostgresStore, Runtime
    from shop import order

    async def main():
        async with Runtime(PostgresStore(sys.argv[1])) as rt:
            for item in ("desk", "lamp"):
                await rt.submit(order, {"item": item}, run_id=f"order-{item}")

    asyncio.run(main())
''')

ITEMS = ("desk", "lamp")


def _env(code_dir: Path, walk_dir: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(code_dir), "WALK_DIR": str(walk_dir),
            "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "200"}


def _until(what: Callable[[], bool], seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not what():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.25)  # each look opens a store


def test_a_newcomer_runs_a_fleet_on_postgresql(tmp_path: Path) -> None:
    code, elsewhere = tmp_path / "app", tmp_path / "ops"
    code.mkdir()
    elsewhere.mkdir()  # the operator's directory: no workflow code here
    (code / "shop.py").write_text(SHOP)
    (code / "submit.py").write_text(SUBMIT)
    with fresh_database() as dsn:
        def cli(*args: str) -> Any:
            """``durable-flow --db DSN ARGS --json`` from the operator's directory."""
            env = {**_env(elsewhere, tmp_path), "PYTHONPATH": ""}
            done = forkrun.run([CONSOLE_SCRIPT, "--db", dsn, *args, "--json"], cwd=elsewhere,
                               env=env, timeout=60, console=True)
            assert done.returncode == 0, (args, done.stdout, done.stderr)
            return json.loads(done.stdout)

        def statuses() -> dict[str, str]:
            """Watched from the test (the newcomer would look at `durable-flow runs`)."""
            async def read() -> dict[str, str]:
                async with Runtime(PostgresStore(dsn)) as rt:
                    return {r.run_id: r.status.value for r in await rt.list_runs()}

            return asyncio.run(read())

        def open_requests() -> int:
            async def read() -> int:
                async with Runtime(PostgresStore(dsn)) as rt:
                    return len(await rt.pending_requests())

            return asyncio.run(read())

        submitted = forkrun.run([code / "submit.py", dsn], cwd=code, env=_env(code, tmp_path),
                                timeout=60, plain=True)
        assert submitted.returncode == 0, submitted.stderr
        assert set(statuses().values()) == {"queued"}
        logs = {name: tmp_path / f"{name}.log" for name in ("wA", "wB")}
        workers = [forkrun.start(
            [CONSOLE_SCRIPT, "--db", dsn, "worker", "shop:order", "--name", name,
             "--lease-ttl", "2", "--poll-interval", "0.2"],
            cwd=code, env=_env(code, tmp_path), log=log, console=True)
            for name, log in logs.items()]
        try:
            _until(lambda: open_requests() == len(ITEMS))
            for request in cli("inbox"):  # answered without the workflow's code
                answered = cli("respond", request["run_id"], request["id"], "--value", "true")
                assert answered["status"] in ("queued", "running", "waiting")
            _until(lambda: set(statuses().values()) == {"waiting"} and not open_requests())
            for item in ITEMS:
                cli("send-event", f"order-{item}", "paid", "--value", '{"amount": 5}')
            _until(lambda: any(tmp_path.glob("packing-*")))
            first = next(tmp_path.glob("packing-*"))
            victim = int(first.name.rsplit("-", 1)[1])
            [killed] = [w for w in workers if w.pid == victim]
            killed.send_signal(signal.SIGKILL)
            killed.wait(timeout=30)
            _until(lambda: set(statuses().values()) == {"completed"}, seconds=30)
            assert {r["status"] for r in cli("runs")} == {"completed"}
        finally:
            for w in workers:
                if w.poll() is None:
                    w.send_signal(signal.SIGTERM)
            for w in workers:
                w.wait(timeout=30)
        for item in ITEMS:
            state = cli("show", f"order-{item}")["snapshot"]["values"]
            assert state["packed"] == item and state["paid"] == 5 and state["ok"] is True
        survivor = next(w for w in workers if w is not killed)
        log = logs["wA" if survivor is workers[0] else "wB"].read_text()
        assert survivor.returncode == 0, log
        assert "run_claimed" in log
        item = first.name.split("-")[1]
        # the survivor took over the run the killed worker was packing
        claims = [x for x in log.splitlines() if "run_claimed" in x]
        assert any(f"order-{item}" in line for line in claims), claims
