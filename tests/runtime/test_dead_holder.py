"""A run whose holder on this machine was killed is resumed at once on SQLite.

The lease protects a live holder; a process of this host that no longer exists
writes nothing, so ``resume`` right after ``kill -9`` takes its lease without
waiting out ``lease_ttl``. A live holder (even one stopped with SIGSTOP), a
holder on another host, and any holder on a store whose processes may run on
other machines (PostgreSQL) still hold their lease.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from durable_flow import (
    Blackboard,
    RunLockedError,
    RunStatus,
    Runtime,
    SqliteStore,
    Workflow,
    WorkflowBuilder,
)
from durable_flow.model._clock import utcnow
from durable_flow.runtime._holders import dead_holder, holder_is_gone

WORKFLOW = '''
import asyncio, os, pathlib
from durable_flow import Blackboard, WorkflowBuilder

HERE = pathlib.Path(os.environ["HOLDER_DIR"])

class S(Blackboard):
    done: bool = False

async def slow(state, ctx):
    if not (HERE / "killed").exists():
        (HERE / "started").write_text(str(os.getpid()))
        await asyncio.sleep(120)
    return {"done": True}

b = WorkflowBuilder("holder", S)
b.add_node("slow", slow)
b.set_entry("slow")
workflow = b.build()
'''

CHILD = '''
import asyncio, sys
sys.path.insert(0, sys.argv[2])
from holderflow import workflow
from durable_flow import Runtime, SqliteStore

async def main():
    async with Runtime(SqliteStore(sys.argv[1]), lease_ttl=60) as rt:
        await rt.run(workflow, {}, run_id="r")

asyncio.run(main())
'''


@pytest.fixture
def holder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[subprocess.Popen[bytes]]:
    """A child process executing run ``r`` on ``tmp_path/h.db`` with a 60 s lease."""
    (tmp_path / "holderflow.py").write_text(textwrap.dedent(WORKFLOW))
    monkeypatch.setenv("HOLDER_DIR", str(tmp_path))
    monkeypatch.syspath_prepend(str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path / "h.db"),
                             str(tmp_path)], env={**os.environ, "HOLDER_DIR": str(tmp_path)})
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "started").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the child did not start"
            time.sleep(0.05)
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def workflow() -> object:
    import holderflow  # written by the fixture

    return holderflow.workflow


@pytest.mark.process
async def test_resume_right_after_kill_9_takes_the_dead_holders_lease(
    holder: subprocess.Popen[bytes], tmp_path: Path,
) -> None:
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    (tmp_path / "killed").touch()
    async with Runtime(SqliteStore(tmp_path / "h.db")) as rt:
        record = await rt.store.get_run("r")
        assert record is not None and record.lease_owner is not None and str(holder.pid) in record.lease_owner
        result = await rt.resume(workflow(), "r")  # the 60 s lease is not waited out
        assert result.status is RunStatus.COMPLETED
        assert (await rt.get_state("r")).values["done"] is True


@pytest.mark.process
async def test_a_live_holder_keeps_its_lease_even_when_stopped(
    holder: subprocess.Popen[bytes], tmp_path: Path,
) -> None:
    holder.send_signal(signal.SIGSTOP)
    try:
        (tmp_path / "killed").touch()
        async with Runtime(SqliteStore(tmp_path / "h.db")) as rt:
            with pytest.raises(RunLockedError):
                await rt.resume(workflow(), "r")
            with pytest.raises(RunLockedError):
                await rt.update_state(workflow(), "r", {"done": True})
    finally:
        holder.send_signal(signal.SIGCONT)


def unused_pid() -> int:
    """A pid no process has now (the top of the pid range is rarely reached)."""
    for pid in range(4_000_000, 3_000_000, -7):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except OSError:
            continue
    raise AssertionError("no free pid found")


def test_only_a_process_of_this_host_that_is_gone_counts_as_gone() -> None:
    here, gone = socket.gethostname(), unused_pid()
    assert holder_is_gone(f"worker:{here}:{gone}:abc123")
    assert holder_is_gone(f"{here}:{gone}:abcd1234")
    assert not holder_is_gone(f"other-host:{gone}:abcd1234")  # another machine's pid
    assert not holder_is_gone(f"{here}:{os.getpid()}:abcd1234")  # this very process
    assert not holder_is_gone(f"{here}:1:abcd1234")  # alive (init), not ours to signal
    assert not holder_is_gone("a runtime")  # a name without a pid
    assert not holder_is_gone(f"{here}:-5:x")


async def test_a_store_of_several_machines_never_takes_a_live_lease(tmp_path: Path) -> None:
    now = utcnow()
    owner = f"{socket.gethostname()}:{unused_pid()}:dead0000"

    class Shared:  # a store whose holders may run on any machine (PostgreSQL)
        holders_on_this_host = False

    async with SqliteStore(tmp_path / "s.db") as store, Runtime(store) as rt:
        await rt.submit(stub(), {}, run_id="q")
        stored = await store.get_run("q")
        assert stored is not None
        record = replace(stored, lease_owner=owner,
                         lease_expires_at=now + timedelta(seconds=30))
        assert dead_holder(store, record, now) == owner
        assert dead_holder(Shared(), record, now) is None  # type: ignore[arg-type]
        live = replace(record, lease_owner=f"{socket.gethostname()}:{os.getpid()}:x")
        assert dead_holder(store, live, now) is None
        expired = replace(record, lease_expires_at=now - timedelta(seconds=1))
        assert dead_holder(store, expired, now) is None  # claimable anyway: nothing to take


def stub() -> Workflow:
    """A one-node workflow."""
    b = WorkflowBuilder("stub", Stub)
    b.add_node("a", lambda s: {"n": 1})
    b.set_entry("a")
    return b.build()


class Stub(Blackboard):
    """The stub's blackboard."""

    n: int = 0
