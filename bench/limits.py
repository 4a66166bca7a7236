"""Limits on PostgreSQL: the cost of one grant per task, and a limited fleet's throughput.

1. Grant overhead: ``request_grant`` then ``release_grant`` of one limit with a
   free slot, sequentially, on one ``PostgresStore`` (what a task with
   ``uses=`` adds to its run); median and p90 per pair, and per grant alone.
   Beside them, the floor any write pays: one statement that writes a row,
   committed alone (its WAL flush), measured on the same store in turns
   with the pairs, and the load average of the machine.
2. Throughput: two workers (one process, two stores) run ``RUNS`` runs of a
   node that uses ``api=Limit(per_second=RATE)`` and does nothing else; the
   achieved grants per second over the window from the first to the last
   call, against ``RATE``; and how close each grant came to the moment the
   sliding window allowed it (a grant may come one second after the grant
   ``RATE`` before it, not sooner): the allowed rate used in the steady state
   is ``RATE`` grants per (1 s + the mean lateness), which leaves out how long
   the fleet took to claim its first runs.

Usage: ``python bench/limits.py postgresql://postgres@127.0.0.1:5432/bench``
(the database is emptied first). Prints Markdown lines for bench/RESULTS.md.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from typing import Any

from durable_flow import END, Blackboard, Limit, Runtime, Worker, WorkflowBuilder
from durable_flow.store.postgres._postgres import PostgresStore

PAIRS = 400
RUNS = 600
RATE = 40


class Call(Blackboard):
    n: int = 0


starts: list[float] = []
b = WorkflowBuilder("limited", state=Call)


@b.node(uses=("api",))
async def call(state: Call) -> dict[str, Any]:
    starts.append(time.monotonic())
    return {"n": 1}


b.set_entry("call").add_edge("call", END)
flow = b.build()


async def _empty(dsn: str) -> None:
    import asyncpg  # type: ignore[import-not-found]

    from durable_flow.store.sql._schema import METADATA

    conn = await asyncpg.connect(dsn)
    try:
        for table in sorted(METADATA.tables):
            await conn.execute(f"DELETE FROM {table}")  # the store's own table names, no data
    finally:
        await conn.close()


_TOUCH = "UPDATE limits SET updated_at = updated_at + 1 WHERE name = 'bench'"  # fixed text


async def grant_overhead(dsn: str) -> tuple[float, float, float, float]:
    async with PostgresStore(dsn) as store:
        for i in range(20):  # warm-up: statements compiled and prepared
            await store.request_grant(f"w{i}", "bench", run_id="r", task="t", owner="o", ttl=30,
                                      concurrency=4, per_second=None, per_minute=None)
            await store.release_grant(f"w{i}", "bench")
        pairs, grants, writes = [], [], []
        for i in range(PAIRS):
            async with store.driver.pool.acquire() as conn:  # the floor, between two pairs
                t0 = time.perf_counter()
                await conn.execute(_TOUCH)
                writes.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await store.request_grant(f"g{i}", "bench", run_id="r", task="t", owner="o", ttl=30,
                                      concurrency=4, per_second=None, per_minute=None)
            t1 = time.perf_counter()
            await store.release_grant(f"g{i}", "bench")
            pairs.append(time.perf_counter() - t0)
            grants.append(t1 - t0)
    q = statistics.quantiles(pairs, n=10)
    return (statistics.median(pairs) * 1e3, q[8] * 1e3, statistics.median(grants) * 1e3,
            statistics.median(writes) * 1e3)


def lateness(ordered: list[float], rate: int) -> list[float]:
    """Seconds each grant came after the earliest the window allowed it (from the RATE-th on)."""
    return [max(0.0, ordered[k] - (ordered[k - rate] + 1.0)) for k in range(rate, len(ordered))]


async def throughput(dsn: str) -> tuple[float, float, float]:
    limits = {"api": Limit(per_second=RATE)}
    async with Runtime(PostgresStore(dsn)) as rt:
        ids = [(await rt.submit(flow, {}, run_id=f"t{i:04d}")).run_id for i in range(RUNS)]
        async with Worker(PostgresStore(dsn), [flow], concurrency=32, poll_interval=0.1,
                          limits=limits) as w1, \
                Worker(PostgresStore(dsn), [flow], concurrency=32, poll_interval=0.1,
                       limits=limits) as w2:
            serving = [asyncio.create_task(w.serve()) for w in (w1, w2)]
            for run_id in ids:
                await rt.wait(run_id, timeout=300)
            for w in (w1, w2):
                await w.stop()
            await asyncio.gather(*serving)
    ordered = sorted(starts)
    window = ordered[-1] - ordered[0]
    achieved = (len(ordered) - 1) / window  # calls after the first, over the time they took
    return achieved, window, statistics.mean(lateness(ordered, RATE))


async def main(dsn: str) -> None:
    async with PostgresStore(dsn) as store:
        await store.setup()
    await _empty(dsn)
    load = os.getloadavg()[0]
    median, p90, grant, write = await grant_overhead(dsn)
    achieved, window, late = await throughput(dsn)
    print(f"| grant + release, one limit with a free slot (PostgreSQL, {PAIRS} pairs) "
          f"| median {median:.2f} ms, p90 {p90:.2f} ms; the grant alone {grant:.2f} ms |")
    print(f"| the floor: one statement writing a row, committed alone | median {write:.2f} ms |")
    fastest = (RUNS - 1) // RATE  # whole windows: the limit allows RATE at once, then RATE a second
    print(f"| limited fleet: 2 workers, {RUNS} runs, `Limit(per_second={RATE})` "
          f"| {achieved:.1f} grants/s from the first call to the last ({window:.1f} s; "
          f"{100 * achieved / RATE:.0f}% of the allowed rate; the limit allows them in "
          f"{fastest:.1f} s at the fastest, so {100 * fastest / window:.0f}% of that) |")
    print(f"| the same, steady state: each grant against the earliest its window allowed it "
          f"| {late * 1e3:.1f} ms late on average, so {100 / (1 + late):.1f}% of the allowed "
          f"rate used |")
    print(f"load average {load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
