"""Where the parts of the command line meet: answers and events without workflow code,
usage errors, one-line refusals; each through the real console script."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clikit import CONSOLE_SCRIPT, one_error_line, project_db, script

from durable_flow import RunStatus, Runtime, SqliteStore, load_workflow

pytestmark = pytest.mark.process

MODULE = "orderflows"

FLOWS = textwrap.dedent('''
    from pydantic import BaseModel

    from durable_flow import END, Blackboard, WorkflowBuilder

    class Payment(BaseModel):
        amount: int

    class Order(Blackboard):
        ok: bool = False
        paid: int = 0

    async def approve(state, ctx):
        return {"ok": await ctx.request({"q": "ok?"}, response_type=bool)}

    async def pay(state, ctx):
        return {"paid": (await ctx.wait_event("paid", response_type=Payment)).amount}

    b = WorkflowBuilder("order", state=Order)
    b.add_node("approve", approve)
    b.add_node("pay", pay)
    b.set_entry("approve").add_edge("approve", "pay").add_edge("pay", END)
    order = b.build()

    async def hello(state, ctx):
        ctx.log.info("hello_info")
        ctx.log.warning("hello_warning")
        return {}

    registry = {"hello": hello}
''')

FLOW_FILE = """{"nodes": [{"id": "hello", "agent_name": "hello", "is_entry": true, "is_exit": true}],
 "connections": []}"""


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sqlite_at_head: Path) -> Iterator[Path]:
    yield from project_db(tmp_path, monkeypatch, MODULE, FLOWS, sqlite_at_head)


def order() -> Any:
    import orderflows  # type: ignore[import-not-found]

    return orderflows.order


def library(db: Path, body: Any) -> Any:
    """Run ``body(rt)`` on the database from this process, as a library user would."""

    async def go() -> Any:
        async with Runtime(SqliteStore(db)) as rt:
            return await body(rt)

    return asyncio.run(go())


def started_by_library(db: Path) -> str:
    """A run waiting for its approval, started from Python (no workflow recorded)."""

    async def body(rt: Runtime) -> str:
        result = await rt.run(order(), run_id="r1")
        return result.pending_requests[0].id

    return library(db, body)


def status(db: Path, run_id: str = "r1") -> RunStatus:
    async def body(rt: Runtime) -> RunStatus:
        return (await rt.get_run(run_id)).status

    return library(db, body)


# -- 1. answers from the command line, without workflow code ------------------------------


def test_respond_to_a_run_with_no_recorded_workflow_only_records_the_answer(db: Path) -> None:
    request_id = started_by_library(db)
    done = script(db.parent, "respond", "r1", request_id, "--value", "true")
    assert done.returncode == 0, done.stderr
    assert f"answered {request_id} on run r1: now queued" in done.stdout
    assert status(db) is RunStatus.QUEUED  # nothing ran here: a worker continues it

    async def resume(rt: Runtime) -> Any:
        return await rt.resume(order(), "r1")

    assert library(db, resume).status is RunStatus.WAITING  # now at the payment


def test_respond_no_resume_records_the_answer_of_a_run_started_by_the_cli(db: Path) -> None:
    started = script(db.parent, "run", f"{MODULE}:order", "--run-id", "r1")
    assert started.returncode == 0, started.stderr
    done = script(db.parent, "respond", "r1", "approve@1#0", "--value", "true", "--no-resume")
    assert done.returncode == 0, done.stderr
    assert "now queued" in done.stdout and "using" not in done.stdout
    assert status(db) is RunStatus.QUEUED
    one_error_line(script(db.parent, "respond", "r1", "approve@1#0", "--value", "true",
                          "--no-resume", "--workflow", f"{MODULE}:order"), 2, "--no-resume")


def test_respond_without_workflow_code_refuses_bad_answers_in_one_line(db: Path) -> None:
    request_id = started_by_library(db)
    one_error_line(script(db.parent, "respond", "r1", "nope@1#0", "--value", "true"), 1,
                   "no pending request 'nope@1#0'", f"pending: {request_id}")
    one_error_line(script(db.parent, "respond", "r1", request_id, "--value", '"x"'), 1,
                   "expected JSON schema")
    assert status(db) is RunStatus.WAITING


# -- 2. events are checked against the waiting node's type --------------------------------


def test_send_event_refuses_a_payload_that_does_not_fit_and_the_run_goes_on(db: Path) -> None:
    request_id = started_by_library(db)
    assert script(db.parent, "respond", "r1", request_id, "--value", "true").returncode == 0

    async def resume(rt: Runtime) -> Any:
        return await rt.resume(order(), "r1")

    assert library(db, resume).status is RunStatus.WAITING  # waits for "paid"
    one_error_line(script(db.parent, "send-event", "r1", "paid", "--value",
                          '{"amount": "lots"}'), 1, "does not fit", "'pay'")
    assert script(db.parent, "send-event", "r1", "paid").returncode == 2  # no --value
    assert status(db) is RunStatus.WAITING
    sent = script(db.parent, "send-event", "r1", "paid", "--value", '{"amount": 5}')
    assert sent.returncode == 0 and "now queued" in sent.stdout, sent.stderr
    done = library(db, resume)
    assert done.status is RunStatus.COMPLETED and done.state.paid == 5


# -- 9. one line per error, exit 2 for what cannot be parsed ------------------------------


def test_errors_from_respond_on_a_recorded_run_are_one_line(db: Path) -> None:
    started = script(db.parent, "run", f"{MODULE}:order", "--run-id", "r1")
    assert started.returncode == 0, started.stderr
    # 8. the superstep that stopped is numbered as its request id is (approve@1#0)
    assert "run r1 waiting in superstep 1" in started.stdout, started.stdout
    one_error_line(script(db.parent, "respond", "r1", "no-such-request", "--value", "true"), 1,
                   "no pending request")
    one_error_line(script(db.parent, "respond", "r1", "approve@1#0", "--value", '"x"'), 1,
                   "is invalid")
    answered = script(db.parent, "respond", "r1", "approve@1#0", "--value", "true")
    assert answered.returncode == 0 and "using orderflows:order" in answered.stdout


@pytest.mark.parametrize("args", [
    ["respond", "r1", "approve@1#0", "--value", "{yes"],
    ["run", f"{MODULE}:order", "--input", "{'a': 1}"],
    ["run", f"{MODULE}:order", "--input", "[1]"],
    ["send-event", "r1", "paid", "--value", "{"],
])
def test_json_that_does_not_parse_is_a_usage_error(db: Path, args: list[str]) -> None:
    one_error_line(script(db.parent, *args), 2, "JSON")


# -- 3, 5. a worker serves declarative files with --registry, and says what it claims ------


def spawn(cwd: Path, *args: str) -> subprocess.Popen[str]:
    """The real console script as a long-running process (a worker, the web UI)."""
    env = {**__import__("os").environ, "DURABLE_FLOW_DB": str(cwd / "runs.db"),
           "PYTHONPATH": str(cwd), "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "200"}
    return subprocess.Popen([str(CONSOLE_SCRIPT), *args], cwd=cwd, env=env, text=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def test_a_worker_needs_the_registry_of_a_declarative_file_and_logs_its_claims(
        db: Path) -> None:
    (db.parent / "hello.json").write_text(FLOW_FILE)
    one_error_line(script(db.parent, "worker", "hello.json"), 1, "--registry")
    one_error_line(script(db.parent, "ui", "hello.json"), 1, "--registry")
    worker = spawn(db.parent, "worker", "hello.json", "--registry", f"{MODULE}:registry",
                   "--poll-interval", "0.1", "--name", "w1")
    try:
        import orderflows

        wf = load_workflow(db.parent / "hello.json", orderflows.registry)

        async def submit(rt: Runtime) -> Any:
            info = await rt.submit(wf, run_id="h1")
            return await rt.wait(info.run_id, timeout=30)

        assert library(db, submit).status is RunStatus.COMPLETED
    finally:
        worker.send_signal(signal.SIGTERM)
        out, err = worker.communicate(timeout=30)
    assert worker.returncode == 0, err
    claims = [x for x in err.splitlines() if "run_claimed" in x]
    assert claims and "run_id=h1" in claims[0] and "worker=w1" in claims[0], err
    assert "hello_info" in err and "hello_warning" in err  # the worker logs at INFO
    # its start-up heap (modules, workflows, statements) is left out of full collections
    frozen = [x for x in err.splitlines() if "worker_heap_frozen" in x]
    assert frozen and "worker=w1" in frozen[0], err
    assert int(frozen[0].split("objects=")[1].split()[0]) > 10_000, frozen
    assert "serving hello@1" in out


def test_a_library_without_logging_configured_writes_only_warnings_to_stderr(
        db: Path) -> None:
    code = textwrap.dedent('''
        import asyncio
        from durable_flow import MemoryStore, Runtime, WorkflowBuilder, END
        import orderflows

        b = WorkflowBuilder("quiet")
        b.add_node("hello", orderflows.hello)
        b.set_entry("hello").add_edge("hello", END)

        async def main():
            async with Runtime(MemoryStore()) as rt:
                assert (await rt.run(b.build())).status.value == "completed"

        asyncio.run(main())
    ''')
    child = subprocess.run([sys.executable, "-c", code], cwd=db.parent, capture_output=True,
                           text=True, timeout=60, env={**__import__("os").environ,
                                                       "PYTHONPATH": str(db.parent)})
    assert child.returncode == 0, child.stderr
    assert child.stdout == ""
    assert "hello_warning" in child.stderr and "hello_info" not in child.stderr


# -- 6. the web UI: a bad port, a port in use, a file.py:NAME target -------------------------


def test_ui_refuses_bad_ports_in_one_line_and_takes_file_targets(db: Path) -> None:
    assert script(db.parent, "ui", "--port", "99999").returncode == 2
    assert "Traceback" not in script(db.parent, "ui", "--port", "99999").stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        one_error_line(script(db.parent, "ui", "--port", str(port)), 1,
                       f"cannot listen on 127.0.0.1:{port}", "in use")
    server = spawn(db.parent, "ui", f"{MODULE}.py:order", "--port", str(port))
    try:
        deadline, line = time.monotonic() + 30, ""
        assert server.stdout is not None
        while "durable-flow ui on" not in line and time.monotonic() < deadline:
            line = server.stdout.readline()
        assert "runs here: order@1" in line, line
    finally:
        server.send_signal(signal.SIGINT)
        server.communicate(timeout=30)
