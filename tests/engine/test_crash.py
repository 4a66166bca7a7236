"""Durability under SIGKILL: a child process dies at chosen points, the parent resumes.

Each test compares the resumed run's final blackboard with an uninterrupted
run of the same workflow, checks that no committed superstep was lost or
repeated, and counts node executions through a log file the nodes append to.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import crashkit
import forkrun
import pytest

from durable_flow import MemoryStore, RunLockedError, RunStatus, Runtime
from durable_flow.store.sqlite._sqlite import SqliteStore

pytestmark = pytest.mark.crash
KIT = Path(crashkit.__file__)


def spawn(db: Path, log: Path, scenario: str, point: str, run_id: str) -> int:
    env = {**os.environ, "CRASH_LOG": str(log), "CRASH_POINT": point}
    proc = forkrun.run([KIT, db, run_id, scenario], env=env, timeout=120)
    assert proc.returncode in (0, -signal.SIGKILL), proc.stderr
    return proc.returncode


async def resume_when_free(rt: Runtime, wf: Any, run_id: str, **kw: Any) -> Any:
    """Resume, waiting out the dead child's lease (it expires after lease_ttl)."""
    for _ in range(100):
        try:
            return await rt.resume(wf, run_id, **kw)
        except RunLockedError:
            await asyncio.sleep(0.1)
    raise AssertionError("the dead process' lease never expired")


async def reference(scenario: str) -> dict[str, Any]:
    wf = crashkit.SCENARIOS[scenario]()
    async with Runtime(MemoryStore()) as rt:
        r = await rt.run(wf, crashkit.INPUTS[scenario])
        if r.status is RunStatus.WAITING:
            r = await rt.resume(wf, r.run_id,
                                responses={q.id: True for q in r.pending_requests})
        assert r.status is RunStatus.COMPLETED
        return (await rt.get_state(r.run_id)).values


def executions(log: Path) -> Counter[str]:
    return Counter(log.read_text().split())


async def check_history(rt: Runtime, run_id: str) -> None:
    """Committed supersteps form one unbroken chain: none lost, none repeated.

    A resume inside a sub-workflow moves the superstep in progress onto a new
    checkpoint where nothing ran (same superstep, no nodes): not a repeat.
    """
    chain = list(reversed(await rt.history(run_id)))
    steps = [cp.superstep for i, cp in enumerate(chain)
             if not (i and cp.superstep == chain[i - 1].superstep and cp.nodes == ())]
    assert steps == list(range(len(steps)))


async def finish(db: Path, scenario: str, run_id: str, **kw: Any) -> dict[str, Any]:
    """Resume in this process, logging executions to the same file as the child."""
    wf = crashkit.SCENARIOS[scenario]()
    crashkit.LOG = db.with_name("exec.log")
    try:
        async with Runtime(SqliteStore(db)) as rt:
            result = await resume_when_free(rt, wf, run_id, **kw)
            assert result.status is RunStatus.COMPLETED, result.error
            await check_history(rt, run_id)
            return (await rt.get_state(run_id)).values
    finally:
        crashkit.LOG = None


@pytest.mark.parametrize("point", ["inside:loop:5", "after_commit:3", "after_commit:1"])
async def test_parallel_run_survives_sigkill(tmp_path: Path, point: str) -> None:
    db, log = tmp_path / "runs.db", tmp_path / "exec.log"
    assert spawn(db, log, "parallel", point, "r1") == -signal.SIGKILL
    before = executions(log)
    assert await finish(db, "parallel", "r1") == await reference("parallel")
    after = executions(log)
    repeated = {k: v for k, v in after.items() if v > 1}
    if point.startswith("inside:"):
        # only the task that was killed mid-way runs again
        assert repeated == {"loop@5": 2}
    else:
        assert repeated == {}, "a committed superstep ran again"
        step = int(point.rsplit(":", 1)[1])
        assert all(int(k.split("@")[1]) <= step for k in before)


async def test_finished_sibling_is_not_run_again(tmp_path: Path) -> None:
    db, log = tmp_path / "runs.db", tmp_path / "exec.log"
    assert spawn(db, log, "parallel", "sibling:b", "r1") == -signal.SIGKILL
    assert await finish(db, "parallel", "r1") == await reference("parallel")
    counts = executions(log)
    assert counts["a@2"] == 1 and counts["c@2"] == 1, "a saved sibling write was recomputed"
    assert counts["b@2"] == 2
    assert counts["start@1"] == 1


async def test_killed_while_waiting_then_answered_from_new_process(tmp_path: Path) -> None:
    db, log = tmp_path / "runs.db", tmp_path / "exec.log"
    assert spawn(db, log, "approval", "waiting", "r1") == -signal.SIGKILL
    async with Runtime(SqliteStore(db)) as rt:
        snap = await rt.get_state("r1")
        assert snap.status is RunStatus.WAITING
        [req] = snap.pending_requests
        assert req.node == "approve"
    values = await finish(db, "approval", "r1", responses={req.id: True})
    assert values == await reference("approval")
    assert executions(log)["SIDE-EFFECT"] == 1


async def test_durable_step_happens_once_across_request_retry_and_crash(tmp_path: Path) -> None:
    db, log = tmp_path / "runs.db", tmp_path / "exec.log"
    assert spawn(db, log, "approval", "waiting", "r1") == -signal.SIGKILL
    # a second process answers, runs the step, and dies right after it returned
    assert spawn(db, log, "approval", "after_step", "r1") == -signal.SIGKILL
    values = await finish(db, "approval", "r1")
    assert values["published"] == 1
    counts = executions(log)
    assert counts["SIDE-EFFECT"] == 1
    # child: attempt 1 fails after the step, attempt 2 dies; parent: fails once, then succeeds
    assert counts["publish@3"] == 4


async def test_crash_inside_subworkflow_resumes_inside(tmp_path: Path) -> None:
    db, log = tmp_path / "runs.db", tmp_path / "exec.log"
    assert spawn(db, log, "nested", "inside:review.s3", "r1") == -signal.SIGKILL
    async with Runtime(SqliteStore(db)) as rt:
        inner = await rt.history("r1", namespace="review")
        assert [cp.superstep for cp in reversed(inner)] == [0, 1, 2]
    assert await finish(db, "nested", "r1") == await reference("nested")
    counts = executions(log)
    assert counts["review.s1@1"] == 1 and counts["review.s2@2"] == 1
    assert counts["review.s3@3"] == 2 and counts["review.s4@4"] == 1
    assert counts["prep@1"] == 1


async def test_request_three_levels_deep_answered_from_a_new_process(tmp_path: Path) -> None:
    db, log = tmp_path / "runs.db", tmp_path / "exec.log"
    assert spawn(db, log, "deep", "waiting", "r1") == -signal.SIGKILL
    async with Runtime(SqliteStore(db)) as rt:
        [req] = await rt.pending_requests()
        assert req.node == "review.legal.approve" and req.run_id == "r1"
        snap = await rt.get_state("r1")
        assert snap.subworkflows["review"].subworkflows["legal"].pending_requests == (req,)
    values = await finish(db, "deep", "r1", responses={req.id: True})
    assert values == await reference("deep")
    assert values["ok"] is True
    counts = executions(log)
    assert counts["review.legal.approve@1"] == 2  # asked, then answered


async def test_map_instances_finished_before_a_sigkill_are_not_run_again(tmp_path: Path) -> None:
    db, log = tmp_path / "runs.db", tmp_path / "exec.log"
    assert spawn(db, log, "map", "sibling:square[10]", "r1") == -signal.SIGKILL
    values = await finish(db, "map", "r1")
    assert values == await reference("map")
    assert values["squares"] == [n * n for n in range(1, 12)]
    counts = executions(log)
    assert counts["square[10]@2"] == 2  # killed mid-way, then run again
    assert all(counts[f"square[{i}]@2"] == 1 for i in range(10)), counts
    assert counts["split@1"] == 1 and counts["total@3"] == 1


async def test_map_instances_scheduled_before_a_sigkill_keep_their_args(tmp_path: Path) -> None:
    db, log = tmp_path / "runs.db", tmp_path / "exec.log"
    assert spawn(db, log, "map", "after_commit:1", "r1") == -signal.SIGKILL
    async with Runtime(SqliteStore(db)) as rt:
        snap = await rt.get_state("r1")
        assert snap.next_tasks == tuple(f"square[{i}]" for i in range(11))
    values = await finish(db, "map", "r1")
    assert values == await reference("map")
    counts = executions(log)
    assert counts["split@1"] == 1
    assert all(counts[f"square[{i}]@2"] == 1 for i in range(11)), counts
