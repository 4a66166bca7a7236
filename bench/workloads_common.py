"""Helpers shared by both sides of the benchmark: payload, sizes, memory, the floor."""

from __future__ import annotations

import os
import resource
import sqlite3
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

# One ~200-byte message body (the serialized message is a little larger on both
# sides: role and field names are added).
CONTENT = ("lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod "
           "tempor incididunt ut labore et dolore magna aliqua. ut enim ad minim veniam, "
           "quis nostrud exercitation ullamco laboris nisi ut aliquip ex ea commodo")[:200]
assert len(CONTENT) == 200

FANOUT_WIDTH = 8
FANOUT_ROUNDS = 50
MAP_ITEMS = 1000
MAP_ROUNDS = 3
INBOX_RUNS = 10_000


# Set by run.py in a profiling worker: a pyinstrument Profiler that records only
# inside ``timed`` windows (the measured calls), not imports or setup.
PROFILER: Any = None
ACTIVE = False  # True while a profiled window runs (run.py counts transactions then)


async def timed(fn: Callable[[], Awaitable[T]], *, profile: bool = True) -> tuple[float, T]:
    """Await ``fn()``; return (seconds, result). The profiler, if any, runs meanwhile."""
    global ACTIVE
    prof = PROFILER if profile else None
    if prof is not None:
        prof.start()
        ACTIVE = True
    t0 = time.perf_counter()
    try:
        out = await fn()
    finally:
        elapsed = time.perf_counter() - t0
        if prof is not None:
            prof.stop()
            ACTIVE = False
    return elapsed, out


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB (Linux: ru_maxrss is KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def db_bytes(path: str | os.PathLike[str]) -> int:
    """Size of a SQLite database with its WAL folded in.

    Call with every connection closed: the WAL is checkpointed into the main
    file (TRUNCATE), so the main file alone holds every page.
    """
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
    finally:
        conn.close()
    wal = Path(f"{path}-wal")
    return int(pages * page_size + (wal.stat().st_size if wal.exists() else 0))


def journal_mode(path: str | os.PathLike[str]) -> str:
    """The persistent journal mode of a database file (``wal`` or ``delete``)."""
    conn = sqlite3.connect(path)
    try:
        return str(conn.execute("PRAGMA journal_mode").fetchone()[0])
    finally:
        conn.close()


def chain_stats(n: int, seconds: float, cpu: float, size0: int, path: str | os.PathLike[str],
                rss0: float, pragmas: dict[str, Any]) -> dict[str, Any]:
    """The measurements of one chain run, the same for both sides."""
    rss = peak_rss_mb()
    size = db_bytes(path)
    return {"n": n, "seconds": seconds, "supersteps_per_s": n / seconds,
            "s_per_superstep": seconds / n, "cpu_per_superstep": cpu / n,
            "db_bytes": size - size0, "bytes_per_superstep": (size - size0) / n,
            "db_file_bytes": size, "rss_mb": rss, "rss_base_mb": rss0,
            "journal_mode": journal_mode(path), "pragmas": pragmas}


def fanout_stats(seconds: float, supersteps: int, size0: int,
                 path: str | os.PathLike[str]) -> dict[str, Any]:
    """The measurements of one fanout run, the same for both sides."""
    return {"seconds": seconds, "supersteps": supersteps,
            "supersteps_per_s": supersteps / seconds, "rounds_per_s": FANOUT_ROUNDS / seconds,
            "db_bytes": db_bytes(path) - size0, "rss_mb": peak_rss_mb()}


def map_stats(seconds: float, rounds: int, items: int, size0: int,
              path: str | os.PathLike[str]) -> dict[str, Any]:
    """The measurements of one map run, the same for both sides.

    A round is 3 supersteps on both sides (split, the instances, collect),
    counted the same way for both rather than read from each side's records.
    """
    size = db_bytes(path) - size0
    supersteps, instances = 3 * rounds, items * rounds
    return {"seconds": seconds, "rounds": rounds, "supersteps": supersteps,
            "instances": instances, "supersteps_per_s": supersteps / seconds,
            "instances_per_s": instances / seconds, "db_bytes": size,
            "bytes_per_instance": size / instances, "rss_mb": peak_rss_mb()}


def floor(folder: str, *, synchronous: str = "FULL", count: int = 400) -> dict[str, float]:
    """Cost of one raw sqlite3 transaction writing ~200 bytes, same PRAGMAs and disk.

    ``journal_mode=WAL`` as both stores use it, ``synchronous`` FULL (or
    NORMAL, to see the cost without the sync); each transaction is
    ``BEGIN IMMEDIATE; INSERT one 200-byte blob; COMMIT``.
    """
    path = Path(folder) / "floor.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, data BLOB NOT NULL)")
    blob = CONTENT.encode()
    for _ in range(20):  # warm up: file growth, WAL creation
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t (data) VALUES (?)", (blob,))
        conn.execute("COMMIT")
    times = []
    for _ in range(count):
        t0 = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t (data) VALUES (?)", (blob,))
        conn.execute("COMMIT")
        times.append(time.perf_counter() - t0)
    conn.close()
    return {"median_s": statistics.median(times), "min_s": min(times),
            "mean_s": statistics.fmean(times), "p90_s": statistics.quantiles(times, n=10)[-1]}
