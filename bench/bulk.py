"""Bulk retry of 1,000 failed runs on PostgreSQL: runs per second.

Creates a fresh database on the server of ``DURABLE_FLOW_BENCH_PG_DSN``
(default ``postgresql://postgres@127.0.0.1:5432/postgres``), fails 1,000 runs
(a node that raises), then times ``durable-flow retry --status failed --yes``
as a user types it (a child process: its start-up included), each run queued
again in a transaction of its own. Writes the ``bulk`` section of
``bench/RESULTS.md``. Usage: ``python bench/bulk.py [--runs N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sections import replace_section

from durable_flow import END, Blackboard, PostgresStore, Runtime, WorkflowBuilder

SERVER_DSN = os.environ.get("DURABLE_FLOW_BENCH_PG_DSN",
                            "postgresql://postgres@127.0.0.1:5432/postgres")
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


class Job(Blackboard):
    n: int = 0


def failing() -> Any:
    b = WorkflowBuilder("bulk", state=Job)

    @b.node()
    async def work(state: Job) -> dict[str, Any]:
        raise RuntimeError("provider down")

    b.set_entry("work").add_edge("work", END)
    return b.build()


@contextmanager
def database(server: str, prefix: str = "df_bench_bulk") -> Iterator[str]:
    """A new database on ``server``, named ``prefix`` and the pid; yields its DSN, drops it afterwards.

    ``prefix`` is ``[a-z0-9_]`` only (the name is quoted as an identifier).
    """
    name = f"{prefix}_{os.getpid()}"
    asyncio.run(_admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)',
                       f'CREATE DATABASE "{name}"'))
    try:
        yield urlunsplit(urlsplit(server)._replace(path=f"/{name}"))
    finally:
        asyncio.run(_admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def _admin(dsn: str, *statements: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        for sql in statements:
            await conn.execute(sql)
    finally:
        await conn.close()


async def fail_runs(dsn: str, runs: int) -> None:
    wf = failing()
    async with Runtime(PostgresStore(dsn, max_size=4)) as rt:
        for n in range(runs):
            await rt.run(wf, {"n": n}, run_id=f"bulk-{n:05d}")


async def count(dsn: str, status: str) -> int:
    async with Runtime(PostgresStore(dsn, max_size=2)) as rt:
        return len(await rt.select_runs(status=status))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=1000)
    args = parser.parse_args()
    with database(SERVER_DSN) as dsn:
        asyncio.run(fail_runs(dsn, args.runs))
        assert asyncio.run(count(dsn, "failed")) == args.runs
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "durable_flow", "--db", dsn, "retry",
                               "--status", "failed", "--yes"], capture_output=True, text=True,
                              check=True)
        seconds = time.monotonic() - started
        assert asyncio.run(count(dsn, "queued")) == args.runs, proc.stdout
    summary = proc.stdout.strip().splitlines()[-1]
    rate = args.runs / seconds
    load = os.getloadavg()[0]
    section = "\n".join([
        "<!-- bulk:start -->",
        "## Bulk retry of failed runs (PostgreSQL)",
        "",
        "| runs | seconds | runs/s |",
        "|---|---|---|",
        f"| {args.runs:,} | {seconds:.2f} | {rate:.0f} |",
        "",
        f"`durable-flow retry --status failed --yes` on {args.runs:,} failed runs, timed as a "
        f"child process (its start-up and the selection included), each run queued again in a "
        f"transaction of its own; it printed `{summary}`. Measured "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on the shared 2-core machine "
        f"(load average {load:.1f}) with `bench/bulk.py`, PostgreSQL on the same machine.",
        "<!-- bulk:end -->",
    ])
    replace_section(RESULTS, "bulk", section)
    print(section)


if __name__ == "__main__":
    main()
