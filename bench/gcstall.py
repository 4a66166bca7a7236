"""A small run's worst superstep and Python's full collections: ``python bench/gcstall.py``.

Each sample is a fresh process holding what a worker process holds (durable-flow
with both SQL stores imported, a ``SqliteStore`` open) that runs the chain of
``longrun_work.py`` for ``--small`` supersteps (one node appending one ~200-byte
message a superstep), and records each superstep's cost (the differences of
the node's start times) and each full (generation 2) collection: when it
started, in which superstep, how long it took. Two kinds of process, in turn:
``plain``, and ``frozen``: ``gc.freeze()`` after one collection before the run,
as ``durable-flow worker`` does before serving (``cli/_worker.freeze_startup_heap``).
``--write`` puts the table in ``bench/RESULTS.md`` (section ``gc-stall``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))


def child(mode: str, folder: str, small: int) -> dict[str, Any]:
    """One sample (in this process): the small run's supersteps and full collections."""
    from longrun_work import TIMES, superstep_stats, workflow

    from durable_flow import PostgresStore, Runtime, SqliteStore  # noqa: F401 (a worker's heap)
    from durable_flow.cli._worker import freeze_startup_heap

    full: list[tuple[int, float]] = []
    began = [0.0]

    def note(phase: str, info: dict[str, Any]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            began[0] = time.perf_counter()
        else:
            full.append((len(TIMES), (time.perf_counter() - began[0]) * 1e3))

    async def go() -> dict[str, Any]:
        async with Runtime(SqliteStore(str(Path(folder) / f"{mode}-{os.getpid()}.db"),
                                       synchronous="normal")) as rt:
            await rt.run(workflow(20, waiting=False), {}, max_supersteps=30)  # warm
            frozen = freeze_startup_heap() if mode == "frozen" else 0
            tracked = len(gc.get_objects())
            TIMES.clear()
            gc.callbacks.append(note)
            try:
                result = await rt.run(workflow(small, waiting=False), {},
                                      max_supersteps=small + 10)
            finally:
                gc.callbacks.remove(note)
            assert result.state.count == small, result.state.count
        steps = superstep_stats(list(TIMES), max(1, small // 10))
        return {"mode": mode, "frozen": frozen, "tracked": tracked, "full": full,
                "median_ms": steps["median_ms"], "p99_ms": steps["p99_ms"],
                "worst_ms": steps["worst_ms"], "worst_at": steps["worst_at"]}

    return asyncio.run(go())


def sample(mode: str, folder: str, small: int) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, __file__, "--child", mode, folder, str(small)],
                          capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{mode} sample failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.splitlines()[-1])


def render(rows: dict[str, list[dict[str, Any]]], small: int, load: tuple[str, str],
           seconds: float) -> str:
    from machine import cpu_and_memory

    cpu, mem = cpu_and_memory()
    lines = [
        "## A small run's worst superstep and the full collections (`bench/gcstall.py`)",
        "",
        f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by "
        f"`python bench/gcstall.py` in {seconds:.0f} s (load average before/after: "
        f"{load[0]} / {load[1]}; {os.cpu_count()} CPUs, {cpu}, {mem}).",
        "",
        f"Each sample a fresh process with both SQL stores imported and a SQLite store open "
        f"(`synchronous=\"normal\"`), a {small:,}-superstep chain; `frozen`: `gc.freeze()` "
        "after one collection before the run, as `durable-flow worker` does before serving. "
        "Full collections: Python's generation-2 collections during the run.",
        "",
        "| process | objects a full collection walks | median superstep | p99 | worst | worst / median "
        "| full collections (ms each) |",
        "|---|---|---|---|---|---|---|",
    ]
    for mode, samples in rows.items():
        for s in samples:
            gcs = ", ".join(f"{ms:.1f} at {at:,}" for at, ms in s["full"]) or "none"
            held = f"{s['tracked']:,}" + (f" ({s['frozen']:,} frozen)" if s["frozen"] else "")
            lines.append(f"| {mode} | {held} | {s['median_ms']:.3f} ms | "
                         f"{s['p99_ms']:.2f} ms | {s['worst_ms']:.2f} ms at {s['worst_at']:,} | "
                         f"{s['worst_ms'] / s['median_ms']:.1f}x | {gcs} |")
    ratio = {m: statistics.median(s["worst_ms"] / s["median_ms"] for s in v)
             for m, v in rows.items()}
    lines += ["", "Median of the worst / median ratios: "
              + "; ".join(f"{m} {r:.1f}x" for m, r in ratio.items())
              + " (DESIGN.md's target for a small run beside a reader: at most 5x)."]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", type=int, default=2000, help="supersteps of each small run")
    ap.add_argument("--runs", type=int, default=3, help="samples of each kind of process")
    ap.add_argument("--write", action="store_true", help="write the section of RESULTS.md")
    ap.add_argument("--child", nargs=3, metavar=("MODE", "FOLDER", "SMALL"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        mode, folder, small = args.child
        print(json.dumps(child(mode, folder, int(small))))
        return
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    started = time.perf_counter()
    rows: dict[str, list[dict[str, Any]]] = {"plain": [], "frozen": []}
    with tempfile.TemporaryDirectory(prefix="df-gcstall-") as folder:
        for _ in range(args.runs):
            for mode in rows:
                s = sample(mode, folder, args.small)
                rows[mode].append(s)
                print(f"{mode}: median {s['median_ms']:.3f} ms, worst {s['worst_ms']:.2f} ms at "
                      f"{s['worst_at']}, full collections {s['full']}", flush=True)
    text = render(rows, args.small, (load, " ".join(f"{x:.2f}" for x in os.getloadavg())),
                  time.perf_counter() - started)
    print(text)
    if args.write:
        from sections import replace_section

        replace_section(HERE / "RESULTS.md", "gc-stall", text)


if __name__ == "__main__":
    main()
