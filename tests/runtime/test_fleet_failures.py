"""What strands or duplicates work in a fleet, against the real PostgreSQL server.

Each test runs ``durable-flow`` processes on a database of its own:

* the server restarts while workers execute runs: they reconnect, nothing
  is left ``running`` or ``queued``, every run completes, no step runs twice
  (on a server of the test's own: the shared one serves the other tests);
* a worker dies holding runs and two others recover them at once (and two
  ``durable-flow recover`` processes at once): each run is executed by one;
* a rolling restart: new workers start, the old ones are stopped while
  busy; what they leave goes back to the queue and the new ones finish it;
* a stale holder (a worker frozen past its lease while another took its
  runs over) cannot write anything when it wakes up.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

from fleetprocs import (  # noqa: E402
    Fleet,
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
from pgserver import PrivateServer, private_server  # noqa: E402

from durable_flow import RunStatus  # noqa: E402
from durable_flow.store.postgres._postgres import PostgresStore  # noqa: E402

pytestmark = [pytest.mark.crash, pytest.mark.fleet]

NODES = ("a", "b")


@pytest.fixture
def pg_db() -> Iterator[str]:
    """A database of this test alone."""
    with fresh_database() as dsn:
        yield dsn


def _stores(dsn: str) -> StoreFactory:
    return lambda: PostgresStore(dsn, max_size=2)


# -- the server restarts ----------------------------------------------------------------------


@pytest.fixture
def private_pg() -> Iterator[PrivateServer]:
    """A server of this test alone: restarting it disturbs no other test."""
    with private_server() as server:
        yield server


@pytest.fixture
def private_db(private_pg: PrivateServer) -> Iterator[str]:
    """A database on the private server."""
    with fresh_database(private_pg.dsn) as dsn:
        yield dsn


def test_a_postgresql_restart_mid_run_strands_nothing_and_runs_no_step_twice(
    private_pg: PrivateServer, private_db: str, tmp_path: Path
) -> None:
    make_store = _stores(private_db)
    ids = submit(make_store, 200)
    with fleet(private_db, tmp_path) as f:
        for name in ("w1", "w2", "w3"):  # leases outlive the restart: nobody takes over
            f.start(name, step_delay=0.3, lease_ttl=10)
        wait_completed(make_store, 30, 60)
        assert statuses(make_store)[RunStatus.RUNNING] > 0  # still busy
        private_pg.restart()
        wait_completed(make_store, len(ids), 120)
        assert all(proc.poll() is None for proc in f.procs.values())  # they rode it out
    left = statuses(make_store)
    assert left == {RunStatus.COMPLETED: len(ids)}  # nothing running, queued or failed
    check_runs(make_store, ids)
    runs = f.executions()
    assert set(runs) == {(r, node) for r in ids for node in NODES}
    check_no_overlap(runs)
    twice = {key: execs for key, execs in runs.items() if len(execs) > 1}
    assert not twice


# -- a dead worker's runs, recovered by two at once -------------------------------------------


def _hold_and_kill(f: Fleet, make_store: StoreFactory, count: int,
                   before_kill: Callable[[], None] | None = None) -> int:
    """A worker claims ``count`` runs, starts both steps of each, and is SIGKILLed; its pid.

    ``before_kill`` runs once every step started (it may start the recoverers).
    """
    f.start("doomed", concurrency=count, lease_ttl=3.0, step_delay=600)
    # every step started (on a loaded machine its short leases may run out first and it
    # starts some again: those executions die with it, like the others)
    wait_for(lambda: len(f.executions()) == 2 * count, 90,
             "the doomed worker to start every step")
    assert statuses(make_store) == {RunStatus.RUNNING: count}
    if before_kill is not None:
        before_kill()
    return f.kill("doomed")


def _one_recoverer_per_run(f: Fleet, ids: dict[str, int], dead: int) -> dict[str, int]:
    """Each run's steps ran once more, both in one process (not the dead one); run -> pid."""
    runs = f.executions()
    by_run: dict[str, int] = {}
    for run_id in ids:
        again = [e for node in NODES for e in runs[(run_id, node)] if e.pid != dead]
        assert len(again) == 2 and again[0].pid == again[1].pid, (run_id, again)
        assert all(e.outcome == "done" for e in again), (run_id, again)
        by_run[run_id] = again[0].pid
    check_no_overlap(runs, lost=frozenset({dead}))
    return by_run


def test_two_workers_recovering_a_dead_workers_runs_at_once_take_each_run_once(
    pg_db: str, tmp_path: Path
) -> None:
    make_store = _stores(pg_db)
    ids = submit(make_store, 16)
    with fleet(pg_db, tmp_path) as f:
        def recoverers() -> None:  # both serving before the leases they wait for expire
            f.start("r1", poll_interval=0.05, step_delay=0.5)
            f.start("r2", poll_interval=0.05, step_delay=0.5)
            f.wait_serving("r1", "r2", timeout=60)

        dead = _hold_and_kill(f, make_store, len(ids), recoverers)
        # both wait for the same expired leases, each able to take only half of them at once
        wait_completed(make_store, len(ids), 60)
    check_runs(make_store, ids)
    by_run = _one_recoverer_per_run(f, ids, dead)
    assert set(by_run.values()) == {f.procs["r1"].pid, f.procs["r2"].pid}


def test_two_recover_commands_at_once_execute_each_run_once(pg_db: str, tmp_path: Path) -> None:
    make_store = _stores(pg_db)
    ids = submit(make_store, 16)
    with fleet(pg_db, tmp_path) as f:
        dead = _hold_and_kill(f, make_store, len(ids))
        time.sleep(3.5)  # its leases (3 s) expired
        first = f.spawn("recover1", ["recover", "fleetkit:workflow", "--json"])
        second = f.spawn("recover2", ["recover", "fleetkit:workflow", "--json"])
        assert (first.wait(60), second.wait(60)) == (0, 0), (f.log("recover1"), f.log("recover2"))
    check_runs(make_store, ids)
    by_run = _one_recoverer_per_run(f, ids, dead)
    recovered = {name: {r["run_id"] for r in json.loads(f.log(name))["recovered"]}
                 for name in ("recover1", "recover2")}
    assert recovered["recover1"].isdisjoint(recovered["recover2"])
    assert recovered["recover1"] | recovered["recover2"] == set(ids)
    for name, proc in (("recover1", first), ("recover2", second)):
        assert {r for r, pid in by_run.items() if pid == proc.pid} == recovered[name]


# -- a rolling restart ------------------------------------------------------------------------


def test_a_rolling_restart_hands_unfinished_runs_to_the_new_workers(
    pg_db: str, tmp_path: Path
) -> None:
    make_store = _stores(pg_db)
    ids = submit(make_store, 120)
    with fleet(pg_db, tmp_path) as f:
        for name in ("old1", "old2"):
            f.start(name, step_delay=0.4, grace_period=0.2)
        wait_completed(make_store, 20, 60)
        for name in ("new1", "new2"):
            f.start(name, step_delay=0.02)
        f.wait_serving("new1", "new2")
        old = {f.procs[name].pid for name in ("old1", "old2")}
        for name in ("old1", "old2"):  # both at once, while busy
            f.procs[name].send_signal(signal.SIGTERM)
        assert [f.procs[name].wait(30) for name in ("old1", "old2")] == [0, 0]
        wait_completed(make_store, len(ids), 90)
    check_runs(make_store, ids)
    runs = f.executions()
    check_no_overlap(runs)  # nothing ran twice at once, nothing finished ran again
    stopped = [e for execs in runs.values() for e in execs if e.outcome == "cancelled"]
    # only the old ones were stopped mid-step (whether they were busy at that moment
    # depends on the machine's speed, so none stopped is not a failure)
    assert {e.pid for e in stopped} <= old
    for execs in runs.values():  # a step ran again only where a stop cut it short
        assert [e.outcome for e in execs] == ["cancelled"] * (len(execs) - 1) + ["done"], execs


# -- a stale holder ---------------------------------------------------------------------------


def test_a_worker_frozen_past_its_lease_cannot_write_when_it_wakes(
    pg_db: str, tmp_path: Path
) -> None:
    make_store = _stores(pg_db)
    ids = submit(make_store, 8)
    with fleet(pg_db, tmp_path) as f:
        # its lease outlives a loaded machine's stalls until the freeze; its steps outlast
        # the time it takes to see them all started
        stale = f.start("stale", lease_ttl=3.0, step_delay=5.0)
        wait_for(lambda: sum(len(e) for e in f.executions().values()) == 2 * len(ids), 30,
                 "the worker to start every step")
        stale.send_signal(signal.SIGSTOP)  # a long pause: no renewals, no writes
        try:
            f.start("taker", step_delay=0.01)
            wait_completed(make_store, len(ids), 60)
            done = f.executions()
        finally:
            stale.send_signal(signal.SIGCONT)
        # its steps finish their sleep and try to record their results; every write is refused
        wait_for(lambda: f.log("stale").count("run_execution_stopped") == len(ids), 30,
                 "the stale worker to give up every run")
        assert f.log("stale").count("LeaseLostError") >= len(ids)
        assert stale.poll() is None
    check_runs(make_store, ids)
    before = {(e.pid, e.started) for execs in done.values() for e in execs}
    woke = [e for execs in f.executions().values() for e in execs
            if e.pid == stale.pid and (e.pid, e.started) not in before]
    assert not woke  # it started nothing after waking
    _one_recoverer_per_run(f, ids, stale.pid)
