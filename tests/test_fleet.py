"""A fleet of ``durable-flow worker`` processes, one of them SIGKILLed midway.

Every submitted run completes; no step recorded by a surviving process runs
twice; every checkpoint chain is linear; every final state equals an
uninterrupted run's.
"""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from durable_flow import RunStatus, Runtime, SqliteStore
from durable_flow.store._protocols import CheckpointStore

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))

import fleetkit  # noqa: E402

RUNS = 300

pytestmark = pytest.mark.crash


@contextmanager
def workers(db: str, journal: Path, log_dir: Path) -> Iterator[Callable[[str], subprocess.Popen[bytes]]]:
    """Start ``durable-flow worker`` processes on demand; stop them all at the end."""
    started: list[subprocess.Popen[bytes]] = []
    env = {**os.environ, "FLEET_JOURNAL": str(journal), "PYTHONPATH": str(TESTS)}

    def start(name: str) -> subprocess.Popen[bytes]:
        out = (log_dir / f"{name}.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "durable_flow", "--db", db, "worker", "fleetkit:workflow",
             "--concurrency", "8", "--lease-ttl", "2", "--poll-interval", "0.2",
             "--grace-period", "5", "--name", name],
            cwd=TESTS, env=env, stdout=out, stderr=subprocess.STDOUT)
        started.append(proc)
        return proc

    try:
        yield start
    finally:
        for proc in started:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in started:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


async def _submit(store: CheckpointStore) -> dict[str, int]:
    async with Runtime(store) as rt:
        ids = {}
        for n in range(RUNS):
            info = await rt.submit(fleetkit.workflow, {"n": n}, run_id=f"order-{n:03d}")
            ids[info.run_id] = n
        return ids


async def _statuses(store: CheckpointStore) -> collections.Counter[RunStatus]:
    async with Runtime(store) as rt:
        return collections.Counter(r.status for r in await rt.list_runs())


async def _check_runs(store: CheckpointStore, ids: dict[str, int]) -> None:
    async with Runtime(store) as rt:
        for run_id, n in ids.items():
            snap = await rt.get_state(run_id)
            assert snap.status is RunStatus.COMPLETED, run_id
            assert {k: snap.values[k] for k in fleetkit.expected(n)} == fleetkit.expected(n)
            metas = await rt.store.list_checkpoints(run_id, thread="")
            metas.sort(key=lambda m: m.seq)
            assert [m.seq for m in metas] == list(range(len(metas)))
            assert [m.parent_id for m in metas[1:]] == [m.id for m in metas[:-1]]
            assert len(metas) == 4  # input, split, a+b, settle: nothing ran twice into the chain


def _wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.2)


def run_fleet(make_store: Callable[[], CheckpointStore], db: str, tmp_path: Path) -> None:
    journal = tmp_path / "journal.txt"
    journal.touch()
    ids = asyncio.run(_submit(make_store()))

    def completed() -> int:
        return asyncio.run(_statuses(make_store()))[RunStatus.COMPLETED]

    with workers(db, journal, tmp_path) as start:
        victim = start("w1")
        start("w2")
        start("w3")
        _wait_for(lambda: completed() >= RUNS // 3, 120, "a third of the runs")
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        start("w4")
        _wait_for(lambda: completed() == RUNS, 180, "every run to complete")
    asyncio.run(_check_runs(make_store(), ids))
    executions: dict[tuple[str, str], list[int]] = collections.defaultdict(list)
    for line in journal.read_text().splitlines():
        run_id, node, pid = line.split()
        executions[(run_id, node)].append(int(pid))
    assert set(executions) == {(r, node) for r in ids for node in ("a", "b")}
    assert any(victim.pid in pids for pids in executions.values())  # it died mid-work
    for key, pids in executions.items():
        # a step runs again only when the process that ran it died before recording it
        assert all(pid == victim.pid for pid in pids[:-1]), (key, pids)


def test_three_sqlite_workers_lose_one_and_finish_every_run(tmp_path: Path) -> None:
    path = tmp_path / "fleet.db"
    run_fleet(lambda: SqliteStore(path), str(path), tmp_path)
