"""The machine a benchmark ran on, for the reports' first lines."""

from __future__ import annotations

from pathlib import Path


def cpu_and_memory() -> tuple[str, str]:
    """The CPU model and the total memory, as /proc tells them ("?" where it does not)."""
    mem = "?"
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal"):
            mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "?")
    return cpu, mem
