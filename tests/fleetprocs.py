"""Running ``durable-flow worker`` processes against one store, and checking what they did.

Used by the fleet process tests: start, stop and kill workers of
``fleetkit:workflow``; submit runs; wait for statuses; check every run's final
state and checkpoint chain; read the step journal.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import fleetkit
import forkrun
import pytest
from clikit import CONSOLE_SCRIPT

from durable_flow import RunStatus, Runtime
from durable_flow.store._protocols import CheckpointStore

TESTS = Path(__file__).resolve().parent

StoreFactory = Callable[[], CheckpointStore]
Proc = forkrun.Child


class Fleet:
    """Worker processes on one database, each logging to ``<dir>/<name>.log``."""

    def __init__(self, db: str, journal: Path, log_dir: Path) -> None:
        self.db = db
        self.journal = journal
        self.log_dir = log_dir
        self.procs: dict[str, Proc] = {}
        journal.touch()

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a fleet process: the journal, the tests on the path."""
        return {**os.environ, "FLEET_JOURNAL": str(self.journal), "PYTHONPATH": str(TESTS),
                **extra}

    def start(self, name: str, *, lease_ttl: float = 10.0, poll_interval: float = 0.2,
              grace_period: float = 5.0, concurrency: int = 8,
              step_delay: float | None = None) -> Proc:
        """Start ``durable-flow worker fleetkit:workflow`` named ``name``.

        The lease outlives any stall a loaded machine causes (the tests run in
        parallel on two cores): a live worker keeps its runs. A test whose
        worker must lose them (killed, frozen) gives that one a short lease.
        """
        extra = {} if step_delay is None else {"FLEET_STEP_DELAY": str(step_delay)}
        return self.spawn(name, [
            "worker", "fleetkit:workflow", "--concurrency", str(concurrency),
            "--lease-ttl", str(lease_ttl), "--poll-interval", str(poll_interval),
            "--grace-period", str(grace_period), "--name", name], **extra)

    def spawn(self, name: str, args: Sequence[str], **extra: str) -> Proc:
        """Start ``durable-flow --db DB ARGS...`` as process ``name``.

        The console script is forked from the test process's warm server
        (``forkrun.start``): a process of its own, killed and reaped as any.
        """
        proc = forkrun.start([CONSOLE_SCRIPT, "--db", self.db, *args], env=self.env(**extra),
                             log=self.log_dir / f"{name}.log", cwd=TESTS, console=True)
        self.procs[name] = proc
        return proc

    def log(self, name: str) -> str:
        """What process ``name`` printed so far."""
        return (self.log_dir / f"{name}.log").read_text(errors="replace")

    def wait_serving(self, *names: str, timeout: float = 30) -> None:
        """Wait until each named worker printed that it serves."""
        wait_for(lambda: all("serving" in self.log(n) for n in names), timeout,
                 f"workers {names} to serve")

    def stop(self, name: str, timeout: float = 30) -> int:
        """SIGTERM one process and wait for it; its exit code."""
        proc = self.procs[name]
        proc.send_signal(signal.SIGTERM)
        return proc.wait(timeout=timeout)

    def kill(self, name: str) -> int:
        """SIGKILL one process; its pid."""
        proc = self.procs[name]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        return proc.pid

    def close(self) -> None:
        """Stop every process still running (SIGTERM, then SIGKILL)."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def executions(self) -> dict[tuple[str, str], list[fleetkit.Execution]]:
        """The step executions the journal recorded so far."""
        return fleetkit.executions(self.journal)


@contextmanager
def fleet(db: str, tmp_path: Path) -> Iterator[Fleet]:
    """A :class:`Fleet` whose processes are all stopped at the end."""
    made = Fleet(db, tmp_path / "journal.txt", tmp_path)
    try:
        yield made
    finally:
        made.close()


def wait_for(predicate: Callable[[], bool], timeout: float, what: str,
             interval: float = 0.1) -> None:
    """Poll ``predicate`` every ``interval`` s; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(interval)


async def _submit(store: CheckpointStore, count: int, first: int) -> dict[str, int]:
    async with Runtime(store) as rt:
        ids = {}
        for n in range(first, first + count):
            info = await rt.submit(fleetkit.workflow, {"n": n}, run_id=f"order-{n:04d}")
            ids[info.run_id] = n
        return ids


def submit(make_store: StoreFactory, count: int, *, first: int = 0) -> dict[str, int]:
    """Submit ``count`` runs (ids ``order-NNNN``); their inputs by run id."""
    return asyncio.run(_submit(make_store(), count, first))


async def _statuses(store: CheckpointStore) -> collections.Counter[RunStatus]:
    async with Runtime(store) as rt:
        return collections.Counter(r.status for r in await rt.list_runs())


def statuses(make_store: StoreFactory) -> collections.Counter[RunStatus]:
    """How many runs are in each status."""
    return asyncio.run(_statuses(make_store()))


def wait_completed(make_store: StoreFactory, count: int, timeout: float) -> None:
    """Wait until ``count`` runs completed (a look every 0.3 s: each opens a store)."""
    wait_for(lambda: statuses(make_store)[RunStatus.COMPLETED] >= count, timeout,
             f"{count} runs to complete", interval=0.3)


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


def check_runs(make_store: StoreFactory, ids: dict[str, int]) -> None:
    """Every run completed as an uninterrupted run ends, on a linear chain of four checkpoints."""
    asyncio.run(_check_runs(make_store(), ids))


def check_no_overlap(runs: dict[tuple[str, str], list[fleetkit.Execution]],
                     lost: frozenset[int] = frozenset()) -> None:
    """No two executions of one step ran at once; none ran again after one that finished.

    An execution that finished (``done``) recorded its result, unless its
    process lost the run (in ``lost``: SIGKILLed, or frozen past its lease),
    so nothing may execute that step again.
    """
    for key, execs in runs.items():
        ordered = sorted(execs, key=lambda e: e.started)
        for before, after in itertools.pairwise(ordered):
            assert before.outcome != "done" or before.pid in lost, (key, ordered)
            if before.ended is not None and before.pid not in lost:
                assert before.ended <= after.started, (key, ordered)
