"""Parked tasks under SIGKILL, on SQLite and PostgreSQL.

A child process runs a job whose ``ask`` parks while a chain goes on and
answers it mid-run; it dies at each durable point (the park committed, the
answer recorded while other branches run, the parked task running again,
its update merged), with ``ask`` a plain node or a sub-workflow whose inner
node asks. The parent resumes: the final state equals an uninterrupted
run's, the side effect ran once, and the request kept its id.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import crashkit_parked as kit
import forkrun
import pytest
from pgdb import fresh_database

from durable_flow import RunLockedError, RunStatus, Runtime

pytestmark = pytest.mark.crash
KIT = Path(kit.__file__)
FINAL = {"log": ["start", "w1", "w2", "w3", "join"], "answer": "yes", "receipt": "paid",
         "seen": "saw 3", "joined": True}
# a sub-workflow's inner blackboard is its own: it keeps the input it started with
NESTED_FINAL = {**FINAL, "seen": "saw 1"}


@pytest.fixture(params=["plain", "nested"])
def shape(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """``ask`` as a plain node, or as a sub-workflow whose inner node asks."""
    monkeypatch.setenv("SHAPE", request.param)
    monkeypatch.setattr(kit, "NESTED", request.param == "nested")
    monkeypatch.setattr(kit, "REQUEST", "ask@2/approve@1#0" if request.param == "nested"
                        else "ask@2#0")
    yield request.param


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path,
       monkeypatch: pytest.MonkeyPatch, shape: str) -> Iterator[str]:
    monkeypatch.setenv("CRASH_LOG", str(tmp_path / "exec.log"))
    if request.param == "sqlite":
        yield str(tmp_path / "runs.db")
        return
    with fresh_database() as dsn:
        yield dsn


def spawn(db: str, log: Path, point: str) -> int:
    env = {**os.environ, "CRASH_LOG": str(log), "CRASH_POINT": point}
    proc = forkrun.run([KIT, db, "r1"], env=env, timeout=120)
    assert proc.returncode in (0, -signal.SIGKILL), proc.stderr
    return proc.returncode


async def resume_when_free(rt: Runtime, wf: Any) -> Any:
    """Resume, waiting out the dead child's lease."""
    for _ in range(300):
        try:
            return await rt.resume(wf, "r1")
        except RunLockedError:
            await asyncio.sleep(0.1)
    raise AssertionError("the dead process' lease never expired")


async def finish(db: str) -> tuple[Any, Any]:
    async with Runtime(kit.open_store(db)) as rt:
        kit.ANSWERING[:] = [rt]
        r = await resume_when_free(rt, kit.parked_job())
        requests = await rt.store.get_requests("r1")
        return r, requests


def final(shape: str) -> dict[str, Any]:
    return NESTED_FINAL if shape == "nested" else FINAL


async def test_an_uninterrupted_run_finishes_in_one_go(db: str, tmp_path: Path,
                                                      shape: str) -> None:
    log = tmp_path / "exec.log"
    assert spawn(db, log, "") == 0
    async with Runtime(kit.open_store(db)) as rt:
        snap = await rt.get_state("r1")
    assert snap.status is RunStatus.COMPLETED and snap.values | final(shape) == snap.values
    assert Counter(log.read_text().splitlines())["charge"] == 1


@pytest.mark.parametrize("point", ["parked", "answered", "rerun", "merged"])
async def test_killed_at_each_durable_point_the_run_ends_as_an_uninterrupted_one(
        db: str, tmp_path: Path, point: str, shape: str) -> None:
    log = tmp_path / "exec.log"
    assert spawn(db, log, point) == -signal.SIGKILL
    r, requests = await finish(db)
    assert r.status is RunStatus.COMPLETED, r.error
    assert {k: r.state.model_dump()[k] for k in FINAL} == final(shape)
    ran = Counter(log.read_text().splitlines())
    assert ran["charge"] == 1  # the parked task's side effect, recorded at its anchor, once
    assert ran["start"] == ran["w1"] == ran["join"] == 1
    assert [(q.id, q.kind) for q in requests] == [(kit.REQUEST, "request")]
