"""A fleet of ``durable-flow worker`` processes, one of them SIGKILLed midway.

On one SQLite file and on PostgreSQL: every submitted run completes; no
step recorded by a surviving process runs twice, and no two executions of
a step overlap; every checkpoint chain is linear; every final state equals
an uninterrupted run's. On PostgreSQL a worker wakes at once when another
process submits a run (``LISTEN/NOTIFY``), without waiting for its poll.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

from fleetprocs import (  # noqa: E402
    StoreFactory,
    check_no_overlap,
    check_runs,
    fleet,
    statuses,
    submit,
    wait_completed,
    wait_for,
)
from pgdb import fresh_database  # noqa: E402

from durable_flow import RunStatus, SqliteStore  # noqa: E402
from durable_flow.store.postgres._postgres import PostgresStore  # noqa: E402

RUNS = 300

pytestmark = [pytest.mark.crash, pytest.mark.fleet]


@pytest.fixture
def pg_db() -> Iterator[str]:
    """A database of this test alone."""
    with fresh_database() as dsn:
        yield dsn


def run_fleet(make_store: StoreFactory, db: str, tmp_path: Path) -> None:
    ids = submit(make_store, RUNS)
    with fleet(db, tmp_path) as f:
        w1 = f.start("w1", lease_ttl=2.0)  # killed: w4 takes its runs over when its leases end
        f.start("w2")
        f.start("w3")
        wait_completed(make_store, RUNS // 3, 120)
        # on a loaded machine w1 may start last: it is killed once it has taken part
        wait_for(lambda: any(e.pid == w1.pid for execs in f.executions().values()
                             for e in execs), 60, "w1 to execute steps")
        victim = f.kill("w1")
        f.start("w4")
        wait_completed(make_store, RUNS, 180)
    check_runs(make_store, ids)
    runs = f.executions()
    assert set(runs) == {(r, node) for r in ids for node in ("a", "b")}
    assert any(e.pid == victim for execs in runs.values() for e in execs)  # it died mid-work
    check_no_overlap(runs, lost=frozenset({victim}))


def test_three_sqlite_workers_lose_one_and_finish_every_run(tmp_path: Path) -> None:
    path = tmp_path / "fleet.db"
    run_fleet(lambda: SqliteStore(path), str(path), tmp_path)


def test_three_postgresql_workers_lose_one_and_finish_every_run(
    pg_db: str, tmp_path: Path
) -> None:
    run_fleet(lambda: PostgresStore(pg_db, max_size=2), pg_db, tmp_path)


def test_a_postgresql_worker_wakes_at_once_for_a_run_another_process_submits(
    pg_db: str, tmp_path: Path
) -> None:
    make_store = lambda: PostgresStore(pg_db, max_size=2)  # noqa: E731
    submit(make_store, 1)  # the schema exists before the worker opens the database
    with fleet(pg_db, tmp_path) as f:
        f.start("w1", poll_interval=30)
        wait_completed(make_store, 1, 30)  # its first look at the queue, at start
        for n in range(1, 4):
            time.sleep(0.5)  # the worker is asleep in its poll interval
            submitted = time.monotonic()
            submit(make_store, 1, first=n)
            wait_for(lambda n=n: statuses(make_store)[RunStatus.COMPLETED] > n, 10,
                     f"run {n} to complete")
            assert time.monotonic() - submitted < 10  # woken: its next poll is 30 s away
        assert "serving" in f.log("w1")

