"""Durable time and events under SIGKILL, on SQLite and PostgreSQL.

A child process sleeps, waits for an event or sends one and dies at a
chosen point; the parent resumes. Nothing waits twice (one timer per sleep,
the resumed node passes it at once) and nothing is delivered twice (each
event taken by one wait, a node killed after taking one gets the same one).
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import crashkit_waits as kit
import forkrun
import pytest
from pgdb import fresh_database
from waitkit import store_dump

from durable_flow import RunLockedError, RunStatus, Runtime
from durable_flow.store._protocols import CheckpointStore

pytestmark = pytest.mark.crash
KIT = Path(kit.__file__)


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path,
       monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Where parent and children keep the runs: a SQLite file or a fresh PostgreSQL database.

    The nodes the parent runs log to the same file as the children's.
    """
    monkeypatch.setenv("CRASH_LOG", str(tmp_path / "exec.log"))
    if request.param == "sqlite":
        yield str(tmp_path / "runs.db")
        return
    with fresh_database() as dsn:
        yield dsn


def spawn(db: str, log: Path, scenario: str, action: str, point: str, **env: str) -> int:
    full = {**os.environ, "CRASH_LOG": str(log), "CRASH_POINT": point, **env}
    proc = forkrun.run([KIT, db, "r1", scenario, action], env=full, timeout=120)
    assert proc.returncode in (0, -signal.SIGKILL), proc.stderr
    return proc.returncode


def executions(log: Path) -> Counter[str]:
    return Counter(log.read_text().splitlines())


async def resume_when_free(rt: Runtime, wf: Any, run_id: str) -> Any:
    """Resume, waiting out a dead child's lease (it expires after its lease_ttl)."""
    for _ in range(100):
        try:
            return await rt.resume(wf, run_id)
        except RunLockedError:
            await asyncio.sleep(0.1)
    raise AssertionError("the dead process' lease never expired")


async def wait_rows(store: CheckpointStore, kind: str) -> list[Any]:
    return [r for r in await store.get_requests("r1") if r.kind == kind]


async def test_killed_while_sleeping_the_run_sleeps_once(db: str, tmp_path: Path) -> None:
    log = tmp_path / "exec.log"
    assert spawn(db, log, "sleeper", "start", "waiting") == -signal.SIGKILL
    wf = kit.sleeper()
    async with Runtime(kit.open_store(db)) as rt:
        record = await rt.store.get_run("r1")
        assert record is not None and record.status is RunStatus.WAITING
        assert record.lease_owner is None and record.wake_at is not None
        before = await store_dump(rt.store, "r1")
        assert (await rt.resume(wf, "r1")).status is RunStatus.WAITING  # too early
        assert await store_dump(rt.store, "r1") == before
        await asyncio.sleep(kit.NAP + 0.1)
    # a second process wakes it, passes the sleep and dies before committing
    assert spawn(db, log, "sleeper", "resume", "woke") == -signal.SIGKILL
    async with Runtime(kit.open_store(db)) as rt:
        done = await resume_when_free(rt, wf, "r1")
        assert done.status is RunStatus.COMPLETED, done.error
        assert done.state.trail == ["start", "napped", "done"]
        [timer] = await wait_rows(rt.store, "timer")  # the resumed node did not sleep again
        assert timer.timed_out
    assert executions(log) == {"start": 1, "nap": 3, "woke": 2, "done": 1}


async def test_killed_while_waiting_for_an_event_it_is_delivered_once(
        db: str, tmp_path: Path) -> None:
    log = tmp_path / "exec.log"
    assert spawn(db, log, "listener", "start", "waiting") == -signal.SIGKILL
    wf = kit.listener()
    async with Runtime(kit.open_store(db)) as rt:
        assert (await rt.get_run("r1")).status is RunStatus.WAITING
        await rt.send_event("r1", "paid", 1)
        assert (await rt.get_run("r1")).status is RunStatus.QUEUED
    # a process continues it, hears the event and dies before committing
    assert spawn(db, log, "listener", "resume", "heard") == -signal.SIGKILL
    async with Runtime(kit.open_store(db)) as rt:
        await rt.send_event("r1", "paid", 2)  # a second event: nobody waits for it
        done = await resume_when_free(rt, wf, "r1")
        assert done.status is RunStatus.COMPLETED and done.state.got == [1]
        mail = await rt.store.get_mail("r1")
        assert [(m.payload, m.request_id) for m in mail] == [(b"1", "listen@1#0"), (b"2", None)]
    assert executions(log) == {"listen": 3, "heard 1": 2}


async def test_killed_right_after_sending_an_event_it_is_kept_and_delivered_once(
        db: str, tmp_path: Path) -> None:
    log = tmp_path / "exec.log"
    assert spawn(db, log, "listener", "start", "waiting") == -signal.SIGKILL
    assert spawn(db, log, "listener", "send", "sent", EVENT="7") == -signal.SIGKILL
    async with Runtime(kit.open_store(db)) as rt:
        assert (await rt.get_run("r1")).status is RunStatus.QUEUED
        done = await rt.resume(kit.listener(), "r1")
        assert done.status is RunStatus.COMPLETED and done.state.got == [7]
        [mail] = await rt.store.get_mail("r1")
        assert mail.request_id == "listen@1#0"
    assert executions(log) == {"listen": 2, "heard 7": 1}


async def test_an_event_kept_before_the_wait_is_taken_once_across_a_crash(
        db: str, tmp_path: Path) -> None:
    log = tmp_path / "exec.log"
    assert spawn(db, log, "late-listener", "start", "waiting") == -signal.SIGKILL
    async with Runtime(kit.open_store(db)) as rt:
        await rt.send_event("r1", "paid", 1)  # the node still sleeps: kept
        await rt.send_event("r1", "paid", 2)
        assert (await rt.get_run("r1")).status is RunStatus.WAITING
        await asyncio.sleep(kit.NAP + 0.1)
    # woken, the node takes the first kept event as it waits, then the process dies
    assert spawn(db, log, "late-listener", "resume", "heard") == -signal.SIGKILL
    async with Runtime(kit.open_store(db)) as rt:
        done = await resume_when_free(rt, kit.listener(nap_first=True), "r1")
        assert done.status is RunStatus.COMPLETED and done.state.got == [1]
        mail = await rt.store.get_mail("r1")
        assert [(m.payload, m.request_id) for m in mail] == [(b"1", "listen@1#1"), (b"2", None)]
        assert len(await wait_rows(rt.store, "timer")) == 1
    assert executions(log) == {"listen": 3, "heard 1": 2}
