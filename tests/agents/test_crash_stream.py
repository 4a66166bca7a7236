"""SIGKILL in the middle of a streamed reply, then resume: the model call is made again (a
new attempt; the cut one is marked in read_stream), the tool that already ran is not."""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter
from pathlib import Path

import crashkit_stream as kit
import forkrun
import pytest

from durable_flow import RunLockedError, RunStatus, Runtime
from durable_flow.store.sqlite._sqlite import SqliteStore

pytestmark = pytest.mark.crash


async def test_a_reply_cut_by_sigkill_is_asked_again_and_the_tool_is_not_run_again(
        tmp_path: Path) -> None:
    db, log = tmp_path / "runs.db", tmp_path / "exec.log"
    env = {**os.environ, "CRASH_LOG": str(log), "CRASH_POINT": "mid-stream"}
    proc = forkrun.run([kit.__file__, db, "trip-1"], env=env, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert Counter(log.read_text().split()) == {
        "model:ask-tool": 1, "tool:forecast": 1, "model:reply": 1}

    os.environ["CRASH_LOG"] = str(log)  # this process's calls go to the same log
    try:
        async with Runtime(SqliteStore(db)) as rt:
            for _ in range(100):  # the dead child's lease expires after its lease_ttl
                try:
                    result = await rt.resume(kit.workflow(), "trip-1")
                    break
                except RunLockedError:
                    await asyncio.sleep(0.1)
            assert result.status is RunStatus.COMPLETED, result.error
            assert result.state.answer == "".join(kit.WORDS)
            entries = await rt.read_stream("trip-1")
    finally:
        del os.environ["CRASH_LOG"]
    # the reply was asked for again; the recorded first call and the tool were not
    assert Counter(log.read_text().split()) == {
        "model:ask-tool": 1, "tool:forecast": 1, "model:reply": 2}
    tools = [e.kind for e in entries if e.kind != "model_delta"]
    assert tools == ["tool_started", "tool_finished"]
    deltas = [e for e in entries if e.kind == "model_delta"]
    cut, kept = [e for e in deltas if e.cut], [e for e in deltas if not e.cut]
    assert "".join(e.data["text"] for e in cut).startswith("Pack a coat")
    assert {e.epoch for e in cut} == {1} and {e.epoch for e in kept} == {2}
    assert "".join(e.data["text"] for e in kept) == "".join(kit.WORDS)
    assert [e.seq for e in entries] == sorted(e.seq for e in entries)
