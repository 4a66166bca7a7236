"""What ``ctx.step(..., in_doubt="ask")`` costs per step, against the default, on SQLite and PostgreSQL.

Usage::

    python bench/effects.py [--steps N] [--repeat R] [--pg DSN] [--write]

One node runs ``--steps`` steps in a row (each ``fn`` returns at once), so
the time per step is what recording it costs: the default writes the result
(one write per step); ``in_doubt="ask"`` first writes the start record and
waits for it, then the result (two writes, the first one waited for). Both
modes alternate ``--repeat`` times on a fresh SQLite file each
(``synchronous="full"``, the default) and, with ``--pg`` (or
``DURABLE_FLOW_TEST_PG_DSN``), on PostgreSQL; medians per step are compared.
``--write`` replaces the ``effects`` section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from machine import cpu_and_memory
from sections import markers, replace_section

from durable_flow import END, Blackboard, NodeContext, Runtime, SqliteStore, WorkflowBuilder
from durable_flow.model._ids import new_id

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
MODES = ("rerun", "ask")


class Work(Blackboard):
    done: int = 0


def workflow(mode: str, steps: int) -> Any:
    """One node running ``steps`` steps with ``in_doubt=mode``."""
    b = WorkflowBuilder(f"effects-{mode}", state=Work)

    @b.node()
    async def work(state: Work, ctx: NodeContext) -> dict[str, Any]:
        for i in range(steps):
            await ctx.step(f"s{i}", int, i, in_doubt=mode)  # type: ignore[arg-type]
        return {"done": steps}

    b.set_entry("work")
    b.add_edge("work", END)
    return b.build()


async def one(store: Any, mode: str, steps: int) -> float:
    """Seconds per step of one run."""
    async with Runtime(store) as rt:
        wf = workflow(mode, steps)
        start = time.perf_counter()
        r = await rt.run(wf, {}, run_id=f"bench-{mode}-{new_id()}")
        took = time.perf_counter() - start
        assert r.status.value == "completed", r.error
    return took / steps


async def measure(backend: str, dsn: str | None, steps: int,
                  repeat: int) -> dict[str, list[float]]:
    """Per-step times of both modes, alternating, ``repeat`` times each."""
    times: dict[str, list[float]] = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory() as folder:
        for n in range(repeat):
            for mode in MODES:
                if backend == "sqlite":
                    store: Any = SqliteStore(Path(folder) / f"{mode}-{n}.db")
                else:
                    from durable_flow import PostgresStore

                    store = PostgresStore(str(dsn))
                times[mode].append(await one(store, mode, steps))
    return times


def render(results: dict[str, dict[str, list[float]]], steps: int, repeat: int) -> str:
    """The ``effects`` section of RESULTS.md."""
    start, end = markers("effects")
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    cpu, mem = cpu_and_memory()
    lines = [start, "## effects: what `in_doubt=\"ask\"` costs per `ctx.step`", "",
             f"{cpu}, {mem}, 2 cores shared with other work; {when}. "
             f"One node runs {steps} steps in a row (each `fn` "
             f"returns at once); median of {repeat} runs per mode, the modes alternating. "
             "`rerun` (the default) writes each result; `ask` also writes the start record "
             "before `fn`, and waits for it (`python bench/effects.py --write`).", "",
             "| store | `in_doubt=\"rerun\"` per step | `in_doubt=\"ask\"` per step | ask / rerun |",
             "|---|---|---|---|"]
    for backend, times in results.items():
        rerun, ask = (statistics.median(times[m]) * 1000 for m in MODES)
        lines.append(f"| {backend} | {rerun:.2f} ms | {ask:.2f} ms | {ask / rerun:.2f}x |")
    lines += ["", "The start record is a write of its own that `fn` waits for, so `ask` costs "
              "about one more store write per step; the default writes nothing more than before."]
    return "\n".join([*lines, "", end])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--pg", default=os.environ.get("DURABLE_FLOW_TEST_PG_DSN"))
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    results = {"SQLite": asyncio.run(measure("sqlite", None, args.steps, args.repeat))}
    if args.pg:
        results["PostgreSQL"] = asyncio.run(measure("pg", args.pg, args.steps, args.repeat))
    section = render(results, args.steps, args.repeat)
    print(section)
    if args.write:
        replace_section(RESULTS, "effects", section)


if __name__ == "__main__":
    main()
