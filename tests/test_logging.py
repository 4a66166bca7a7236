"""configure_logging: every engine and node line carries run id, node path and superstep."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from durable_flow import (
    Blackboard,
    MemoryStore,
    RetryPolicy,
    RunStatus,
    Runtime,
    WorkflowBuilder,
    configure_logging,
)


class State(Blackboard):
    done: bool = False


@pytest.fixture(autouse=True)
def _reset_structlog() -> Iterator[None]:
    yield
    structlog.reset_defaults()


def _workflow() -> Any:
    async def talk(state: State, ctx: Any) -> dict[str, Any]:
        ctx.log.info("thinking", detail="x")
        return {"done": True}

    def boom(state: State) -> None:
        raise ValueError("no tide")

    inner = WorkflowBuilder("inner", state=State)
    inner.add_node("talk", talk)
    inner.set_entry("talk")
    b = WorkflowBuilder("logged", state=State)
    b.add_subworkflow("review", inner.build(), inputs=[], outputs={})
    b.add_node("boom", boom, retry=RetryPolicy(max_attempts=2, initial_delay=0, jitter=False))
    b.set_entry("review")
    b.add_edge("review", "boom")
    return b.build()


async def _run() -> str:
    async with Runtime(MemoryStore()) as rt:
        result = await rt.run(_workflow(), {}, run_id="run-1")
    assert result.status is RunStatus.FAILED
    return result.run_id


async def test_json_lines_are_bound_with_run_node_and_superstep() -> None:
    out = io.StringIO()
    configure_logging(json=True, stream=out)
    await _run()
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(e["event"], e.get("node"), e.get("superstep")) for e in lines] == [
        ("run_started", None, 0),
        ("thinking", "review.talk", 1),
        ("node_retrying", "boom", 2),
        ("node_failed", "boom", 2),
        ("run_failed", None, None),
    ]
    assert {e["run_id"] for e in lines} == {"run-1"}
    assert [e["level"] for e in lines] == ["info", "info", "warning", "error", "error"]
    assert lines[1]["detail"] == "x" and "timestamp" in lines[1]
    assert lines[3]["error"] == "ValueError: no tide"
    assert "Traceback" in lines[3]["exception"] and "no tide" in lines[3]["exception"]
    assert lines[4]["failed_node"] == "boom" and lines[4]["status"] == "failed"


async def test_debug_lines_cover_supersteps_nodes_checkpoints_and_leases() -> None:
    out = io.StringIO()
    configure_logging(json=True, level="debug", stream=out)
    await _run()
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    events = [e["event"] for e in lines]
    assert events[0] == "lease_acquired" and events[-1] == "lease_released"
    steps = [(e["event"], e.get("namespace", ""), e.get("node"), e["superstep"]) for e in lines
             if e["event"] in ("superstep_started", "node_started", "node_completed",
                               "checkpoint_saved")]
    assert steps == [
        ("superstep_started", "", None, 1), ("node_started", "", "review", 1),
        ("superstep_started", "review", None, 1), ("node_started", "review", "review.talk", 1),
        ("node_completed", "review", "review.talk", 1), ("checkpoint_saved", "review", None, 1),
        ("node_completed", "", "review", 1), ("checkpoint_saved", "", None, 1),
        ("superstep_started", "", None, 2), ("node_started", "", "boom", 2),
    ]
    assert {e["level"] for e in lines if e["event"] in ("superstep_started", "node_started",
                                                        "lease_acquired")} == {"debug"}


async def test_request_and_answer_lines_at_info() -> None:
    class Q(Blackboard):
        ok: bool = False

    async def ask(state: Q, ctx: Any) -> dict[str, Any]:
        return {"ok": await ctx.request({"q": "?"}, response_type=bool)}

    b = WorkflowBuilder("asks", state=Q)
    b.add_node("ask", ask)
    b.set_entry("ask")
    wf = b.build()
    out = io.StringIO()
    configure_logging(json=True, stream=out)
    async with Runtime(MemoryStore()) as rt:
        first = await rt.run(wf, {}, run_id="q1")
        await rt.resume(wf, "q1", responses={first.pending_requests[0].id: True})
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [e["event"] for e in lines] == ["run_started", "request_issued", "run_waiting",
                                           "request_answered", "run_completed"]
    assert lines[1]["request_id"] == "ask@1#0" and lines[1]["node"] == "ask"
    assert lines[2]["pending_requests"] == ["ask@1#0"]


async def test_info_and_debug_lines_wait_for_structlog_to_be_configured(
        capsys: pytest.CaptureFixture[str]) -> None:
    structlog.reset_defaults()  # structlog's defaults print every level to stdout
    await _run()
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing on the application's standard output
    err = captured.err
    assert "run_started" not in err and "superstep_started" not in err
    assert "node_failed" in err and "run_failed" in err


async def test_console_lines_are_readable_and_uncoloured_off_a_terminal() -> None:
    out = io.StringIO()
    configure_logging(stream=out)
    await _run()
    text = out.getvalue()
    assert "\x1b[" not in text
    failed = next(line for line in text.splitlines() if "node_failed" in line)
    for part in ("error", "run_id=run-1", "node=boom", "superstep=2"):
        assert part in failed


async def test_level_drops_lower_lines() -> None:
    out = io.StringIO()
    configure_logging(json=True, level="error", stream=out)
    await _run()
    assert [json.loads(line)["event"] for line in out.getvalue().splitlines()] == [
        "node_failed", "run_failed"]


async def test_default_stream_is_the_current_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json=True)
    await _run()
    captured = capsys.readouterr()
    assert captured.out == ""
    assert '"event":"node_failed"' in captured.err


def test_an_unknown_level_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown log level 'LOUD'"):
        configure_logging(level="LOUD")
