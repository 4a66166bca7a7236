"""Where the parts of the command line meet: answers and events without workflow code,
usage errors, one-line refusals; each through the real console script."""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clikit import one_error_line, project_db, script

from durable_flow import RunStatus, Runtime, SqliteStore

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
''')


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    yield from project_db(tmp_path, monkeypatch, MODULE, FLOWS)


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
    assert script(db.parent, "run", f"{MODULE}:order", "--run-id", "r1").returncode == 0
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
