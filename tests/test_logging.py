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
    assert [(e["event"], e["node"], e["superstep"]) for e in lines] == [
        ("thinking", "review.talk", 1),
        ("node_retrying", "boom", 2),
        ("node_failed", "boom", 2),
    ]
    assert {e["run_id"] for e in lines} == {"run-1"}
    assert [e["level"] for e in lines] == ["info", "warning", "error"]
    assert lines[0]["detail"] == "x" and "timestamp" in lines[0]
    assert lines[2]["error"] == "ValueError: no tide"


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
    assert [json.loads(line)["event"] for line in out.getvalue().splitlines()] == ["node_failed"]


async def test_default_stream_is_the_current_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json=True)
    await _run()
    captured = capsys.readouterr()
    assert captured.out == ""
    assert '"event":"node_failed"' in captured.err


def test_an_unknown_level_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown log level 'LOUD'"):
        configure_logging(level="LOUD")
