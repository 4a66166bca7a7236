"""Long runs, up to 50,000 supersteps: ``make bench-long`` (or ``python bench/longrun.py``).

Measures, as ratios within one run (never against another run's absolute
times: the machine is shared and noisy):

1. ``superstep``: ms per superstep over the first and the last 1,000
   supersteps of a 50,000-superstep run, on ``MemoryStore`` and on
   ``SqliteStore(synchronous="normal")`` (and ``"full"`` last, if the time
   budget allows; it stops early rather than overrun);
2. ``loads``: at 1k, 5k, 20k and 50k supersteps, ``get_state`` (head) and
   the engine's loader on a fresh store, a real ``resume`` of the waiting
   run, ``history(limit=50)`` pages (first and middle), the rows a head
   load reads; on SQLite and (in process) on MemoryStore;
3. ``langgraph``: LangGraph's ``aget_state`` on runs of 1k and 5k;
4. ``stall``: a 2,000-superstep writer's latency alone, and while a reader
   thread (own loop, own ``Runtime``) or a reader task (same ``Runtime``)
   reads a 20,000-superstep run in the same SQLite file.

Every measurement runs in a fresh worker process (``longrun.py --worker
SPEC``, see ``longrun_work.py``) in a fresh temporary folder. Progress goes to
stderr, a summary to stdout, raw results to ``$TMPDIR/df-longrun-results.json``
and the section between the ``longrun`` markers of ``bench/RESULTS.md``
(appended when absent; the rest of the file is kept; see ``longrun_report.py``).

Options: ``--quick`` (sizes 200/500/1000/2000, a smoke test; writes to a
temporary folder unless ``--out DIR`` is given), ``--only
superstep,loads,langgraph,stall``, ``--reps N`` (samples per read, default
5), ``--full auto|yes|no`` (the ``synchronous="full"`` run), ``--budget MIN``
(default 11), ``--render JSON`` (write the section from a raw results file,
measuring nothing).

Another version of the package (the "before" of a change) is measured by
putting it first on ``PYTHONPATH``; the workers inherit it, and the section
names the folder it came from and any file of the package that changed while
the benchmark ran::

    D=/tmp/df-before; mkdir -p $D
    git archive <commit> durable_flow migrations | tar -x -C $D
    mv $D/migrations $D/durable_flow/_migrations
    PYTHONPATH=$D .venv/bin/python bench/longrun.py
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import longrun_report as report  # noqa: E402

SECTIONS = ("superstep", "loads", "langgraph", "stall")


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def worker(spec: dict[str, Any]) -> None:
    """Run one measurement in this (fresh) process and print its result as JSON.

    ``spec``: ``workload`` (a name in ``WORKLOADS`` of module ``module``,
    default ``longrun_work``) and its keyword ``args``.
    """
    code = 0
    try:
        fn = importlib.import_module(spec.get("module", "longrun_work")).WORKLOADS[spec["workload"]]
        print("RESULT " + json.dumps(asyncio.run(fn(**spec["args"]))), flush=True)
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        code = 1
    os._exit(code)  # store threads of a failed run must not keep the process alive


def spawn(workload: str, args: dict[str, Any], timeout: float = 1800,
          module: str = "longrun_work") -> Any:
    """Run ``workload`` of ``module`` in a fresh process (``longrun.py --worker``); its result."""
    spec = {"workload": workload, "module": module,
            "args": {k: str(v) if isinstance(v, Path) else v for k, v in args.items()}}
    proc = subprocess.run([sys.executable, str(HERE / "longrun.py"), "--worker",
                           json.dumps(spec)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError(f"worker {workload} failed (exit {proc.returncode}):\n"
                       f"{proc.stderr[-3000:]}")


class LongRun:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.only = set(args.only.split(","))
        unknown = self.only - set(SECTIONS)
        if unknown:
            raise SystemExit(f"--only: unknown section(s) {sorted(unknown)}; one of {SECTIONS}")
        self.sizes = [200, 500, 1000, 2000] if args.quick else [1000, 5000, 20_000, 50_000]
        self.big = self.sizes[-1]
        self.window = min(1000, self.big // 10)
        self.lg_sizes = self.sizes[:2]
        self.stall_source = self.sizes[2]
        self.stall_n = 300 if args.quick else 2000
        self.stall_cap = 10.0 if args.quick else 30.0
        self.tmp = Path(tempfile.mkdtemp(prefix="df-longrun-"))
        self.started = time.perf_counter()
        self.code = code_dir()
        self.code_before = fingerprint(self.code)
        self.stall_src: tuple[Path, str] | None = None
        self.results: dict[str, Any] = {
            "args": dict(vars(args)), "sizes": self.sizes, "window": self.window,
            "lg_sizes": self.lg_sizes, "stall_source": self.stall_source,
            "stall_n": self.stall_n, "stall_cap": self.stall_cap, "superstep": {}, "loads": {}, "memory": {},
            "builds": {"memory": {}, "normal": {}}, "langgraph": {}, "stall": {},
            "errors": {}, "phases": {}}

    # helpers -----------------------------------------------------------------
    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def folder(self) -> Path:
        return Path(tempfile.mkdtemp(dir=self.tmp))

    def spawn(self, workload: str, args: dict[str, Any], timeout: float = 1800) -> Any:
        return spawn(workload, args, timeout)

    def guarded(self, name: str, fn: Callable[[], None]) -> None:
        """One broken measurement must not lose the others."""
        try:
            fn()
        except Exception as exc:
            log(f"{name} FAILED: {str(exc)[-1500:]}")
            self.results["errors"][name] = str(exc)[-3000:]

    # phases ------------------------------------------------------------------
    def memory_phase(self) -> None:
        loads = "loads" in self.only
        for n in self.sizes if loads else [self.big]:
            def one(n: int = n) -> None:
                folder = self.folder()
                t0 = time.perf_counter()
                b = self.spawn("build", {"folder": folder, "n": n, "store": "memory",
                                         "window": self.window,
                                         "reps": self.args.reps if loads else 0})
                shutil.rmtree(folder, ignore_errors=True)
                reads = b.pop("reads", None)
                self.results["builds"]["memory"][str(n)] = b
                if reads:
                    self.results["memory"][str(n)] = reads
                if n == self.big and "superstep" in self.only:
                    self.results["superstep"]["memory"] = b
                log(f"memory N={n:,}: {_brief(b)}{_reads_brief(reads)} "
                    f"({time.perf_counter() - t0:.1f}s)")
            self.guarded(f"memory {n}", one)

    def sqlite_phase(self) -> None:
        sizes: set[int] = set()
        read_sizes: set[int] = set()
        if "loads" in self.only:
            sizes |= set(self.sizes)
            read_sizes |= set(self.sizes)
        if "langgraph" in self.only:
            sizes |= set(self.lg_sizes)
            read_sizes |= set(self.lg_sizes)
        if "superstep" in self.only:
            sizes.add(self.big)
        for n in sorted(sizes):
            self.guarded(f"sqlite {n}", lambda n=n: self._sqlite_one(n, n in read_sizes))

    def _sqlite_one(self, n: int, reads: bool) -> None:
        folder = self.folder()
        keep = False
        try:
            t0 = time.perf_counter()
            b = self.spawn("build", {"folder": folder, "n": n, "store": "normal",
                                     "window": self.window})
            self.results["builds"]["normal"][str(n)] = b
            if n == self.big and "superstep" in self.only:
                self.results["superstep"]["normal"] = b
            log(f"sqlite normal N={n:,}: built, {_brief(b)} ({time.perf_counter() - t0:.1f}s)")
            if reads:
                t0 = time.perf_counter()
                r = self.spawn("loads", {"folder": folder, "n": n, "run_id": b["run_id"],
                                         "reps": self.args.reps})
                self.results["loads"][str(n)] = r
                log(f"sqlite normal N={n:,}: reads{_reads_brief(r)}, rows returned to "
                    f"get_state {r.get('rows_returned', {}).get('get_state')} "
                    f"({time.perf_counter() - t0:.1f}s)")
            if n == self.stall_source and "stall" in self.only:
                self.stall_src, keep = (folder, b["run_id"]), True
        finally:
            if not keep:
                shutil.rmtree(folder, ignore_errors=True)

    def langgraph_phase(self) -> None:
        if importlib.util.find_spec("langgraph") is None:
            self.results["errors"]["langgraph"] = (
                "langgraph is not installed: .venv/bin/python -m pip install -r "
                "bench/requirements.txt")
            log(self.results["errors"]["langgraph"])
            return
        for n in self.lg_sizes:
            def one(n: int = n) -> None:
                folder = self.folder()
                try:
                    t0 = time.perf_counter()
                    b = self.spawn("lg_build", {"folder": folder, "n": n})
                    log(f"LangGraph N={n:,}: built in {b['seconds']:.1f}s, "
                        f"{b['db_bytes'] / 1e6:.0f} MB")
                    r = self.spawn("lg_reads", {"folder": folder, "n": n, "reps": self.args.reps})
                    self.results["langgraph"][str(n)] = {**r, "build": b}
                    log(f"LangGraph N={n:,}: reads{_reads_brief(r)} "
                        f"({time.perf_counter() - t0:.1f}s)")
                finally:
                    shutil.rmtree(folder, ignore_errors=True)
            self.guarded(f"langgraph {n}", one)

    def stall_phase(self) -> None:
        if self.stall_src is None:
            folder = self.folder()
            b = self.spawn("build", {"folder": folder, "n": self.stall_source, "store": "normal",
                                     "window": self.window})
            log(f"stall: built the {self.stall_source:,}-superstep run to read "
                f"({b['seconds']:.1f}s)")
            self.stall_src = (folder, b["run_id"])
        src, run_id = self.stall_src
        conn = sqlite3.connect(src / "longrun.db")  # fold the WAL in: one file to copy
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        finally:
            conn.close()
        try:
            for mode in ("alone", "thread", "task", "alone"):
                def one(mode: str = mode) -> None:
                    folder = self.folder()
                    try:
                        shutil.copy(src / "longrun.db", folder / "longrun.db")
                        r = self.spawn("stall", {"folder": folder, "run_id": run_id,
                                                 "mode": mode, "n": self.stall_n,
                                                 "window": min(100, self.stall_n // 10),
                                                 "cap_s": self.stall_cap})
                        self.results["stall"].setdefault(mode, []).append(r)
                        s = r["steps"]
                        log(f"stall {mode}: {s['supersteps']:,} supersteps in "
                            f"{r['seconds']:.1f}s, median {s['median_ms']:.3f} ms, p99 "
                            f"{s['p99_ms']:.2f}, worst {s['worst_ms']:.1f} ms; reads "
                            f"{ {k: v['count'] for k, v in r['reads'].items()} }")
                    finally:
                        shutil.rmtree(folder, ignore_errors=True)
                self.guarded(f"stall {mode}", one)
        finally:
            shutil.rmtree(src, ignore_errors=True)

    def full_phase(self) -> None:
        if self.args.full == "no":
            self.results["superstep"]["full"] = {"skipped": "not run (`--full no`)"}
            return
        folder = self.folder()
        try:
            fl = self.spawn("floor", {"folder": folder})
            normal = self.results["builds"]["normal"].get(str(self.big))
            estimate = (normal["seconds"] if normal else self.big * 1e-3) + \
                self.big * fl["median_s"]
            remaining = self.args.budget * 60 - self.elapsed() - 25  # the report, the process
            log(f"full: a raw FULL transaction now takes {fl['median_s'] * 1e3:.2f} ms; "
                f"estimated {estimate:.0f}s for {self.big:,} supersteps, {remaining:.0f}s left")
            if self.args.full == "auto" and remaining < 60 and not self.args.quick:
                self.results["superstep"]["full"] = {
                    "skipped": f"not run: {remaining:.0f} s left of the {self.args.budget:g}-minute "
                               f"budget (estimated {estimate:.0f} s); `--full yes` forces it"}
                log("full: skipped (time budget)")
                return
            budget = None if self.args.full == "yes" or self.args.quick else remaining
            t0 = time.perf_counter()
            b = self.spawn("build", {"folder": folder, "n": self.big, "store": "full",
                                     "window": self.window, "budget_s": budget})
            b.update(estimate_s=estimate, floor_full_ms=fl["median_s"] * 1e3)
            self.results["superstep"]["full"] = b
            log(f"sqlite full N={b['reached']:,}: {_brief(b)} ({time.perf_counter() - t0:.1f}s)")
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def phase(self, name: str, text: str) -> None:
        log(f"phase: {text}")
        self.results["phases"][name] = datetime.now(UTC).strftime("%H:%M:%S")

    def run(self) -> None:
        log(f"long runs: sizes {self.sizes}, {self.args.reps} samples per read, sections "
            f"{','.join(s for s in SECTIONS if s in self.only)}; durable_flow from {self.code}; "
            f"temporary folder {self.tmp}")
        try:
            if self.only & {"superstep", "loads"}:
                self.phase("memory", "MemoryStore runs")
                self.memory_phase()
            if self.only & {"superstep", "loads", "langgraph"}:
                self.phase("sqlite", "SQLite runs (synchronous=normal) and their reads")
                self.sqlite_phase()
            if "langgraph" in self.only:
                self.phase("langgraph", "LangGraph")
                self.langgraph_phase()
            if "stall" in self.only:
                self.phase("stall", "reads beside commits")
                self.guarded("stall", self.stall_phase)
            if "superstep" in self.only:
                self.phase("full", 'SQLite synchronous="full" (if the time budget allows)')
                self.guarded("full", self.full_phase)
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.results["phases"]["end"] = datetime.now(UTC).strftime("%H:%M:%S")
            self.results["code"] = {"dir": str(self.code),
                                    "changed": changed(self.code_before, fingerprint(self.code))}
            if self.results["code"]["changed"]:
                log(f"WARNING: {len(self.results['code']['changed'])} file(s) of durable_flow "
                    "changed while this ran: the figures mix code versions")


def code_dir() -> Path:
    """The ``durable_flow`` package the workers import (found, not imported)."""
    spec = importlib.util.find_spec("durable_flow")
    if spec is None or spec.origin is None:
        raise SystemExit("durable_flow is not importable: run with .venv/bin/python")
    return Path(spec.origin).parent


def fingerprint(pkg: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(pkg)): (p.stat().st_mtime_ns, p.stat().st_size)
            for p in sorted(pkg.rglob("*.py"))}


def changed(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]
            ) -> list[str]:
    """Files added, removed or modified meanwhile, with the time they changed (UTC)."""
    out = []
    for name in sorted(before.keys() | after.keys()):
        if before.get(name) != after.get(name):
            when = (datetime.fromtimestamp(after[name][0] / 1e9, UTC).strftime("%H:%M:%S")
                    if name in after else "removed")
            out.append(f"{name} ({when})")
    return out


def _brief(b: dict[str, Any]) -> str:
    s = b.get("steps", {})
    if not s.get("supersteps"):
        return "no supersteps"
    return (f"{s['first_ms']:.3f} -> {s['last_ms']:.3f} ms/superstep "
            f"({s['last_ms'] / s['first_ms']:.2f}x), worst {s['worst_ms']:.1f} ms, "
            f"run {b['seconds']:.1f}s")


def _reads_brief(r: dict[str, Any] | None) -> str:
    if not r:
        return ""
    parts = [f"{k} {min(v) * 1e3:.1f}ms" for k, v in r.get("samples", {}).items()]
    errs = r.get("errors") or {}
    return ": " + ", ".join(parts) + (f"; ERRORS {errs}" if errs else "")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="sizes 200/500/1000/2000")
    parser.add_argument("--only", default=",".join(SECTIONS), help=",".join(SECTIONS))
    parser.add_argument("--reps", type=int, default=5, help="samples of each read")
    parser.add_argument("--full", choices=("auto", "yes", "no"), default="auto",
                        help='the synchronous="full" run: if the budget allows, always, never')
    parser.add_argument("--budget", type=float, default=11.0,
                        help="minutes the whole run may take (sizes the full run)")
    parser.add_argument("--out", default=None, help="folder of the RESULTS.md to write")
    parser.add_argument("--render", default=None, metavar="JSON",
                        help="measure nothing: write the section from a raw results file")
    return parser.parse_args()


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        worker(json.loads(sys.argv[2]))
        return
    args = parse_args()
    out_dir = Path(args.out) if args.out else (
        Path(tempfile.mkdtemp(prefix="df-longrun-out-")) if args.quick else HERE)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "RESULTS.md"
    if args.render:
        results = json.loads(Path(args.render).read_text())
    else:
        load0 = report.loadavg()
        bench = LongRun(args)
        bench.run()
        results = bench.results
        results.update(
            wall_s=bench.elapsed(), load=(load0, report.loadavg()),
            date=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            command=(f"PYTHONPATH={os.environ['PYTHONPATH']} " if os.environ.get("PYTHONPATH")
                     else "") + "python bench/longrun.py" + "".join(f" {a}" for a in sys.argv[1:]),
            machine=report.machine_lines(ROOT, bench.code))
        raw = Path(tempfile.gettempdir()) / "df-longrun-results.json"
        raw.write_text(json.dumps(results, indent=1))
        log(f"raw results: {raw}")
    report.write_section(path, report.render(results))
    print(report.summary(results))
    log(f"done in {results['wall_s'] / 60:.1f} min; see {path}")


if __name__ == "__main__":
    main()
