"""Loads of a long run's head: ``python bench/loads.py [--sizes 1000,5000,20000] [--reps 5]``.

Figures (ms, median of ``reps`` samples, each on a new ``SqliteStore``
object; wall and CPU time, CPU being the steadier on a shared machine): the
engine's loader (``ThreadRunner.load``, what ``resume`` runs
after its checks) and ``get_state`` of the head of a waiting run of N
supersteps (the chain of ``longrun_work.py``: one ~200-byte message per
superstep), a real ``resume`` with the answer (one sample), the ratio of the
largest N to the smallest, and the worst and median superstep of a small run
(500 supersteps) alone and while a task on the same loop reads the largest
run over and over (``get_state`` of its head, then the engine's loader), and
the longest the event loop is held at once by one read (a ticker task's
longest gap between turns).
Every function returns a dict of figures, so another script can call them
(``measure_loads``, ``measure_stall``, ``main``); the output is one JSON
document. ``--write`` puts a section in ``bench/RESULTS.md`` (``--before
JSON``: the figures of the code before a change, printed beside).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from longrun_work import TIMES, load_head, superstep_stats, workflow

from durable_flow import RunStatus, Runtime, SqliteStore


async def build_run(folder: Path, n: int) -> tuple[Path, str]:
    """A waiting run of ``n`` supersteps in its own SQLite file; its path and run id."""
    path = folder / f"loads{n}.db"
    async with Runtime(SqliteStore(str(path), synchronous="normal")) as rt:
        result = await rt.run(workflow(n), {}, run_id=f"long{n}", max_supersteps=n + 10)
        assert result.status is RunStatus.WAITING, (result.status, result.error)
    return path, result.run_id


async def _sample(path: Path, fn: Any, reps: int) -> tuple[float, float]:
    """Median wall and CPU ms of ``fn(rt)``, each sample on a new store object."""
    wall, cpu = [], []
    for _ in range(reps):
        async with Runtime(SqliteStore(str(path))) as rt:
            t0, c0 = time.perf_counter(), time.process_time()
            await fn(rt)
            wall.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
    return statistics.median(wall) * 1e3, statistics.median(cpu) * 1e3


async def measure_loads(path: Path, run_id: str, n: int, reps: int = 5) -> dict[str, float]:
    """``loader_ms``, ``get_state_ms`` and ``resume_ms`` of the head of one run."""
    wf = workflow(n)
    async with Runtime(SqliteStore(str(path))) as rt:
        head = (await rt.get_run(run_id)).head_checkpoint_id
    out: dict[str, float] = {}
    out["loader_ms"], out["loader_cpu_ms"] = await _sample(
        path, lambda rt: load_head(rt.store, wf, run_id, head), reps)
    out["get_state_ms"], out["get_state_cpu_ms"] = await _sample(
        path, lambda rt: rt.get_state(run_id), reps)
    async with Runtime(SqliteStore(str(path))) as rt:
        (req,) = [p.id for p in await rt.pending_requests() if p.run_id == run_id]
        t0 = time.perf_counter()
        result = await rt.resume(wf, run_id, responses={req: True})
        out["resume_ms"] = (time.perf_counter() - t0) * 1e3
        assert result.status is RunStatus.COMPLETED, (result.status, result.error)
    return out


async def measure_stall(path: Path, run_id: str, n: int, small: int = 500,
                        reader: str = "get_state") -> dict[str, Any]:
    """A small run's supersteps alone, then beside a task reading ``run_id`` in a loop.

    ``reader``: ``get_state`` (of the head) or ``loader`` (the engine's loader).
    """
    wf = workflow(n)
    async with Runtime(SqliteStore(str(path))) as rt:
        head = (await rt.get_run(run_id)).head_checkpoint_id

        async def run_small() -> dict[str, Any]:
            TIMES.clear()
            r = await rt.run(workflow(small, waiting=False), {}, max_supersteps=small + 10)
            assert r.status is RunStatus.COMPLETED, (r.status, r.error)
            return superstep_stats(list(TIMES), small)

        alone = await run_small()
        loads = [0]
        stop = asyncio.Event()

        async def read_loop() -> None:  # not ``reader``: that names the kind of read
            while not stop.is_set():
                if reader == "loader":
                    await load_head(rt.store, wf, run_id, head)
                else:
                    await rt.get_state(run_id)
                loads[0] += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(read_loop())
        await asyncio.sleep(0)
        beside = await run_small()
        stop.set()
        await task
    return {"alone_median_ms": alone["median_ms"], "alone_worst_ms": alone["worst_ms"],
            "beside_median_ms": beside["median_ms"], "beside_worst_ms": beside["worst_ms"],
            "worst_over_alone_median": beside["worst_ms"] / alone["median_ms"],
            "loads_meanwhile": loads[0]}


async def _ticker(done: asyncio.Event, longest: list[float]) -> None:
    """Yield in a loop until ``done``; ``longest[0]``: the longest gap between two turns."""
    last = time.perf_counter()
    while not done.is_set():
        await asyncio.sleep(0)
        now = time.perf_counter()
        longest[0] = max(longest[0], now - last)
        last = now


async def measure_hold(path: Path, run_id: str, n: int, reps: int = 5) -> dict[str, float]:
    """The longest the event loop is held at once while one read of ``run_id`` runs, ms.

    A ticker task yields in a loop and records the longest gap between two of
    its turns while the read runs (median over ``reps`` reads, each on a new
    store object): what the read holds up every other task of the process.
    """
    wf = workflow(n)
    out: dict[str, float] = {}
    for name in ("get_state", "loader"):
        holds = []
        for _ in range(reps):
            async with Runtime(SqliteStore(str(path))) as rt:
                head = (await rt.get_run(run_id)).head_checkpoint_id
                done = asyncio.Event()
                longest = [0.0]
                task = asyncio.create_task(_ticker(done, longest))
                await asyncio.sleep(0)
                if name == "loader":
                    await load_head(rt.store, wf, run_id, head)
                else:
                    await rt.get_state(run_id)
                done.set()
                await task
                holds.append(longest[0])
        out[f"{name}_longest_hold_ms"] = statistics.median(holds) * 1e3
    return out


async def main(sizes: list[int], reps: int = 5, folder: Path | None = None) -> dict[str, Any]:
    """Every figure, as one dict."""
    with tempfile.TemporaryDirectory() as tmp:
        where = folder or Path(tmp)
        out: dict[str, Any] = {"sizes": sizes, "loads": {}}
        runs = {}
        for n in sizes:
            runs[n] = await build_run(where, n)
            out["loads"][n] = await measure_loads(*runs[n], n, reps)
            out["loads"][n] |= await measure_hold(*runs[n], n, reps)
            print(f"N={n}: {out['loads'][n]}", file=sys.stderr)
        lo, hi = min(sizes), max(sizes)
        out["ratio"] = {k: out["loads"][hi][k] / out["loads"][lo][k] for k in out["loads"][lo]}
        for reader in ("get_state", "loader"):  # the head, resumed: as long
            out[f"stall_{reader}"] = await measure_stall(*runs[hi], hi, reader=reader)
        return out


def render(after: dict[str, Any], before: dict[str, Any] | None = None,
           notes: str = "") -> str:
    """The ``loads-engine`` section of ``bench/RESULTS.md``: figures, and the "before" beside."""
    from sections import markers

    start, end = markers("loads-engine")
    cols = [("loader_cpu_ms", "engine loader, CPU ms"), ("get_state_cpu_ms", "get_state, CPU ms"),
            ("loader_ms", "engine loader, wall ms"), ("get_state_ms", "get_state, wall ms"),
            ("resume_ms", "resume, wall ms (1 sample)"),
            ("get_state_longest_hold_ms", "get_state, longest hold of the event loop, ms"),
            ("loader_longest_hold_ms", "engine loader, longest hold of the event loop, ms")]
    lines = [start, "## Loads of a long run's head (`bench/loads.py`)", "",
             "SQLite, the chain of `longrun_work.py` ending waiting at N supersteps; median of "
             "the samples, each on a new store object. Before: the same script on the code "
             "before the change (`PYTHONPATH`).", "",
             "| figure | " + " | ".join(f"N = {n:,}" for n in after["sizes"])
             + f" | {max(after['sizes']):,} / {min(after['sizes']):,} |",
             "|---" * (len(after["sizes"]) + 2) + "|"]
    for key, label in cols:
        for name, res in (("before", before), ("after", after)):
            if res is None:
                continue
            if key not in res["ratio"]:
                continue
            row = [f"{res['loads'][str(n)][key]:.2f}" for n in after["sizes"]]
            lines.append(f"| {label}, {name} | " + " | ".join(row)
                         + f" | {res['ratio'][key]:.2f}x |")
    lines += ["", "A small run (500 supersteps) on the same event loop as a task reading the "
              "largest run over and over, ms:", "",
              "| reader | alone median | alone worst | beside median | beside worst | "
              "worst / alone median | reads meanwhile |", "|---|---|---|---|---|---|---|"]
    for name, res in (("before", before), ("after", after)):
        for reader in ("get_state", "loader"):
            if res is None or f"stall_{reader}" not in res:
                continue
            st = res[f"stall_{reader}"]
            lines.append(f"| {reader}, {name} | {st['alone_median_ms']:.2f} | "
                         f"{st['alone_worst_ms']:.2f} | {st['beside_median_ms']:.2f} | "
                         f"{st['beside_worst_ms']:.2f} | {st['worst_over_alone_median']:.1f}x | "
                         f"{st['loads_meanwhile']} |")
    if notes:
        lines += ["", notes]
    lines.append(end)
    return "\n".join(lines)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1000,5000,20000")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--before", help="the JSON this script printed on the code before a change")
    p.add_argument("--write", action="store_true", help="write the section of bench/RESULTS.md")
    a = p.parse_args()
    figures = json.loads(json.dumps(
        asyncio.run(main([int(x) for x in a.sizes.split(",")], a.reps))))  # keys as JSON has them
    print(json.dumps(figures, indent=1))
    if a.write:
        from sections import replace_section

        before = json.loads(Path(a.before).read_text()) if a.before else None
        replace_section(Path(__file__).parent / "RESULTS.md", "loads-engine",
                        render(figures, before))
