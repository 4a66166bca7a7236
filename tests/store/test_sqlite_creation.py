"""Creating a new SQLite store while other processes create or write it: all wait, none fails."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from durable_flow.store.sqlite._sqlite import SqliteStore

_ROUNDS = 12
_PROCESSES = 6

# Each child builds the workflow once, then for every line it reads opens a new
# SqliteStore on the path named there, runs one workflow to completion and
# answers with the run's status (or the error), so the parent can release all
# children onto a new file at the same instant, round after round.
_CHILD = """
    import asyncio, sys
    from durable_flow import END, Blackboard, Runtime, SqliteStore, WorkflowBuilder

    class Count(Blackboard):
        n: int = 0

    b = WorkflowBuilder("created", state=Count)
    b.add_node("step", lambda state: {"n": state.n + 1})
    b.set_entry("step")
    b.add_edge("step", END)
    workflow = b.build()

    async def once(path, owner):
        async with SqliteStore(path) as store, Runtime(store) as rt:
            result = await rt.run(workflow, {"n": 1}, run_id=owner)
            return f"{result.status.value} {result.state.n}"

    owner = sys.argv[1]
    print("ready", flush=True)
    for line in sys.stdin:
        try:
            print(asyncio.run(once(line.strip(), owner)), flush=True)
        except Exception as exc:
            print(f"error {type(exc).__name__}: {exc}".replace("\\n", " "), flush=True)
"""


def _start(owner: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(_CHILD), owner],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _round(procs: list[subprocess.Popen[str]], path: Path) -> list[str]:
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(f"{path}\n")
        proc.stdin.flush()
    answers = []
    for proc in procs:
        assert proc.stdout is not None
        answers.append(proc.stdout.readline().strip())
    return answers


@pytest.mark.process
def test_processes_creating_one_new_file_at_once_all_complete_their_runs(
        tmp_path: Path) -> None:
    procs = [_start(f"p{i}") for i in range(_PROCESSES)]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stderr is not None
            line = proc.stdout.readline()
            assert line == "ready\n", f"a child did not start: {line!r}"
        failures = []
        for n in range(_ROUNDS):
            answers = _round(procs, tmp_path / f"new-{n}.db")
            failures += [f"round {n}: {a}" for a in answers if a != "completed 2"]
        assert failures == []
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


async def test_the_migration_waits_for_another_writer_instead_of_failing(tmp_path: Path) -> None:
    path = tmp_path / "held.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA journal_mode = WAL")
    holder.execute("BEGIN IMMEDIATE")  # another process's write, in progress
    store = SqliteStore(path, busy_timeout=30)
    setup = asyncio.create_task(store.setup())
    await asyncio.sleep(0.5)
    assert not setup.done()  # the migration waits for the write lock
    holder.execute("COMMIT")
    holder.close()
    await asyncio.wait_for(setup, 30)
    async with store:
        assert await store.list_runs() == []
