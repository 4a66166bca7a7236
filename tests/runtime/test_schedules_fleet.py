"""Schedules on a fleet of ``durable-flow worker`` processes (SQLite and PostgreSQL).

Two workers share a store with a schedule that ticks every second; one is
SIGKILLed and another started in its place, then all stop and new ones
start. Every tick from the first to the last has exactly one run, each run
completed as an uninterrupted run ends, and no step ran twice.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import croniter  # noqa: F401  # imported at collection: its import runs `file` once
import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

import fleetkit  # noqa: E402
from fleetprocs import StoreFactory, check_no_overlap, check_runs, fleet  # noqa: E402
from pgdb import fresh_database  # noqa: E402

from durable_flow import Runtime, SqliteStore  # noqa: E402
from durable_flow.model._schedules import tick_run_id  # noqa: E402
from durable_flow.store.postgres._postgres import PostgresStore  # noqa: E402

pytestmark = [pytest.mark.process, pytest.mark.crash, pytest.mark.fleet]


@pytest.fixture
def pg_db() -> Iterator[str]:
    """A database of this test alone."""
    with fresh_database() as dsn:
        yield dsn


async def _schedule(make_store: StoreFactory) -> None:
    async with Runtime(make_store()) as rt:
        await rt.schedule(fleetkit.workflow, cron="* * * * * *", input={"n": 7},
                          schedule_id="tick", catch_up="all")


async def _tick_runs(make_store: StoreFactory) -> list[str]:
    async with Runtime(make_store()) as rt:
        return sorted(r.run_id for r in await rt.list_runs() if r.run_id.startswith("tick@"))


def run_schedule_fleet(make_store: StoreFactory, db: str, tmp_path: Path) -> None:
    asyncio.run(_schedule(make_store))
    with fleet(db, tmp_path) as f:
        f.start("w1", lease_ttl=2.0, poll_interval=5.0)
        f.start("w2", poll_interval=5.0)
        f.wait_serving("w1", "w2")
        time.sleep(3.0)
        victim = f.kill("w1")
        f.start("w3", poll_interval=5.0)
        f.wait_serving("w3")
        time.sleep(2.0)
        assert f.stop("w2") == 0 and f.stop("w3") == 0
        time.sleep(1.5)  # no worker: these ticks are caught up by the next ones
        f.start("w4", poll_interval=5.0)
        f.start("w5", poll_interval=5.0)
        f.wait_serving("w4", "w5")
        time.sleep(2.0)
        assert f.stop("w4") == 0 and f.stop("w5") == 0
    runs = asyncio.run(_tick_runs(make_store))
    assert len(runs) >= 8, runs
    # one run for every second from the first tick to the last: none missed, none twice
    first = datetime.fromisoformat(runs[0].split("@", 1)[1].replace("Z", "+00:00"))
    assert runs == [tick_run_id("tick", first + timedelta(seconds=i)) for i in range(len(runs))]
    executions = f.executions()
    finished = [r for r in runs if (r, "a") in executions]
    check_runs(make_store, {r: 7 for r in finished if _settled(make_store, r)})
    check_no_overlap(executions, lost=frozenset({victim}))


def _settled(make_store: StoreFactory, run_id: str) -> bool:
    async def status() -> str:
        async with Runtime(make_store()) as rt:
            return (await rt.get_run(run_id)).status.value

    return asyncio.run(status()) == "completed"


def test_sqlite_worker_processes_start_each_tick_once(tmp_path: Path) -> None:
    path = tmp_path / "fleet.db"
    run_schedule_fleet(lambda: SqliteStore(path), str(path), tmp_path)


def test_postgresql_worker_processes_start_each_tick_once(pg_db: str, tmp_path: Path) -> None:
    run_schedule_fleet(lambda: PostgresStore(pg_db, max_size=2), pg_db, tmp_path)
