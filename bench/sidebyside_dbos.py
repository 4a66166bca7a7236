"""DBOS Transact's side of the short-workflow comparison (``bench/sidebyside.py`` runs it).

``python bench/sidebyside_dbos.py DSN RUNS``: RUNS workflows of three durable
steps each, started one after another (each awaited before the next), on the
PostgreSQL database DSN (its own, fresh). Prints one JSON line:
``{"runs": RUNS, "seconds": ..., "per_s": ..., "cpu_ms": ...}`` (setup and launch
not timed; ``cpu_ms``: this process's CPU per workflow, all threads).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from dbos import DBOS, DBOSConfig


@DBOS.step()
async def step(n: int) -> int:
    return n + 1


@DBOS.workflow()
async def three_steps(n: int) -> int:
    n = await step(n)
    n = await step(n)
    return await step(n)


async def main(runs: int) -> dict[str, float]:
    for n in range(3):  # warm up: connections, prepared statements
        assert await three_steps(n) == n + 3
    began, cpu = time.perf_counter(), time.process_time()
    for n in range(runs):
        assert await three_steps(n) == n + 3
    took, used = time.perf_counter() - began, time.process_time() - cpu
    return {"runs": runs, "seconds": took, "per_s": runs / took, "cpu_ms": used * 1e3 / runs}


if __name__ == "__main__":
    dsn, count = sys.argv[1], int(sys.argv[2])
    config: DBOSConfig = {"name": "sidebyside", "system_database_url": dsn,
                          "log_level": "WARNING", "console_log_level": "WARNING"}
    DBOS(config=config)
    DBOS.launch()
    try:
        print(json.dumps(asyncio.run(main(count))))
    finally:
        DBOS.destroy()
