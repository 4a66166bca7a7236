"""Import cost of durable-flow and the wall time of a short CLI command.

    python bench/imports.py [--repeat N]

* ``import durable_flow`` and the usual ``from durable_flow import ...`` of an
  application: measured with ``python -X importtime`` (the cumulative time of
  the imported module, so interpreter start-up is left out), minimum of N
  fresh processes;
* ``durable-flow runs`` on a small SQLite database (already at the current
  schema): wall time of N fresh processes, hyperfine-style (one warm-up run,
  then min / median / max). The statement cache (``store/sql/_cache.py``) is
  a temporary directory, filled by the warm-up run; the same command with no
  cache (``DURABLE_FLOW_CACHE_DIR=``, compiling with SQLAlchemy) is shown too.

Times include compiling durable-flow's modules when Python writes no bytecode
(``PYTHONDONTWRITEBYTECODE``, ``-B``): the script says so; an installed
package has its bytecode.

Targets: ``import durable_flow`` under 150 ms, ``durable-flow runs`` under
400 ms. The machine is shared: take the minimum as the cost, the median as
what a user sees. ``--top`` lists the most expensive imports of each case.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PY = sys.executable
CLI = [PY, "-m", "durable_flow"]
IMPORTS = {
    "import durable_flow": "import durable_flow",
    "from durable_flow import Runtime, WorkflowBuilder, Blackboard, SqliteStore":
        "from durable_flow import Runtime, WorkflowBuilder, Blackboard, SqliteStore",
    "import durable_flow.cli": "import durable_flow.cli",
}
_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def import_times(code: str) -> dict[str, int]:
    """Cumulative microseconds of each module imported by ``code`` in a fresh process."""
    err = subprocess.run([PY, "-X", "importtime", "-c", code], capture_output=True, text=True,
                         check=True).stderr
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


def wall(cmd: list[str], repeat: int, env: dict[str, str] | None = None) -> list[float]:
    """Seconds of ``repeat`` fresh runs of ``cmd`` after one warm-up."""
    subprocess.run(cmd, capture_output=True, check=True, env=env)
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True, env=env)
        runs.append(time.perf_counter() - start)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--top", type=int, default=0, help="show the N costliest imports")
    args = parser.parse_args()
    for label, code in IMPORTS.items():
        samples = [import_times(code) for _ in range(args.repeat)]
        costs = [top_level_ms(s, code) for s in samples]
        print(f"{label:75} min {min(costs):6.1f} ms  median {statistics.median(costs):6.1f} ms")
        if args.top:
            best = samples[costs.index(min(costs))]
            for name, us in sorted(best.items(), key=lambda kv: -kv[1])[:args.top]:
                print(f"    {us / 1000:7.1f} ms  {name}")
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "bench.db")
        subprocess.run([*CLI, "--db", db, "db", "upgrade"], capture_output=True, check=True)
        env_cmd = [*CLI, "--db", db, "runs"]
        for label, cache in [("", str(Path(tmp) / "cache")), (", no statement cache", "")]:
            runs = wall(env_cmd, args.repeat, {**os.environ, "DURABLE_FLOW_CACHE_DIR": cache})
            print(f"{'durable-flow runs (wall, python -m durable_flow' + label + ')':75} min "
                  f"{min(runs) * 1000:6.1f} ms  median {statistics.median(runs) * 1000:6.1f} ms  "
                  f"max {max(runs) * 1000:6.1f} ms")
        base = wall([PY, "-c", "pass"], args.repeat)
        print(f"{'python -c pass (interpreter start-up, for reference)':75} min "
              f"{min(base) * 1000:6.1f} ms")
    print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    if sys.flags.dont_write_bytecode:
        print("note: Python writes no bytecode here (PYTHONDONTWRITEBYTECODE or -B), so every "
              "process compiled durable-flow's modules from source; PYTHONPYCACHEPREFIX=DIR "
              "with PYTHONDONTWRITEBYTECODE unset measures what an installed package costs")


if __name__ == "__main__":
    main()
