"""``assert_crash_safe`` over the showcase example, timed.

    python bench/crash_safe.py [--repeat N] [--write]

Runs ``durable_flow.testing.assert_crash_safe`` on ``examples/showcase.py``
(three parallel fetchers with durable steps, a three-second summary, a
sub-workflow that asks for approval, answered by the script) N times and
reports the number of durable points and the wall time of each run: every
point costs a child that dies by SIGKILL right after it and a child that
resumes the run to its end. Target: under a minute. ``--write`` replaces the
``crash-safe`` section of ``bench/RESULTS.md``. The machine is shared: the
load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "examples"), str(HERE)]

from machine import cpu_and_memory  # noqa: E402
from sections import replace_section  # noqa: E402

TARGET = 60.0


def measure(repeat: int) -> tuple[int, list[float]]:
    """The number of points and the wall time of each ``assert_crash_safe`` call."""
    with tempfile.TemporaryDirectory() as folder:
        os.environ["DEMO_DB"] = str(Path(folder) / "demo.db")  # the showcase's work log goes here
        import showcase

        from durable_flow.testing import assert_crash_safe

        points, times = 0, []
        for _ in range(repeat):
            start = time.perf_counter()
            points = assert_crash_safe(showcase.workflow, {"topic": "tides"},
                                       answers={"approve": True})
            times.append(time.perf_counter() - start)
    return points, times


def render(points: int, times: list[float]) -> str:
    cpu, mem = cpu_and_memory()
    load = os.getloadavg()[0]
    best, median = min(times), statistics.median(times)
    return "\n".join([
        "<!-- crash-safe:start -->",
        "## `assert_crash_safe` over the showcase",
        "",
        f"`python bench/crash_safe.py --write` on {datetime.now(UTC):%Y-%m-%d %H:%M}Z, {cpu}, "
        f"{os.cpu_count()} cores, {mem}, Python {platform.python_version()}, load average "
        f"{load:.2f}. `examples/showcase.py` (three parallel fetchers with durable steps, a "
        "three-second summary, an approval inside a sub-workflow, answered by the script), "
        f"{len(times)} calls.",
        "",
        "| durable points | min | median | max | target | |",
        "|---:|---:|---:|---:|---:|---|",
        f"| {points} | {best:.1f} s | {median:.1f} s | {max(times):.1f} s | < {TARGET:.0f} s "
        f"| {'met' if median < TARGET else 'missed'} |",
        "",
        "Each point costs two child processes (one killed by SIGKILL right after the point, one "
        "that resumes the run to its end), a few points at once (4 per core, at most 8). Most of the time "
        "is the workflow's own waiting: every point before the summary's commit runs its "
        "three-second sleep once more in one of its two children.",
        "<!-- crash-safe:end -->",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    args = parser.parse_args()
    points, times = measure(args.repeat)
    section = render(points, times)
    print(section)
    if args.write:
        replace_section(HERE / "RESULTS.md", "crash-safe", section)


if __name__ == "__main__":
    main()
