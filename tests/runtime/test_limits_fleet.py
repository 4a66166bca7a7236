"""Limits across ``durable-flow worker`` processes (SQLite and PostgreSQL), counted from a journal.

Three workers share ``api=concurrency:2``; one is SIGKILLed mid-call. Every run
completes, and at no moment did more than two calls run at once (a killed
worker's call counts until it died; its grant comes back after its lease).
Two workers share ``api=per_second:4``: no more than four calls start in
any one second.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

import limitkit  # noqa: E402
from fleetprocs import Fleet, StoreFactory, fleet, wait_for  # noqa: E402
from pgdb import fresh_database  # noqa: E402

from durable_flow import RunStatus, Runtime, SqliteStore  # noqa: E402
from durable_flow.store.postgres._postgres import PostgresStore  # noqa: E402

pytestmark = [pytest.mark.process, pytest.mark.crash, pytest.mark.fleet]


@pytest.fixture
def pg_db() -> Iterator[str]:
    """A database of this test alone."""
    with fresh_database() as dsn:
        yield dsn


async def _submit(make_store: StoreFactory, count: int) -> None:
    async with Runtime(make_store()) as rt:
        for i in range(count):
            await rt.submit(limitkit.workflow, {}, run_id=f"call-{i:03d}")


async def _completed(make_store: StoreFactory) -> int:
    async with Runtime(make_store()) as rt:
        return sum(r.status is RunStatus.COMPLETED for r in await rt.list_runs())


def start(f: Fleet, name: str, limit: str, *, lease_ttl: float = 10.0) -> None:
    f.spawn(name, ["worker", "limitkit:workflow", "--limit", limit, "--lease-ttl",
                   str(lease_ttl), "--poll-interval", "0.5", "--grace-period", "5",
                   "--name", name], LIMIT_JOURNAL=str(f.journal))


def run_concurrency(make_store: StoreFactory, db: str, tmp_path: Path) -> None:
    runs = 30
    asyncio.run(_submit(make_store, runs))
    with fleet(db, tmp_path) as f:
        start(f, "w1", "api=concurrency:2", lease_ttl=4.0)
        start(f, "w2", "api=concurrency:2")
        start(f, "w3", "api=concurrency:2")
        wait_for(lambda: len(limitkit.spans(f.journal)) >= 6, 120, "the first calls")
        died_at = time.time()
        victim = f.kill("w1")
        wait_for(lambda: asyncio.run(_completed(make_store)) == runs, 180, "every run",
                 interval=0.3)
    calls = limitkit.spans(f.journal, dead={victim: died_at})
    assert len({line.split()[0] for line in f.journal.read_text().splitlines()}) == runs
    assert limitkit.peak(calls) <= 2, sorted(calls)
    assert limitkit.peak(calls) == 2  # the limit was used, not only respected


def run_rate(make_store: StoreFactory, db: str, tmp_path: Path) -> None:
    runs = 16
    asyncio.run(_submit(make_store, runs))
    with fleet(db, tmp_path) as f:
        start(f, "r1", "api=per_second:4")
        start(f, "r2", "api=per_second:4")
        wait_for(lambda: asyncio.run(_completed(make_store)) == runs, 180, "every run",
                 interval=0.3)
    starts = sorted(s for s, _ in limitkit.spans(f.journal))
    assert len(starts) == runs
    # no five starts within one second (less the start-up jitter of a loaded machine)
    assert all(later - first >= 0.7 for first, later in zip(starts, starts[4:], strict=False))
    assert starts[-1] - starts[0] >= 2.5  # sixteen at four a second: at least three windows


def test_sqlite_workers_keep_a_concurrency_limit_and_a_killed_workers_grant_returns(
        tmp_path: Path) -> None:
    path = tmp_path / "limits.db"
    run_concurrency(lambda: SqliteStore(path), str(path), tmp_path)


def test_postgresql_workers_keep_a_concurrency_limit_and_a_killed_workers_grant_returns(
        pg_db: str, tmp_path: Path) -> None:
    run_concurrency(lambda: PostgresStore(pg_db, max_size=2), pg_db, tmp_path)


def test_sqlite_workers_keep_a_rate_limit(tmp_path: Path) -> None:
    path = tmp_path / "rate.db"
    run_rate(lambda: SqliteStore(path), str(path), tmp_path)


def test_postgresql_workers_keep_a_rate_limit(pg_db: str, tmp_path: Path) -> None:
    run_rate(lambda: PostgresStore(pg_db, max_size=2), pg_db, tmp_path)
