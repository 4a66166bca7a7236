"""The fleet section of ``bench/RESULTS.md``: tables, targets, profiles (see ``fleet.py``)."""

from __future__ import annotations

import math
import os
import platform
import statistics
from collections import Counter
from importlib import metadata
from pathlib import Path
from typing import Any

from machine import cpu_and_memory
from sections import markers, replace_section

FLEET_TARGET = 1.8  # 2 workers / 1 worker, I/O-bound
COMMIT_TARGET = 2.0  # store commit / raw asyncpg transaction, median
START, END = markers("fleet")
ANALYSIS_START, ANALYSIS_END = markers("fleet-analysis")
WORKLOAD = {"io": "I/O-bound (each node awaits 20 ms)", "cpu": "CPU-light (nodes return at once)"}
STORE = {"postgres": "PostgreSQL", "sqlite": "SQLite"}


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def machine_lines(pg_version: str) -> list[str]:
    cpu, mem = cpu_and_memory()

    def ver(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"

    import sqlite3

    return [
        f"- CPU: `nproc` = {len(os.sched_getaffinity(0))} ({cpu}); memory: {mem}",
        f"- OS: {platform.platform()}",
        f"- PostgreSQL {pg_version}, on the same machine (127.0.0.1, trust auth)",
        f"- Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}; "
        + ", ".join(f"{p} {ver(p)}" for p in ("durable-flow", "asyncpg", "SQLAlchemy",
                                              "structlog", "py-spy")),
    ]


# --------------------------------------------------------------------------- numbers
def _runs(fleet: list[dict[str, Any]], store: str, workload: str, workers: int
          ) -> list[dict[str, Any]]:
    return [r for r in fleet if (r["store"], r["workload"], r["workers"]) == (store, workload,
                                                                                 workers)]


def paired_ratios(fleet: list[dict[str, Any]], store: str, workload: str, workers: int
                  ) -> list[float]:
    """runs/s of ``workers`` over runs/s of one worker, within each repetition."""
    one = {r["rep"]: r["runs_per_s"] for r in _runs(fleet, store, workload, 1)}
    return [r["runs_per_s"] / one[r["rep"]] for r in _runs(fleet, store, workload, workers)
            if r["rep"] in one]


def ratio(fleet: list[dict[str, Any]], store: str, workload: str, workers: int) -> float | None:
    """The median of the paired ratios (None when not measured)."""
    xs = paired_ratios(fleet, store, workload, workers)
    return statistics.median(xs) if xs else None


def _med(rows: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in rows))


def _others(r: dict[str, Any]) -> float:
    """Cores busy with anything but the workers and their backends during the window."""
    return float(r["machine_busy_cores"] - (r["worker_cpu_s"] + r["pg_cpu_s"]) / r["window_s"])


def commit_brief(c: dict[str, Any]) -> str:
    return (f"store commit median {c['store']['median'] * 1e3:.3f} ms, raw "
            f"{c['raw']['median'] * 1e3:.3f} ms: {c['ratio_median']:.2f}x "
            f"(p95 {c['ratio_p95']:.2f}x); one round trip {c['floor']['median'] * 1e3:.3f} ms")


def verdicts(results: dict[str, Any]) -> list[str]:
    """One line per target: met or MISSED, with the figure."""
    out = []
    fleet = results.get("fleet", [])
    for store in results["args"]["stores"]:
        r = ratio(fleet, store, "io", 2)
        if r is not None:  # truncated, not rounded: 1.7997 must not print as 1.800
            out.append(f"[{'met' if r >= FLEET_TARGET else 'MISSED'}] {STORE[store]} I/O-bound: "
                       f"2 workers = {math.floor(r * 1000) / 1000:.3f}x one worker (median of "
                       f"the per-repetition ratios; target >= {FLEET_TARGET}x)")
    c = results.get("commit")
    if c:
        met = c["ratio_median"] <= COMMIT_TARGET
        out.append(f"[{'met' if met else 'MISSED'}] PostgreSQL superstep commit = "
                   f"{c['ratio_median']:.2f}x the raw asyncpg transaction (median; target <= "
                   f"{COMMIT_TARGET}x)")
    return out


# --------------------------------------------------------------------------- tables
def fleet_table(results: dict[str, Any]) -> list[str]:
    fleet, args = results["fleet"], results["args"]
    lines = ["| store | workload | workers | runs/s median (min-max) | vs 1 worker, per rep "
             "(median) | worker CPU ms/run | PostgreSQL CPU ms/run | machine busy, cores of "
             f"{os.cpu_count()} (of which not the bench's workers nor backends) | runs per worker "
             "(last rep) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for store in args["stores"]:
        for workload in args["workloads"]:
            for workers in args["workers"]:
                rows = _runs(fleet, store, workload, workers)
                if not rows:
                    continue
                rates = [r["runs_per_s"] for r in rows]
                pairs = paired_ratios(fleet, store, workload, workers)
                vs = "1" if workers == 1 else (
                    f"{', '.join(f'{x:.2f}' for x in pairs)} (**{statistics.median(pairs):.2f}**)")
                pg = "-" if store != "postgres" else \
                    f"{_med(rows, 'pg_cpu_s') / rows[0]['runs'] * 1e3:.1f}"
                share = "/".join(str(x) for x in rows[-1]["per_worker"])
                lines.append(
                    f"| {STORE[store]} | {workload} | {workers} | {statistics.median(rates):.1f} "
                    f"({min(rates):.1f}-{max(rates):.1f}) | {vs} | "
                    f"{_med(rows, 'worker_cpu_s') / rows[0]['runs'] * 1e3:.1f} | {pg} | "
                    f"{_med(rows, 'machine_busy_cores'):.2f} "
                    f"({statistics.median(_others(r) for r in rows):.2f}) | {share} |")
    return lines


def per_rep_table(results: dict[str, Any], workload: str) -> list[str]:
    fleet, args = results["fleet"], results["args"]
    counts = args["workers"]
    lines = ["| store | rep | " + " | ".join(f"{w} worker(s)" for w in counts) + " | "
             + " | ".join(f"{w} vs 1" for w in counts if w != 1) + " |",
             "|---|---|" + "---|" * (2 * len(counts) - (1 in counts))]
    for store in args["stores"]:
        for rep in range(args["reps"]):
            rows = {r["workers"]: r for r in fleet if (r["store"], r["workload"], r["rep"])
                    == (store, workload, rep)}
            cells = [f"{rows[w]['runs_per_s']:.1f} ({_others(rows[w]):.2f})" if w in rows
                     else "failed" for w in counts]
            ratios = [f"{rows[w]['runs_per_s'] / rows[1]['runs_per_s']:.2f}"
                      if w in rows and 1 in rows else "-" for w in counts if w != 1]
            lines.append(f"| {STORE[store]} | {rep + 1} | " + " | ".join(cells + ratios) + " |")
    return lines


def failed_lines(results: dict[str, Any]) -> list[str]:
    fleet, failed = results["fleet"], results.get("failed", [])
    claims = sum(r["claims"] for r in fleet)
    warned = Counter(w for r in fleet for w in r.get("warnings", []))
    said = ", ".join(f"{n} x `{w}`" for w, n in warned.most_common()) or "none"
    if any("warnings" not in r for r in fleet):  # raw results of an older fleet.py
        said = "not recorded in this run"
    lines = [f"Claims: {claims} for {sum(r['runs'] for r in fleet)} runs executed (a run "
             f"claimed twice would count twice); warnings logged by the workers: {said}.", ""]
    if failed:
        lines += [f"{len(failed)} measurement(s) failed and are left out:", "",
                  *[f"- rep {f['rep'] + 1} {STORE[f['store']]} {f['workload']} x{f['workers']}: "
                    f"{f['error'][:300]}" for f in failed], ""]
    return lines


def commit_section(results: dict[str, Any]) -> list[str]:
    if "commit" not in results:
        return []
    return ["### PostgreSQL superstep commit against a raw asyncpg transaction", "",
            f"{results['args']['commits']} of each, interleaved (store commit, raw transaction, "
            "one round trip, ...) after 200 of each to warm up, one process, the store's own "
            "pool. A superstep: the run's UPDATE (lease and head check, new head), one "
            "checkpoint row, two channel values, one log chunk.", "",
            *commit_table(results["commit"]), ""]


def commit_table(c: dict[str, Any]) -> list[str]:
    lines = ["| transaction | median ms | p95 ms | mean ms | min ms | client CPU ms (mean) "
             "| samples |", "|---|---|---|---|---|---|---|"]
    names = {"store": "`PostgresStore.commit` (superstep)",
             "raw": "raw asyncpg transaction, same rows, same pool",
             "floor": "one round trip (`SELECT 1`)"}
    for key, label in names.items():
        s = c[key]
        cpu = f"{s['cpu_mean'] * 1e3:.3f}" if "cpu_mean" in s else "-"
        lines.append(f"| {label} | {s['median'] * 1e3:.3f} | {s['p95'] * 1e3:.3f} | "
                     f"{s['mean'] * 1e3:.3f} | {s['min'] * 1e3:.3f} | {cpu} | {s['n']} |")
    lines.append(f"| **ratio store / raw** | **{c['ratio_median']:.2f}x** | "
                 f"**{c['ratio_p95']:.2f}x** | | | | |")
    return lines


# --------------------------------------------------------------------------- profiles
def py_spy_summary(path: Path, top: int = 15) -> dict[str, Any]:
    """Own and inclusive sample counts per function from py-spy's raw (collapsed) output."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    areas: Counter[str] = Counter()
    total = 0
    if not path.exists():
        return {"total": 0, "own": [], "inclusive": [], "areas": []}
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [_short(f) for f in stack.split(";")]
        total += n
        own[frames[-1]] += n
        areas[_area(frames[-1])] += n
        for f in set(frames):
            if "durable_flow/" in f or "asyncpg" in f or "structlog" in f:
                inclusive[f] += n
    return {"total": total, "own": own.most_common(top), "inclusive": inclusive.most_common(top),
            "areas": areas.most_common()}


AREAS = (("asyncio/", "event loop and sockets (asyncio, epoll, send/recv)"),
         ("selectors.py", "event loop and sockets (asyncio, epoll, send/recv)"),
         ("asyncpg", "asyncpg (protocol, statements)"), ("tenacity", "tenacity (retry wrapper)"),
         ("structlog", "structlog (log lines)"), ("durable_flow/", "durable-flow"),
         ("pydantic", "pydantic"), ("sqlalchemy", "SQLAlchemy"), ("orjson", "orjson"))


def _area(frame: str) -> str:
    """Which package the sampled (innermost Python) frame belongs to."""
    return next((label for marker, label in AREAS if marker in frame), "other")


def _short(frame: str) -> str:
    for marker in ("site-packages/", "/durable_flow/", "/lib/python3.11/"):
        if marker in frame:
            head, tail = frame.split(marker, 1)
            fn = head.split(" (", 1)[0]
            prefix = "durable_flow/" if marker == "/durable_flow/" else ""
            return f"{fn} ({prefix}{tail}"
    return frame


def profile_lines(results: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for p in results.get("profiles", []):
        prof = p["profile"]
        lines += [f"#### py-spy, worker 0 of 2, {STORE[p['store']]} I/O-bound "
                  f"({p['runs_per_s']:.1f} runs/s in this run; {prof['total']} samples at 250 Hz "
                  "of CPU-active time, idle excluded)", "",
                  "| own time: function | share |", "|---|---|"]
        lines += [f"| `{f}` | {n / max(1, prof['total']):.1%} |" for f, n in prof["own"]]
        lines += ["", "| own time by package | share |", "|---|---|"]
        lines += [f"| {a} | {n / max(1, prof['total']):.1%} |" for a, n in prof["areas"]]
        lines += ["", "| inclusive: durable-flow, asyncpg, structlog frames | share |",
                  "|---|---|"]
        lines += [f"| `{f}` | {n / max(1, prof['total']):.1%} |" for f, n in prof["inclusive"]]
        lines.append("")
    if results.get("commit_profile"):
        lines += ["#### cProfile of the store commits (top by own time)", "", "```",
                  results["commit_profile"].strip(), "```", ""]
    return lines


# --------------------------------------------------------------------------- section
def render(results: dict[str, Any], argv: str) -> str:
    args = results["args"]
    lines = [START, "## Worker fleet: runs per second with 1, 2 and 4 worker processes", "",
             "Written by `bench/fleet.py` (`make bench-fleet`); the analysis at the end is "
             "written by hand and kept when the section is regenerated.", "",
             f"Command: `{' '.join(['python bench/fleet.py', argv]).strip()}`",
             f"({results['wall_s'] / 60:.1f} min; load average before/after: "
             f"{results['load'][0]} / {results['load'][1]}).", "",
             "### Machine", "", *results["machine"], "",
             "### Method", "",
             f"- {args['runs']} runs of `bench/fleet_flows.py` (plan -> 3 parallel fetches "
             "-> merge: 3 supersteps, 5 nodes) are submitted with `Runtime.submit`, then "
             f"1, 2 or 4 `durable-flow worker` processes with `--concurrency "
             f"{args['concurrency']}` each execute them; workers start claiming together "
             "(a gate after start-up). runs/s = runs / (last `run_executed` - first "
             "`run_claimed`) from the workers' JSON logs.",
             "- PostgreSQL: a fresh database created for the benchmark (emptied before each "
             "measurement, dropped at the end). SQLite: a fresh file per measurement "
             "(WAL, `synchronous=full`, as `durable-flow worker` opens it).",
             f"- {args['reps']} repetitions; worker counts interleaved within each. "
             "'vs 1 worker' pairs each measurement with the 1-worker one of the same "
             "repetition. CPU columns: user+system time of the worker processes and of the "
             "PostgreSQL backends serving them between the gate and the last completion, "
             "per run; machine busy: all processes, other users included (`/proc/stat`).", "",
             "### Targets", "", *[f"- {v}" for v in verdicts(results)], "",
             "### Runs per second", "", *fleet_table(results), "", *failed_lines(results),
             "### I/O-bound, repetition by repetition", "",
             "runs/s, and in brackets the cores that processes other than the bench's workers "
             "and backends kept busy meanwhile:", "", *per_rep_table(results, "io"), "",
             *commit_section(results)]
    prof = profile_lines(results)
    if prof:
        lines += ["### Profiles of missed targets", "", *prof]
    return "\n".join(lines)


def write_section(path: Path, section: str) -> None:
    """Replace the fleet section of RESULTS.md (or append it), keeping its analysis."""
    text = path.read_text() if path.exists() else ""
    analysis = "\n_No analysis written yet._\n"
    if ANALYSIS_START in text and ANALYSIS_END in text:
        analysis = text.split(ANALYSIS_START, 1)[1].split(ANALYSIS_END, 1)[0]
    block = "\n".join([section, "### Analysis", "", ANALYSIS_START, analysis.strip("\n"),
                       ANALYSIS_END, END])
    replace_section(path, "fleet", block)
