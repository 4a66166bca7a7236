"""PostgreSQL superstep commit against a raw asyncpg transaction, in one process.

``measure(dsn, commits)`` times ``PostgresStore.commit`` of a typical
superstep (the run's update that checks the lease and the head, one
checkpoint, two changed values, one appended log chunk) and, interleaved
with it on the store's own connection pool, a hand-written asyncpg
transaction that writes the same rows to the same tables (``UPDATE runs``
with the same checks, ``INSERT`` a checkpoint, two values and a chunk), plus
one ``SELECT 1`` round trip as the floor. Every sample is one call, timed
with ``perf_counter`` (and ``process_time``: the CPU this process spent on
it, the client's share); the commit objects are built before the clock starts.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson

from durable_flow import PostgresStore, RunStatus
from durable_flow.model._clock import utcnow
from durable_flow.model._ids import new_id
from durable_flow.store._protocols import (
    CheckpointMeta,
    CheckpointWrite,
    Claim,
    Commit,
    Lease,
    RunRecord,
    RunUpdate,
)

WARMUP = 200

# What a hand-written transaction would say; the same rows as the store writes.
RAW_UPDATE = ("UPDATE runs SET status = $1, updated_at = $2, head_checkpoint_id = $3 "
              "WHERE run_id = $4 AND lease_epoch = $5 AND lease_owner = $6 "
              "AND head_checkpoint_id = $7")
RAW_CHECKPOINT = (
    "INSERT INTO checkpoints (run_id, checkpoint_id, thread, namespace, parent_id, seq, "
    "superstep, created_at, status, source, nodes, routing_reason, next_tasks, joins, "
    "value_versions, log_lengths, error, size) "
    "VALUES ($1, $2, '', '', $3, $4, $4, $5, 'running', 'loop', $6, $7, $8, '{}', $9, $10, "
    "NULL, $11)")
RAW_VALUE = ("INSERT INTO channel_values (run_id, thread, channel, seq, data) "
             "VALUES ($1, '', $2, $3, $4)")
RAW_CHUNK = ("INSERT INTO log_chunks (run_id, thread, seq, channel, data) "
             "VALUES ($1, '', $2, 'messages', $3)")


@dataclass
class Chain:
    """One run's top-level thread, advanced one superstep at a time."""

    lease: Lease
    head: CheckpointMeta

    def next(self) -> CheckpointWrite:
        """The next superstep's checkpoint: two changed values, one appended message."""
        seq = self.head.seq + 1
        values = {"draft": orjson.dumps(f"draft {seq} " + "x" * 200),
                  "count": orjson.dumps(seq)}
        chunk = orjson.dumps([{"role": "assistant", "content": "y" * 300, "name": "writer"}])
        meta = CheckpointMeta(
            id=new_id(), run_id=self.lease.run_id, thread="", namespace="",
            parent_id=self.head.id, seq=seq, superstep=seq, created_at=utcnow(),
            status=RunStatus.RUNNING, source="loop", nodes=("writer", "counter"),
            routing_reason="writer -> writer", next_tasks=("writer", "counter"),
            value_versions={"topic": 0, "draft": seq, "count": seq},
            log_lengths={"messages": seq}, size=sum(map(len, values.values())) + len(chunk))
        return CheckpointWrite(meta=meta, values=values, appends={"messages": chunk})


async def _start(store: PostgresStore, run_id: str) -> Chain:
    now = utcnow()
    first = CheckpointMeta(id=new_id(), run_id=run_id, thread="", namespace="",
                           parent_id=None, seq=0, superstep=0, created_at=now,
                           status=RunStatus.RUNNING, source="input",
                           value_versions={"topic": 0})
    run = RunRecord(run_id=run_id, workflow_name="bench", status=RunStatus.RUNNING,
                    created_at=now, updated_at=now, head_checkpoint_id=first.id,
                    signature="bench")
    await store.create_run(run, [CheckpointWrite(first, values={"topic": b'"tides"'})], None)
    lease = await store.claim(Claim(run_id, "bench", 3600))
    return Chain(lease, first)


def store_commit(store: PostgresStore, chain: Chain) -> Callable[[], Awaitable[None]]:
    """One superstep through ``PostgresStore.commit`` (built before it is timed)."""
    cp = chain.next()
    commit = Commit(chain.lease, extends=chain.head.id, checkpoint=cp,
                    run=RunUpdate(RunStatus.RUNNING, head_checkpoint_id=cp.meta.id))

    async def go() -> None:
        await store.commit(commit)
        chain.head = cp.meta
    return go


def raw_commit(pool: Any, chain: Chain) -> Callable[[], Awaitable[None]]:
    """The same superstep as a hand-written asyncpg transaction on the same pool."""
    cp = chain.next()
    m, lease = cp.meta, chain.lease
    now = int(m.created_at.timestamp() * 1e6)
    values = [(m.run_id, ch, m.seq, data) for ch, data in cp.values.items()]

    async def go() -> None:
        async with pool.acquire() as conn, conn.transaction():
            done = await conn.execute(RAW_UPDATE, "running", now, m.id, m.run_id, lease.epoch,
                                      lease.owner, m.parent_id)
            if done != "UPDATE 1":
                raise RuntimeError("raw transaction lost its lease")
            await conn.execute(RAW_CHECKPOINT, m.run_id, m.id, m.parent_id, m.seq, now,
                               orjson.dumps(m.nodes).decode(), m.routing_reason,
                               orjson.dumps(m.next_tasks).decode(),
                               orjson.dumps(m.value_versions).decode(),
                               orjson.dumps(m.log_lengths).decode(), m.size)
            await conn.executemany(RAW_VALUE, values)
            await conn.execute(RAW_CHUNK, m.run_id, m.seq, cp.appends["messages"])
        chain.head = m
    return go


def floor(pool: Any) -> Callable[[], Awaitable[None]]:
    """One round trip: ``SELECT 1`` on a connection of the pool."""
    async def go() -> None:
        async with pool.acquire() as conn:
            await conn.fetchval("SELECT 1")
    return go


async def _sample(make: Callable[[], Callable[[], Awaitable[None]]]) -> tuple[float, float]:
    """(wall, this process's CPU) seconds of one call."""
    call = make()
    c0, t0 = time.process_time(), time.perf_counter()
    await call()
    return time.perf_counter() - t0, time.process_time() - c0


def summary(xs: list[float]) -> dict[str, float]:
    """Median, p95, mean and min of samples in seconds."""
    ordered = sorted(xs)
    return {"median": statistics.median(ordered),
            "p95": ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))],
            "mean": statistics.fmean(ordered), "min": ordered[0], "n": len(ordered)}


async def measure(dsn: str, commits: int, *, profile: bool = False) -> dict[str, Any]:
    """Interleave store commits, raw transactions and floor round trips; return stats."""
    async with PostgresStore(dsn, min_size=1, max_size=2) as store:
        pool = store.driver._pool  # the same pool: the comparison is the driver, not the pool
        ours, theirs = await _start(store, f"commit-store-{new_id()}"), \
            await _start(store, f"commit-raw-{new_id()}")
        kinds: dict[str, Callable[[], Callable[[], Awaitable[None]]]] = {
            "store": lambda: store_commit(store, ours),
            "raw": lambda: raw_commit(pool, theirs),
            "floor": lambda: floor(pool),
        }
        samples: dict[str, list[float]] = {k: [] for k in kinds}
        cpu: dict[str, float] = dict.fromkeys(kinds, 0.0)
        for i in range(WARMUP + commits):
            for kind, make in kinds.items():
                took, used = await _sample(make)
                if i >= WARMUP:
                    samples[kind].append(took)
                    cpu[kind] += used
        result: dict[str, Any] = {k: {**summary(v), "cpu_mean": cpu[k] / len(v)}
                                  for k, v in samples.items()}
        result["ratio_median"] = result["store"]["median"] / result["raw"]["median"]
        result["ratio_p95"] = result["store"]["p95"] / result["raw"]["p95"]
        if profile:
            result["profile"] = await _profile(store, ours, commits)
        return result


async def _profile(store: PostgresStore, chain: Chain, commits: int) -> str:
    """cProfile of ``commits`` store commits (built outside the profile), top by own time."""
    profiler = cProfile.Profile()
    for _ in range(commits):
        call = store_commit(store, chain)
        profiler.enable()
        await call()
        profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(18)
    return out.getvalue()
