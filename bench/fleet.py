"""Worker fleet throughput and the PostgreSQL commit cost: ``make bench-fleet``.

For each store (a fresh PostgreSQL database created on the server of
``--pg-dsn`` and dropped at the end; a SQLite file) and each workload of
``fleet_flows`` (``io``: every node awaits 20 ms; ``cpu``: nodes return at
once), ``--runs`` runs are submitted (``Runtime.submit``), then 1, 2 and 4
``durable-flow worker`` processes are started on that store. Each process
waits at a gate (see ``fleet_flows``) until all of them are up, so they
start claiming together. Runs per second are counted from the first
``run_claimed`` to the last ``run_executed`` line of the workers' JSON logs.
Worker counts are interleaved within each repetition (1, 2, 4, 1, 2, 4...)
so that a change in the machine's load hits each of them alike. During each
measurement the CPU time of the worker processes, of the PostgreSQL backends
serving them, and of the whole machine is read from ``/proc``.

Then ``fleet_commit.measure`` times a superstep commit through
``PostgresStore.commit`` against a raw asyncpg transaction writing the same
rows, interleaved, on the same pool.

A missed target is profiled: one more measurement with ``py-spy`` attached
to a worker (fleet), or cProfile around the commits (commit cost).

Writes its section of ``bench/RESULTS.md`` (between the ``fleet`` markers;
the hand-written part between the ``fleet-analysis`` markers is kept) and the
raw results to ``$TMPDIR/df-bench-fleet.json``. Options: ``--runs N``
(200), ``--reps N`` (3), ``--workers 1,2,4``, ``--concurrency N`` (per
process, 4), ``--stores postgres,sqlite``, ``--workloads io,cpu``,
``--commits N`` (2000; 0 skips the commit measurement), ``--quick`` (small, writes nowhere unless ``--out``),
``--no-profile``, ``--pg-dsn DSN``, ``--out DIR``, ``--render JSON`` (write the
section again from a raw results file, measuring nothing).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import fleet_commit  # noqa: E402
import fleet_flows  # noqa: E402
import fleet_report  # noqa: E402

from durable_flow import PostgresStore, Runtime, SqliteStore  # noqa: E402
from durable_flow.store.sql._tables import METADATA  # noqa: E402

SERVER_DSN = os.environ.get("DURABLE_FLOW_BENCH_PG_DSN",
                            "postgresql://postgres@127.0.0.1:5432/postgres")
TICK = os.sysconf("SC_CLK_TCK")
SETTLED = ("completed", "failed", "cancelled", "waiting")


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


# --------------------------------------------------------------------------- stores
@contextmanager
def postgres_database(server: str) -> Iterator[str]:
    """A new database on ``server`` for this run; yields its DSN, drops it afterwards."""
    name = f"df_bench_fleet_{os.getpid()}"  # [a-z0-9_] only: safe to quote as an identifier
    asyncio.run(_admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)',
                       f'CREATE DATABASE "{name}"'))
    try:
        yield urlunsplit(urlsplit(server)._replace(path=f"/{name}"))
    finally:
        asyncio.run(_admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def _admin(dsn: str, *statements: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        for sql in statements:
            await conn.execute(sql)
    finally:
        await conn.close()


@dataclass
class Target:
    """Where one measurement's runs live: ``--db`` for the workers, and how to reset it."""

    kind: str  # "postgres" or "sqlite"
    db: str

    def store(self) -> PostgresStore | SqliteStore:
        if self.kind == "postgres":
            return PostgresStore(self.db)
        return SqliteStore(self.db, synchronous="full")  # as `durable-flow worker` opens it

    async def reset(self) -> None:
        if self.kind == "postgres":
            async with PostgresStore(self.db):  # migrates a new database once
                pass
            await _admin(self.db, f"TRUNCATE {', '.join(sorted(METADATA.tables))}")
        else:
            _remove_database_files(self.db)

    async def statuses(self) -> dict[str, int]:
        async with Runtime(self.store()) as rt:
            counts: dict[str, int] = {}
            for info in await rt.list_runs():
                counts[info.status.value] = counts.get(info.status.value, 0) + 1
            return counts


def _remove_database_files(path: str) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(path + suffix).unlink(missing_ok=True)


async def submit(target: Target, workload: str, runs: int) -> float:
    """Queue ``runs`` runs of the workload; returns the seconds it took."""
    workflow = getattr(fleet_flows, workload)
    started = time.perf_counter()
    async with Runtime(target.store()) as rt:
        for n in range(runs):
            await rt.submit(workflow, {"n": n}, run_id=f"{workload}-{n:05d}")
    return time.perf_counter() - started


# --------------------------------------------------------------------------- CPU accounting
def machine_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine since boot (``/proc/stat``)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def process_seconds(pid: int) -> float:
    """User + system CPU seconds of a live process (0 when it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


class Watcher:
    """One connection to the store for the driver: counts settled runs, lists backends."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.pg: Any = None
        self.lite: sqlite3.Connection | None = None

    async def __aenter__(self) -> Watcher:
        if self.target.kind == "postgres":
            self.pg = await asyncpg.connect(self.target.db)
        else:
            self.lite = sqlite3.connect(self.target.db, timeout=30)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.pg is not None:
            await self.pg.close()
        if self.lite is not None:
            self.lite.close()

    async def settled(self) -> int:
        """How many runs reached a settled status."""
        if self.pg is not None:
            return int(await self.pg.fetchval(
                "SELECT count(*) FROM runs WHERE status = ANY($1::text[])", list(SETTLED)))
        assert self.lite is not None
        marks = ",".join("?" * len(SETTLED))
        [(n,)] = self.lite.execute(f"SELECT count(*) FROM runs WHERE status IN ({marks})",
                                   SETTLED).fetchall()
        return int(n)

    async def backend_seconds(self) -> float:
        """CPU seconds of the PostgreSQL backends serving the workers (not this one)."""
        if self.pg is None:
            return 0.0
        rows = await self.pg.fetch("SELECT pid FROM pg_stat_activity WHERE datname = "
                                   "current_database() AND pid <> pg_backend_pid()")
        return sum(process_seconds(r[0]) for r in rows)


# --------------------------------------------------------------------------- one measurement
@dataclass
class Fleet:
    """Worker processes started at a gate; stopped with SIGTERM on exit."""

    target: Target
    workload: str
    count: int
    concurrency: int
    folder: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def gate(self) -> Path:
        return self.folder / "gate"

    def log_of(self, i: int) -> Path:
        return self.folder / f"worker{i}.log"

    def start(self) -> None:
        env = {**os.environ, "FLEET_GATE": str(self.gate),
               "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
        for i in range(self.count):
            with self.log_of(i).open("wb") as err:
                self.procs.append(subprocess.Popen(
                    [sys.executable, "-m", "durable_flow", "--db", self.target.db, "--log-json",
                     "worker", f"fleet_flows:{self.workload}",
                     "--concurrency", str(self.concurrency), "--poll-interval", "0.1",
                     "--grace-period", "5", "--name", f"w{i}"],
                    cwd=HERE, env=env, stdout=subprocess.DEVNULL, stderr=err))

    def wait_ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not all(Path(f"{self.gate}.{p.pid}").exists() for p in self.procs):
            if any(p.poll() is not None for p in self.procs):
                raise RuntimeError(f"a worker exited before the gate:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError("workers did not reach the gate in time")
            time.sleep(0.01)

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def tail(self) -> str:
        return "\n".join(self.log_of(i).read_text()[-2000:] for i in range(len(self.procs)))


async def measure(target: Target, workload: str, workers: int, args: argparse.Namespace,
                  *, profile: bool = False) -> dict[str, Any]:
    """Submit the runs, let ``workers`` processes execute them; returns the measurement."""
    await target.reset()
    submit_s = await submit(target, workload, args.runs)
    folder = Path(tempfile.mkdtemp(prefix="df-fleet-"))
    try:
        result = await _execute(Fleet(target, workload, workers, args.concurrency, folder),
                                args.runs, profile)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    result.update(store=target.kind, workload=workload, workers=workers,
                  concurrency=args.concurrency, submit_s=submit_s,
                  statuses=await target.statuses())
    return result


async def _execute(fleet: Fleet, runs: int, profile: bool) -> dict[str, Any]:
    """Start the workers, open the gate, wait for every run; CPU read around it."""
    spy: subprocess.Popen[bytes] | None = None
    try:
        fleet.start()
        fleet.wait_ready()
        if profile:
            spy = _attach_py_spy(fleet.procs[0].pid, fleet.folder / "profile.txt")
        cpu0 = [process_seconds(p.pid) for p in fleet.procs]
        busy0, total0 = machine_ticks()
        async with Watcher(fleet.target) as watcher:
            fleet.gate.touch()
            waited = await _wait_settled(watcher, runs, fleet)
            busy1, total1 = machine_ticks()
            cpu1 = [process_seconds(p.pid) for p in fleet.procs]
            pg_cpu = await watcher.backend_seconds()
    finally:
        fleet.stop()
    result = _from_logs(fleet, runs)
    result.update(
        window_s=waited, worker_cpu_s=sum(cpu1) - sum(cpu0), pg_cpu_s=pg_cpu,
        machine_busy_cores=(busy1 - busy0) / max(1, total1 - total0) * (os.cpu_count() or 1))
    if spy is not None:
        spy.wait(timeout=60)
        result["profile"] = fleet_report.py_spy_summary(fleet.folder / "profile.txt")
    return result


def _attach_py_spy(pid: int, out: Path) -> subprocess.Popen[bytes]:
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    return subprocess.Popen([py_spy, "record", "--pid", str(pid), "--format", "raw",
                             "--rate", "250", "--output", str(out), "--nonblocking"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def _wait_settled(watcher: Watcher, runs: int, fleet: Fleet,
                        timeout: float = 600) -> float:
    started = time.monotonic()
    while await watcher.settled() < runs:
        if any(p.poll() is not None for p in fleet.procs):
            raise RuntimeError(f"a worker died during the measurement:\n{fleet.tail()}")
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"runs not settled after {timeout:g}s")
        await asyncio.sleep(0.05)
    return time.monotonic() - started


def _from_logs(fleet: Fleet, runs: int) -> dict[str, Any]:
    """Runs per second from the first claim to the last completion, per the workers' logs."""
    claimed: list[float] = []
    done: list[float] = []
    warnings: list[str] = []  # a failed claim, a lost lease...
    per_worker = []
    for i in range(fleet.count):
        mine = 0
        for line in fleet.log_of(i).read_text().splitlines():
            if not line.startswith("{"):
                continue
            event = json.loads(line)
            stamp = datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp()
            if event["event"] == "run_claimed":
                claimed.append(stamp)
            elif event["event"] == "run_executed":
                done.append(stamp)
                mine += 1
            if event.get("level") in ("warning", "error", "critical"):
                warnings.append(event["event"])
        per_worker.append(mine)
    if len(done) != runs:
        raise RuntimeError(f"{len(done)} of {runs} runs executed:\n{fleet.tail()}")
    span = max(done) - min(claimed)
    return {"runs": runs, "span_s": span, "runs_per_s": runs / span,
            "claims": len(claimed), "per_worker": per_worker, "warnings": warnings}


# --------------------------------------------------------------------------- driver
def run_fleet(targets: dict[str, Target], args: argparse.Namespace,
              failed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every measurement; the ones that raised go to ``failed`` instead."""
    out = []
    for rep in range(args.reps):
        for kind in args.stores:
            for workload in args.workloads:
                for workers in args.workers:
                    try:
                        res = asyncio.run(measure(targets[kind], workload, workers, args))
                    except Exception as exc:  # e.g. the server restarted: keep the others
                        log(f"rep {rep + 1}/{args.reps} {kind} {workload} x{workers} FAILED: "
                            f"{type(exc).__name__}: {str(exc)[-500:]}")
                        failed.append({"store": kind, "workload": workload, "workers": workers,
                                       "rep": rep, "error": f"{type(exc).__name__}: {exc}"})
                        continue
                    res["rep"] = rep
                    out.append(res)
                    log(f"rep {rep + 1}/{args.reps} {kind} {workload} x{workers}: "
                        f"{res['runs_per_s']:.1f} runs/s (span {res['span_s']:.2f}s, "
                        f"worker CPU {res['worker_cpu_s']:.2f}s, PG {res['pg_cpu_s']:.2f}s, "
                        f"machine {res['machine_busy_cores']:.2f} cores busy, "
                        f"per worker {res['per_worker']})")
    return out


def profile_misses(targets: dict[str, Target], fleet: list[dict[str, Any]],
                   args: argparse.Namespace) -> list[dict[str, Any]]:
    """One more 2-worker I/O measurement per store that missed, py-spy on worker 0."""
    profiles = []
    for kind in args.stores:
        ratio = fleet_report.ratio(fleet, kind, "io", 2)
        if "io" not in args.workloads or 2 not in args.workers or ratio is None \
                or ratio >= fleet_report.FLEET_TARGET:
            continue
        log(f"profiling {kind} io x2 (ratio {ratio:.2f} < {fleet_report.FLEET_TARGET})")
        res = asyncio.run(measure(targets[kind], "io", 2, args, profile=True))
        profiles.append(res)
    return profiles


def machine(server: str) -> list[str]:
    async def pg_version() -> str:
        conn = await asyncpg.connect(server)
        try:
            shown = [f"{name}={await conn.fetchval(f'SHOW {name}')}" for name in (
                "fsync", "synchronous_commit", "shared_buffers", "max_connections")]
            return f"{await conn.fetchval('SHOW server_version')} ({', '.join(shown)})"
        finally:
            await conn.close()

    return fleet_report.machine_lines(asyncio.run(pg_version()))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--concurrency", type=int, default=4,
                        help="runs per worker process (why 4: bench/RESULTS.md, fleet section)")
    parser.add_argument("--stores", default="postgres,sqlite")
    parser.add_argument("--workloads", default="io,cpu")
    parser.add_argument("--commits", type=int, default=2000)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--pg-dsn", default=SERVER_DSN)
    parser.add_argument("--out", default=None)
    parser.add_argument("--render", default=None, metavar="JSON",
                        help="measure nothing: write the section from a raw results file")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.reps, args.commits = min(args.runs, 40), 1, min(args.commits, 200)
    args.workers = [int(w) for w in args.workers.split(",")]
    args.stores = args.stores.split(",")
    args.workloads = args.workloads.split(",")
    return args


def main() -> None:
    args = parse_args()
    out_dir = Path(args.out) if args.out else (
        Path(tempfile.mkdtemp(prefix="df-fleet-out-")) if args.quick else HERE)
    if args.render:  # only write the section again, from a raw results file
        saved = json.loads(Path(args.render).read_text())
        fleet_report.write_section(out_dir / "RESULTS.md",
                                   fleet_report.render(saved, saved["argv"]))
        return
    started = time.perf_counter()
    load0 = fleet_report.loadavg()
    results: dict[str, Any] = {"args": dict(vars(args)), "argv": " ".join(sys.argv[1:]),
                               "machine": machine(args.pg_dsn)}
    sqlite_dir = Path(tempfile.mkdtemp(prefix="df-fleet-sqlite-"))
    try:
        with postgres_database(args.pg_dsn) as dsn:
            targets = {"postgres": Target("postgres", dsn),
                       "sqlite": Target("sqlite", str(sqlite_dir / "fleet.db"))}
            log(f"fleet: {args.runs} runs, workers {args.workers}, concurrency "
                f"{args.concurrency}, {args.reps} repetitions; PostgreSQL database {dsn}")
            results["failed"] = []
            results["fleet"] = run_fleet(targets, args, results["failed"])
            profile_commit = False
            if args.commits:
                log(f"commit: {args.commits} interleaved store commits / raw transactions")
                results["commit"] = asyncio.run(fleet_commit.measure(dsn, args.commits))
                log(fleet_report.commit_brief(results["commit"]))
                profile_commit = results["commit"]["ratio_median"] > fleet_report.COMMIT_TARGET
            if not args.no_profile:
                results["profiles"] = profile_misses(targets, results["fleet"], args)
            if profile_commit and not args.no_profile:
                results["commit_profile"] = asyncio.run(
                    fleet_commit.measure(dsn, args.commits, profile=True))["profile"]
    finally:
        shutil.rmtree(sqlite_dir, ignore_errors=True)
    results["wall_s"] = time.perf_counter() - started
    results["load"] = (load0, fleet_report.loadavg())
    raw = Path(tempfile.gettempdir()) / "df-bench-fleet.json"
    raw.write_text(json.dumps(results, indent=1))
    log(f"raw results: {raw}")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "RESULTS.md"
    fleet_report.write_section(path, fleet_report.render(results, results["argv"]))
    for line in fleet_report.verdicts(results):
        print("  " + line)
    log(f"done in {results['wall_s'] / 60:.1f} min; see {path}")


if __name__ == "__main__":
    main()
