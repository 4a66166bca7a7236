"""Pausing and bulk retry against ``durable-flow worker`` processes.

A run executing on a worker process stops after its superstep in flight
once paused (no superstep after the pause), and after unpause its work is
not repeated. On PostgreSQL, 200 failed runs are retried in bulk by the CLI
while workers serve: each completes exactly once.
"""

from __future__ import annotations

import asyncio
import collections
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

import forkrun  # noqa: E402
import pausekit  # noqa: E402
from clikit import CONSOLE_SCRIPT  # noqa: E402
from fleetprocs import fleet, wait_for  # noqa: E402
from pgdb import fresh_database  # noqa: E402

from durable_flow import RunStatus, Runtime, SqliteStore  # noqa: E402
from durable_flow.store.postgres._postgres import PostgresStore  # noqa: E402

pytestmark = [pytest.mark.process, pytest.mark.fleet]


@pytest.fixture
def pg_db() -> Iterator[str]:
    with fresh_database() as dsn:
        yield dsn


def _start(f: Any, name: str, env: dict[str, str], lease_ttl: float,
           concurrency: int = 4) -> None:
    f.spawn(name, ["worker", "pausekit:workflow", "--concurrency", str(concurrency),
                   "--lease-ttl", str(lease_ttl), "--poll-interval", "0.1",
                   "--grace-period", "5", "--name", name], **env)


def _do(make_store: Callable[[], Any], fn: Callable[[Runtime], Any]) -> Any:
    async def go() -> Any:
        async with Runtime(make_store()) as rt:
            return await fn(rt)
    return asyncio.run(go())


def test_a_run_paused_on_a_worker_process_stops_and_its_work_is_not_repeated(
        tmp_path: Path) -> None:
    path = tmp_path / "pause.db"
    make_store = lambda: SqliteStore(path)  # noqa: E731
    journal = tmp_path / "journal.txt"
    env = {"PAUSE_JOURNAL": str(journal), "PAUSE_STEP_DELAY": "0.4"}
    info = _do(make_store, lambda rt: rt.submit(pausekit.workflow, {"n": 1}, run_id="p1"))
    ttl = 3.0
    with fleet(str(path), tmp_path) as f:
        _start(f, "w1", env, ttl)
        wait_for(lambda: len(pausekit.journal(journal)) >= 2, 60, "two supersteps to start")
        _do(make_store, lambda rt: rt.pause(info.run_id, reason="inspect", by="ops"))
        paused_at = time.monotonic()

        def given_back() -> bool:
            record = _do(make_store, lambda rt: rt.store.get_run(info.run_id))
            return record.status is RunStatus.PAUSED and record.lease_owner is None

        wait_for(given_back, 30, "the worker to give the paused run back")
        # within one lease renewal (ttl / 3) and the superstep in flight, with slack for a
        # loaded machine
        assert time.monotonic() - paused_at < ttl
        seen = pausekit.journal(journal)
        time.sleep(2.0)
        assert pausekit.journal(journal) == seen  # no superstep after it stopped
        assert len(seen) < len(pausekit.NODES)
        _do(make_store, lambda rt: rt.unpause(info.run_id, by="ops"))
        wait_for(lambda: _do(make_store, lambda rt: rt.get_run(info.run_id)).status
                 is RunStatus.COMPLETED, 60, "the run to complete")
    ran = collections.Counter(node for _r, node, _p in pausekit.journal(journal))
    assert ran == {node: 1 for node in pausekit.NODES}  # nothing ran twice
    snap = _do(make_store, lambda rt: rt.get_state(info.run_id))
    assert snap.values["done"] == list(pausekit.NODES)
    kinds = [d.kind for d in _do(make_store, lambda rt: rt.decisions(info.run_id))]
    assert kinds == ["pause", "unpause"]


def test_a_bulk_retry_of_200_failed_runs_on_postgresql_completes_each_once(
        pg_db: str, tmp_path: Path) -> None:
    make_store = lambda: PostgresStore(pg_db, max_size=2)  # noqa: E731
    journal, broken = tmp_path / "journal.txt", tmp_path / "broken"
    broken.touch()
    env = {"PAUSE_JOURNAL": str(journal), "PAUSE_BROKEN": str(broken)}

    async def submit_all(rt: Runtime) -> list[str]:
        return [(await rt.submit(pausekit.workflow, {"n": n}, run_id=f"r{n:03d}",
                                 labels={"batch": "outage"})).run_id for n in range(200)]

    ids = _do(make_store, submit_all)

    def count(status: RunStatus) -> int:
        return len(_do(make_store, lambda rt: rt.select_runs(status=status)))

    with fleet(pg_db, tmp_path) as f:
        _start(f, "w1", env, 10.0, concurrency=8)
        _start(f, "w2", env, 10.0, concurrency=8)
        wait_for(lambda: count(RunStatus.FAILED) == 200, 180, "200 runs to fail", interval=0.3)
        broken.unlink()  # the fix
        cli_env = {**os.environ, "PYTHONPATH": str(TESTS)}
        proc = forkrun.run(
            [CONSOLE_SCRIPT, "--db", pg_db, "retry", "--label", "batch=outage", "--status",
             "failed", "--yes"], cwd=TESTS, env=cli_env, timeout=300, console=True)
        assert proc.returncode == 0, proc.stderr
        assert "retry: 200 done, 0 skipped (status did not allow it), 0 failed" in proc.stdout
        wait_for(lambda: count(RunStatus.COMPLETED) == 200, 300, "200 runs to complete",
                 interval=0.3)
        again = forkrun.run(
            [CONSOLE_SCRIPT, "--db", pg_db, "retry", "--label", "batch=outage", "--yes"],
            cwd=TESTS, env=cli_env, timeout=300, console=True)
        assert "retry: 0 done, 200 skipped" in again.stdout  # safe to run again
    ran = collections.Counter((r, node) for r, node, _p in pausekit.journal(journal))
    for run_id in ids:
        assert ran[(run_id, "s0")] == 1  # recorded before the failure: not run again
        assert ran[(run_id, "s1")] == 2  # failed once, then ran once after the fix
        for node in pausekit.NODES[2:]:
            assert ran[(run_id, node)] == 1, (run_id, node)
