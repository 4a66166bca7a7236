"""Import cost of durable-flow and the wall time of a short CLI command.

    python bench/imports.py [--repeat N] [--top N] [--write]

* ``import durable_flow`` and the usual ``from durable_flow import ...`` of an
  application: measured with ``python -X importtime`` (the cumulative time of
  the imported module, so interpreter start-up is left out), minimum of N
  fresh processes;
* ``durable-flow runs`` on a SQLite database holding a few runs (completed and
  waiting, already at the current schema, so the table is printed): wall time
  of N fresh processes, hyperfine-style (one warm-up run, then min / median /
  max), through the console script and through ``python -m durable_flow``.
  The statement cache (``store/sql/_cache.py``) is a temporary directory,
  filled by the warm-up run; the same command with no cache
  (``DURABLE_FLOW_CACHE_DIR=``, compiling with SQLAlchemy) is shown too, and
  ``python -c pass`` as the interpreter's own start-up (the baseline).

Every process runs with bytecode, as an installed package has it: the script
sets ``PYTHONPYCACHEPREFIX`` to a temporary directory and clears
``PYTHONDONTWRITEBYTECODE`` for its children, so the warm-up compiles once.

Targets: ``import durable_flow`` under 150 ms, ``durable-flow runs`` under
400 ms (the median of the console script). The machine is shared: the minimum
is the cost, the median what a user sees. ``--top`` lists the most expensive
imports of each case; ``--write`` replaces the start-up section of
``bench/RESULTS.md`` (between the ``startup`` markers).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from machine import cpu_and_memory
from sections import markers, replace_section

PY = sys.executable
SCRIPT = str(Path(PY).with_name("durable-flow"))
RESULTS = Path(__file__).with_name("RESULTS.md")
START, END = markers("startup")
IMPORT_TARGET_MS, RUNS_TARGET_MS = 150.0, 400.0
IMPORTS = {
    "import durable_flow": "import durable_flow",
    "from durable_flow import Runtime, WorkflowBuilder, Blackboard, SqliteStore":
        "from durable_flow import Runtime, WorkflowBuilder, Blackboard, SqliteStore",
    "import durable_flow.cli": "import durable_flow.cli",
}
_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")

# Fills the database: three completed runs and two waiting on a request.
FILL = """
import asyncio, sys
from durable_flow import END, Blackboard, Runtime, SqliteStore, WorkflowBuilder

class Draft(Blackboard):
    topic: str = ""
    approved: bool = False

b = WorkflowBuilder("publish", state=Draft)

@b.node()
async def approve(state: Draft, ctx) -> dict:
    if state.topic.startswith("ask"):
        return {"approved": await ctx.request({"question": "publish?"}, response_type=bool)}
    return {"approved": True}

b.set_entry("approve")
b.add_edge("approve", END)
workflow = b.build()

async def main() -> None:
    async with Runtime(SqliteStore(sys.argv[1])) as rt:
        for i, topic in enumerate(["tides", "ask-moon", "winds", "ask-sun", "rain"]):
            await rt.run(workflow, {"topic": topic}, run_id=f"run-{i}")

asyncio.run(main())
"""


def child_env(cache_root: str, **extra: str) -> dict[str, str]:
    """The environment of a measured process: bytecode in ``cache_root``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(Path(cache_root) / "pyc")
    env.update(extra)
    return env


def import_times(code: str, env: dict[str, str]) -> dict[str, int]:
    """Cumulative microseconds of each module imported by ``code`` in a fresh process."""
    err = subprocess.run([PY, "-X", "importtime", "-c", code], capture_output=True, text=True,
                         check=True, env=env).stderr
    out: dict[str, int] = {}
    for line in err.splitlines():
        m = _LINE.match(line)
        if m:
            out[("  " * (len(m[3]) // 2)) + m[4]] = int(m[2])
    return out


def top_level_ms(times: dict[str, int], code: str) -> float:
    """The time of what ``code`` imports itself (its top-level modules), in ms."""
    roots = {name.split(".")[0] for name in re.findall(r"(?:import|from)\s+([\w.]+)", code)}
    return sum(us for name, us in times.items()
               if not name.startswith(" ") and name.split(".")[0] in roots) / 1000


def wall(cmd: list[str], repeat: int, env: dict[str, str]) -> list[float]:
    """Milliseconds of ``repeat`` fresh runs of ``cmd`` after one warm-up."""
    subprocess.run(cmd, capture_output=True, check=True, env=env)
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True, env=env)
        runs.append((time.perf_counter() - start) * 1000)
    return runs


BASELINE = "python -c pass (interpreter start-up, the baseline)"
CONSOLE = "durable-flow runs (console script)"


@dataclass
class Results:
    """Samples in ms of each case; the costliest imports (module, us) of each import case."""

    imports: dict[str, list[float]] = field(default_factory=dict)
    walls: dict[str, list[float]] = field(default_factory=dict)
    top: dict[str, list[tuple[str, int]]] = field(default_factory=dict)

    def cases(self) -> list[tuple[str, list[float]]]:
        return [*self.imports.items(), *self.walls.items()]


def measure(repeat: int, top: int) -> Results:
    """Every case: its samples (ms) and, for the imports, the costliest modules."""
    res = Results()
    with tempfile.TemporaryDirectory() as tmp:
        env = child_env(tmp)
        for label, code in IMPORTS.items():
            import_times(code, env)  # compiles the bytecode once
            samples = [import_times(code, env) for _ in range(repeat)]
            costs = [top_level_ms(s, code) for s in samples]
            res.imports[label] = costs
            best = samples[costs.index(min(costs))]
            res.top[label] = sorted(best.items(), key=lambda kv: -kv[1])[:top]
        db = str(Path(tmp) / "bench.db")
        subprocess.run([PY, "-c", FILL, db], capture_output=True, check=True, env=env)
        cached = child_env(tmp, DURABLE_FLOW_CACHE_DIR=str(Path(tmp) / "cache"))
        uncached = child_env(tmp, DURABLE_FLOW_CACHE_DIR="")
        res.walls[CONSOLE] = wall([SCRIPT, "--db", db, "runs"], repeat, cached)
        res.walls["python -m durable_flow runs"] = wall(
            [PY, "-m", "durable_flow", "--db", db, "runs"], repeat, cached)
        res.walls["durable-flow runs, no statement cache"] = wall(
            [SCRIPT, "--db", db, "runs"], repeat, uncached)
        res.walls[BASELINE] = wall([PY, "-c", "pass"], repeat, env)
    return res


def targets(res: Results) -> list[tuple[str, float, float]]:
    """(what, median ms, target ms) of each target."""
    return [("`import durable_flow`", statistics.median(res.imports["import durable_flow"]),
             IMPORT_TARGET_MS),
            ("`durable-flow runs` (console script, wall)", statistics.median(res.walls[CONSOLE]),
             RUNS_TARGET_MS)]


def render(res: Results, repeat: int) -> str:
    """The start-up section of RESULTS.md."""
    cpu, mem = cpu_and_memory()
    base = statistics.median(res.walls[BASELINE])
    lines = [START, "## Start-up: `import durable_flow` and `durable-flow runs`", "",
             f"`python bench/imports.py --write` on {datetime.now(UTC):%Y-%m-%d %H:%M}Z, "
             f"{cpu}, {os.cpu_count()} cores, {mem}, Python {platform.python_version()}, "
             f"load average {os.getloadavg()[0]:.2f}. {repeat} fresh processes per case after "
             "one warm-up, with bytecode. Imports: cumulative `-X importtime` of the imported "
             "module (interpreter start-up left out). Commands: wall time on a SQLite database "
             "of five runs (three completed, two waiting), the table printed.", "",
             "| target | median | target | |", "|---|---:|---:|---|"]
    for what, median, target in targets(res):
        lines.append(f"| {what} | {median:.1f} ms | < {target:.0f} ms | "
                     f"{'met' if median < target else 'MISSED'} |")
    lines += ["", "| case | min | median | max | median / `python -c pass` |",
              "|---|---:|---:|---:|---:|"]
    for label, ms in res.cases():
        ratio = f"{statistics.median(ms) / base:.1f}x" if label in res.walls else ""
        lines.append(f"| `{label}` | {min(ms):.1f} ms | {statistics.median(ms):.1f} ms | "
                     f"{max(ms):.1f} ms | {ratio} |")
    lines += ["", "What a listing costs beyond the interpreter is mostly third-party imports: "
              "typer (its option coercion imports pydantic), asyncio (aiosqlite) and rich's "
              "table; SQLAlchemy, alembic, structlog and the engine are not imported "
              "(tests/test_cli_startup.py pins that). The no-cache row has the statement cache "
              "turned off (`DURABLE_FLOW_CACHE_DIR=`): every command compiles its statements "
              "with SQLAlchemy. With the cache on, only the first process of an installed "
              "version that opens a store (a run, a listing) compiles them, and writes them.", END]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--top", type=int, default=0, help="show the N costliest imports")
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    args = parser.parse_args()
    if not Path(SCRIPT).exists():
        sys.exit(f"no console script at {SCRIPT}: install durable-flow in this environment")
    res = measure(args.repeat, args.top)
    for label, ms in res.cases():
        print(f"{label:75} min {min(ms):6.1f} ms  median {statistics.median(ms):6.1f} ms  "
              f"max {max(ms):6.1f} ms")
        for name, us in res.top.get(label, []):
            print(f"    {us / 1000:7.1f} ms  {name}")
    for what, median, target in targets(res):
        print(f"[{'met' if median < target else 'MISSED'}] {what.replace('`', '')}: "
              f"median {median:.1f} ms, target < {target:.0f} ms")
    print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    if args.write:
        replace_section(RESULTS, "startup", render(res, args.repeat))
        print(f"wrote the start-up section of {RESULTS}")


if __name__ == "__main__":
    main()
