"""Side-by-side figures against the DESIGN.md targets, in one run (``make bench-loads``).

``python bench/sidebyside.py [--quick] [--without langgraph,dbos] [--out DIR] [--pg-dsn DSN]``

Measures, on this machine and in this one run: the inbox over 10,000 waiting
runs; the head of a 5,000-superstep run (``get_state`` and the engine's
loader, what ``resume`` uses) beside LangGraph's ``aget_state``/``aget_tuple``
of the same run; with ``bench/loads.py``, a 20,000-superstep load beside a
1,000 one, and a small run's supersteps alone and beside a task that reads
the 20,000-superstep run's head over and over; the chain N=1,000 beside
LangGraph's; LangGraph both with its default channel for the message list
and with its ``DeltaChannel`` (supersteps/s, bytes per checkpoint and the
head's reads of each); a PostgreSQL chain commit beside a raw asyncpg
one-statement INSERT; 2 worker processes beside 1
on PostgreSQL with I/O-bound nodes (``fleet.py``); short workflows (three
durable steps, started one after another) beside DBOS Transact on the same
server, each side on its own fresh database. Every missed target gets a
profile of our side. Writes its section of ``bench/RESULTS.md`` (``--out``:
another folder). A side whose library is not installed (or is named in
``--without``) is left out with a note. Takes under ten minutes
(``--quick``: small sizes, about a minute; not figures to quote).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import importlib.util
import io
import json
import os
import pstats
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import fleet_commit  # noqa: E402
import workloads_ours as ours  # noqa: E402
from sections import replace_section  # noqa: E402

from durable_flow import END, Blackboard, PostgresStore, RunStatus, Runtime, WorkflowBuilder  # noqa: E402

SECTION = "sidebyside"
# LangGraph's chain with the message list on its default channel (a
# BinaryOperatorAggregate of operator.add) and on its DeltaChannel: the key
# of each in the results, and its name in the report
THEIRS = {"default": "theirs", "delta": "delta"}
CHANNEL_NAME = {"theirs": "default channel", "delta": "DeltaChannel"}
SERVER_DSN = os.environ.get("DURABLE_FLOW_BENCH_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


@contextlib.contextmanager
def database(server: str, tag: str) -> Iterator[str]:
    """A fresh PostgreSQL database on ``server`` for one side; dropped afterwards."""
    import asyncpg

    name = f"df_sbs_{tag}_{os.getpid()}"  # [a-z0-9_] only: safe to quote

    async def admin(*statements: str) -> None:
        conn = await asyncpg.connect(server)
        try:
            for sql in statements:
                await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"'))
    try:
        base = server.rsplit("/", 1)[0]
        yield f"{base}/{name}"
    finally:
        asyncio.run(admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def profiled(fn: Callable[[], Awaitable[Any]]) -> str:
    """cProfile of one awaited call, the top entries by own time (waiting for I/O included)."""
    prof = cProfile.Profile()

    async def go() -> None:
        prof.enable()
        try:
            await fn()
        finally:
            prof.disable()

    asyncio.run(go())
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(22)
    return "\n".join(line for line in out.getvalue().splitlines() if line.strip())[:6000]


class Steps(Blackboard):
    n: int = 0


def three_steps() -> Any:
    """Three durable steps one after another (nodes: each commits a checkpoint)."""
    b = WorkflowBuilder("three-steps", state=Steps)
    for name in ("one", "two", "three"):
        async def step(state: Steps) -> dict[str, Any]:
            return {"n": state.n + 1}
        b.add_node(name, step)
    b.set_entry("one")
    b.add_edge("one", "two")
    b.add_edge("two", "three")
    b.add_edge("three", END)
    return b.build()


async def short_runs(dsn: str, runs: int) -> dict[str, float]:
    """Our side: ``runs`` three-step runs on PostgreSQL, each awaited before the next."""
    async with Runtime(PostgresStore(dsn)) as rt:
        wf = three_steps()
        for _ in range(3):  # warm up: connections, prepared statements
            await rt.run(wf, {})
        began, cpu = time.perf_counter(), time.process_time()
        for _ in range(runs):
            result = await rt.run(wf, {})
            assert result.status is RunStatus.COMPLETED and result.state.n == 3
        took, used = time.perf_counter() - began, time.process_time() - cpu
    return {"runs": runs, "seconds": took, "per_s": runs / took, "cpu_ms": used * 1e3 / runs}


async def inbox_list(path: Path) -> tuple[float, float]:
    """Wall and CPU seconds (all threads) of ``Runtime.pending_requests()`` on a new store."""
    async with Runtime(ours._store(path)) as rt:
        began, cpu = time.perf_counter(), time.process_time()
        await rt.pending_requests()
        return time.perf_counter() - began, time.process_time() - cpu


def inbox_profile(path: Path) -> str:
    """The inbox's statement on a plain ``sqlite3`` connection, then its rows, profiled.

    The store runs both in its reader thread, out of a profiler's sight.
    """
    from durable_flow.store.sql._cache import statements_for
    from durable_flow.store.sql._inbox import views_from_tuples

    stmt = statements_for("sqlite").req_views[False]
    conn = sqlite3.connect(path)
    try:
        began = time.perf_counter()
        rows = conn.execute(stmt.sql, stmt.bind({"workflow_name": None, "now": 0})).fetchall()
        query = time.perf_counter() - began
    finally:
        conn.close()
    prof = cProfile.Profile()
    began = time.perf_counter()
    prof.enable()
    views_from_tuples(stmt.columns, rows, 0)
    prof.disable()
    views = time.perf_counter() - began
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(10)
    text = "\n".join(line for line in out.getvalue().splitlines() if line.strip())
    return (f"query (fetchall of {len(rows):,} rows): {_ms(query)}; rows to PendingRequest "
            f"(profiled): {_ms(views)}\n{text}")


RAW_ONE = "INSERT INTO df_bench_raw (id, data) VALUES ($1, $2)"


async def commit_vs_one_statement(dsn: str, commits: int) -> dict[str, Any]:
    """A chain superstep's ``PostgresStore.commit`` beside a one-statement INSERT, interleaved.

    The superstep is ``fleet_commit.py``'s (two values, one ~300-byte message);
    the raw transaction inserts as many bytes in one statement (autocommit) on
    the store's own pool. Medians of ``commits`` pairs after 20 of warm-up.
    """
    async with PostgresStore(dsn, min_size=1, max_size=2) as store:
        pool = store.driver._pool  # type: ignore[attr-defined]
        async with pool.acquire() as conn:
            await conn.execute("CREATE TABLE df_bench_raw (id bigint PRIMARY KEY, data bytea)")
        chain = await fleet_commit._start(store, "commit-store")
        blob = b"x" * 600
        samples: dict[str, list[float]] = {"store": [], "raw": []}
        for i in range(20 + commits):
            go = fleet_commit.store_commit(store, chain)
            began = time.perf_counter()
            await go()
            mine = time.perf_counter() - began
            began = time.perf_counter()
            async with pool.acquire() as conn:
                await conn.execute(RAW_ONE, i, blob)
            raw = time.perf_counter() - began
            if i >= 20:
                samples["store"].append(mine)
                samples["raw"].append(raw)
        out: dict[str, Any] = {k: statistics.median(v) for k, v in samples.items()}
        out["ratio"] = out["store"] / out["raw"]
        out["profile"] = await fleet_commit._profile(store, chain, max(50, commits // 4))
    return out


class Bench:
    """The measurements, in order; each one that raises is noted and the rest go on."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.tmp = Path(tempfile.mkdtemp(prefix="df-sbs-"))
        self.res: dict[str, Any] = {}
        self.notes: list[str] = []
        self.profiles: dict[str, str] = {}
        without = set(args.without.split(",")) if args.without else set()
        self.langgraph = "langgraph" not in without and _has("langgraph")
        self.dbos = "dbos" not in without and _has("dbos")
        if not self.langgraph:
            self.notes.append("LangGraph is not installed (or left out): its columns are empty "
                              "(`pip install -r bench/requirements.txt`).")
        if not self.dbos:
            self.notes.append("DBOS Transact is not installed (or left out): its column is empty "
                              "(`pip install -r bench/requirements.txt`).")

    def folder(self, name: str) -> str:
        path = self.tmp / name
        path.mkdir()
        return str(path)

    def step(self, name: str, fn: Callable[[], None]) -> None:
        log(f"{name}...")
        began = time.perf_counter()
        try:
            fn()
        except Exception as exc:  # one failed measurement leaves the others
            self.notes.append(f"{name} failed: {type(exc).__name__}: {str(exc)[:300]}")
            log(f"{name} FAILED: {type(exc).__name__}: {exc}")
        log(f"{name}: {time.perf_counter() - began:.1f} s")

    def inbox(self) -> None:
        runs, folder = self.args.inbox_runs, self.folder("inbox")
        asyncio.run(ours.inbox_build(folder, runs))
        asyncio.run(ours.inbox(folder, 0, runs))  # checks the listing and answers one
        samples = [asyncio.run(inbox_list(Path(folder) / "ours_inbox.db")) for _ in range(5)]
        self.res["inbox"] = {"runs": runs, "list_s": statistics.median(s[0] for s in samples),
                             "cpu_s": statistics.median(s[1] for s in samples)}

    def loads(self) -> None:
        """Heads of waiting runs of several sizes and a small run beside a reader (loads.py)."""
        import loads as lo

        small, n, big = self.args.small_n, self.args.load_n, self.args.big_n
        folder = Path(self.folder("loads"))
        out: dict[str, Any] = {"heads": {}, "stall": {}}
        runs = {}
        for size in (small, n, big):
            runs[size] = asyncio.run(lo.build_run(folder, size))
            out["heads"][size] = asyncio.run(lo.measure_loads(*runs[size], size, reps=5))
        for reader in ("get_state", "loader"):
            out["stall"][reader] = asyncio.run(lo.measure_stall(
                *runs[big], big, small=self.args.beside_n, reader=reader))
        # the same chain on both sides, against LangGraph's reads of its head
        out["ours"] = asyncio.run(ours.chain(self.folder("load-ours"), n, reads=3,
                                             profile_run=False))
        if self.langgraph:
            import workloads_langgraph as theirs

            for channel in theirs.CHANNELS:  # "theirs": the default channel, "delta"
                out[THEIRS[channel]] = asyncio.run(theirs.chain(
                    self.folder(f"load-{THEIRS[channel]}"), n, reads=3, channel=channel))
        out.update(small=small, n=n, big=big)
        self.res["loads"] = out

    def chain(self) -> None:
        n, reps = self.args.chain_n, self.args.reps
        keys = ("ours", *THEIRS.values())
        sides: dict[str, list[float]] = {k: [] for k in keys}
        cpu: dict[str, list[float]] = {k: [] for k in keys}
        size: dict[str, list[float]] = {k: [] for k in keys}

        def record(key: str, got: dict[str, Any]) -> None:
            sides[key].append(got["supersteps_per_s"])
            cpu[key].append(got["cpu_per_superstep"])
            size[key].append(got["bytes_per_superstep"])

        for rep in range(reps):  # interleaved: every side sees the same machine
            record("ours", asyncio.run(ours.chain(self.folder(f"chain-ours-{rep}"), n,
                                                  profile_run=False)))
            if self.langgraph:
                import workloads_langgraph as theirs

                for channel in theirs.CHANNELS:
                    key = THEIRS[channel]
                    record(key, asyncio.run(theirs.chain(self.folder(f"chain-{key}-{rep}"), n,
                                                         channel=channel)))
        self.res["chain"] = {"n": n, **{k: v for k, v in sides.items() if v},
                             "cpu": {k: statistics.median(v) for k, v in cpu.items() if v},
                             "bytes": {k: statistics.median(v) for k, v in size.items() if v}}

    def pg_commit(self) -> None:
        with database(self.args.pg_dsn, "commit") as dsn:
            self.res["pg_commit"] = res = asyncio.run(commit_vs_one_statement(dsn, self.args.commits))
            if res["ratio"] > 1.5:
                self.profiles["PostgreSQL chain commit"] = res["profile"]

    def fleet(self) -> None:
        out = self.tmp / "fleet-out"
        raw = self.tmp / "df-bench-fleet.json"  # fleet.py's raw results, in its TMPDIR
        cmd = [sys.executable, str(HERE / "fleet.py"), "--workers", "1,2", "--stores", "postgres",
               "--workloads", "io", "--reps", str(self.args.fleet_reps), "--runs",
               str(self.args.fleet_runs), "--commits", "0", "--no-profile", "--pg-dsn",
               self.args.pg_dsn, "--out", str(out)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, timeout=900,
                       env={**os.environ, "TMPDIR": str(self.tmp)})
        got = json.loads(raw.read_text())["fleet"]
        per = {w: statistics.median([r["runs_per_s"] for r in got if r["workers"] == w])
               for w in (1, 2)}
        self.res["fleet"] = {"runs": self.args.fleet_runs, "one": per[1], "two": per[2],
                             "ratio": per[2] / per[1]}

    def short(self) -> None:
        runs = self.args.short_runs
        out: dict[str, Any] = {}
        with database(self.args.pg_dsn, "ours") as dsn:
            out["ours"] = asyncio.run(short_runs(dsn, runs))
            if self.dbos:
                with database(self.args.pg_dsn, "dbos") as theirs:
                    done = subprocess.run([sys.executable, str(HERE / "sidebyside_dbos.py"),
                                           theirs, str(runs)], check=True, capture_output=True,
                                          text=True, timeout=600)
                    out["dbos"] = json.loads(done.stdout.strip().splitlines()[-1])
            self.res["short"] = out
            if "dbos" in out and out["ours"]["per_s"] < 3 * out["dbos"]["per_s"]:
                self.profiles["short workflows (ours, PostgreSQL)"] = profiled(
                    lambda: short_runs(dsn, max(10, runs // 4)))

    def profile_misses(self, rows: list[tuple[str, str, str]]) -> None:
        missed = {target for target, _, status in rows if status == "**missed**"}
        if any(t.startswith("inbox") for t in missed):
            self.profiles["inbox (its query and rows, run here outside the store's thread)"] = (
                inbox_profile(self.tmp / "inbox" / "ours_inbox.db"))
        if any(t.startswith(("resume", "a ", "worst")) for t in missed):
            import loads as lo

            path = Path(self.tmp / "loads" / f"loads{self.args.big_n}.db")
            run_id = f"long{self.args.big_n}"
            self.profiles[f"get_state of the head of the {self.args.big_n:,}-superstep run"] = (
                profiled(lambda: lo._sample(path, lambda rt: rt.get_state(run_id), 1)))
        if any(t.startswith("2 workers") for t in missed):
            self.notes.append("2 workers against 1: the worker processes are profiled by "
                              "`make bench-fleet` (py-spy, in its section of this file), not here.")
        if any(t.startswith("chain") for t in missed):
            folder = self.folder("profile-chain")
            self.profiles["chain (ours, SQLite)"] = profiled(
                lambda: ours.chain(folder, self.args.chain_n, profile_run=False))

    def close(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def _bytes(n: float) -> str:
    for unit, scale in (("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def _their_head(key: str, reads: dict[str, float]) -> str:
    """LangGraph's reads of the head with one of its channels, for a row's text."""
    text = (f"LangGraph ({CHANNEL_NAME[key]}) aget_state {_ms(reads['head'])}, aget_tuple "
            f"{_ms(reads['load_head'])}")
    if "load_head_replay" in reads:  # its tuple holds no message list
        text += f" (without the list; with it replayed {_ms(reads['load_head_replay'])})"
    return text


def _status(met: bool | None) -> str:
    return "not measured" if met is None else ("met" if met else "**missed**")


def targets(res: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(target, measured, status) for each DESIGN.md target this run measured."""
    rows: list[tuple[str, str, str]] = []
    if "inbox" in res:
        ib = res["inbox"]
        rows.append((f"inbox over {ib['runs']:,} waiting runs under 100 ms",
                     f"{_ms(ib['list_s'])} (CPU {_ms(ib['cpu_s'])})", _status(ib["list_s"] < 0.1)))
    if "loads" in res:
        ld = res["loads"]
        n, small, big = ld["n"], ld["small"], ld["big"]
        head = ld["heads"][n]
        o = ld["ours"]["reads"]
        lg = {key: ld[key]["reads"] for key in THEIRS.values() if key in ld}
        vs = (f"; the same chain: ours get_state {_ms(o['head'])}, loader {_ms(o['load_head'])}; "
              + "; ".join(_their_head(key, t) for key, t in lg.items()) if lg else
              "; LangGraph not measured")
        worst = max(head["get_state_ms"], head["loader_ms"])
        rows.append((f"resume (get_state) from the head at N={n:,} under 10 ms",
                     f"get_state {head['get_state_ms']:.1f} ms, engine loader "
                     f"{head['loader_ms']:.1f} ms, resume {head['resume_ms']:.1f} ms{vs}",
                     _status(worst < 10)))
        # DESIGN.md: resume and get_state of that head no slower than LangGraph's, with
        # either of its channels for the message list
        for key, t in lg.items():
            rows.append((f"resume and get_state of the head at N={n:,} no slower than "
                         f"LangGraph's aget_state of the same run ({CHANNEL_NAME[key]})",
                         f"resume's loader {o['load_head'] / t['head']:.2f}x, get_state "
                         f"{o['head'] / t['head']:.2f}x LangGraph's aget_state "
                         f"({_ms(t['head'])})",
                         _status(max(o["head"], o["load_head"]) <= t["head"])))
        ratios = {k: ld["heads"][big][f"{k}_ms"] / ld["heads"][small][f"{k}_ms"]
                  for k in ("get_state", "loader")}
        rows.append((f"a {big:,}-superstep load at most 3x a {small:,} one",
                     f"get_state {ratios['get_state']:.1f}x ({ld['heads'][big]['get_state_ms']:.1f} "
                     f"/ {ld['heads'][small]['get_state_ms']:.1f} ms), loader "
                     f"{ratios['loader']:.1f}x ({ld['heads'][big]['loader_ms']:.1f} / "
                     f"{ld['heads'][small]['loader_ms']:.1f} ms)", _status(max(ratios.values()) <= 3)))
        st = ld["stall"]
        over = {k: v["worst_over_alone_median"] for k, v in st.items()}
        rows.append((f"worst superstep of a small run beside a {big:,}-superstep reader at most 5x "
                     "its median",
                     "; ".join(f"{k} reader {over[k]:.1f}x (worst {v['beside_worst_ms']:.1f} ms, "
                               f"median alone {v['alone_median_ms']:.2f} ms, "
                               f"{v['loads_meanwhile']} loads meanwhile)" for k, v in st.items()),
                     _status(max(over.values()) <= 5)))
    if "chain" in res:
        ch = res["chain"]
        for key in (k for k in THEIRS.values() if k in ch):
            ratio = statistics.median(ch["ours"]) / statistics.median(ch[key])
            by_cpu = ch["cpu"][key] / ch["cpu"]["ours"]
            rows.append((f"chain N={ch['n']:,}: at least 5x LangGraph's supersteps/s "
                         f"({CHANNEL_NAME[key]})",
                         f"{ratio:.2f}x ({statistics.median(ch['ours']):.0f} vs "
                         f"{statistics.median(ch[key]):.0f} supersteps/s; by CPU per "
                         f"superstep {by_cpu:.2f}x: {_ms(ch['cpu']['ours'])} vs "
                         f"{_ms(ch['cpu'][key])})", _status(ratio >= 5)))
        if "theirs" not in ch:
            rows.append((f"chain N={ch['n']:,}: at least 5x LangGraph's supersteps/s",
                         f"ours {statistics.median(ch['ours']):.0f} supersteps/s, LangGraph "
                         "not measured", _status(None)))
    if "pg_commit" in res:
        pc = res["pg_commit"]
        rows.append(("PostgreSQL chain superstep at most 1.5x a raw asyncpg one-statement "
                     "transaction", f"{pc['ratio']:.2f}x ({_ms(pc['store'])} vs {_ms(pc['raw'])}, "
                     "medians)", _status(pc["ratio"] <= 1.5)))
    if "fleet" in res:
        fl = res["fleet"]
        rows.append(("2 workers at least 1.8x one on PostgreSQL (I/O-bound nodes)",
                     f"{fl['ratio']:.2f}x ({fl['two']:.1f} vs {fl['one']:.1f} runs/s)",
                     _status(fl["ratio"] >= 1.8)))
    if "short" in res:
        sh = res["short"]
        mine = sh["ours"]["per_s"]
        if "dbos" in sh:
            ratio = mine / sh["dbos"]["per_s"]
            rows.append(("short workflows (3 steps) on PostgreSQL: at least 3x DBOS's workflows/s",
                         f"{ratio:.2f}x ({mine:.0f} vs {sh['dbos']['per_s']:.0f} workflows/s; "
                         f"client CPU per workflow {sh['ours']['cpu_ms']:.2f} vs "
                         f"{sh['dbos']['cpu_ms']:.2f} ms)", _status(ratio >= 3)))
        else:
            rows.append(("short workflows (3 steps) on PostgreSQL: at least 3x DBOS's workflows/s",
                         f"ours {mine:.0f} workflows/s, DBOS not measured", _status(None)))
    return rows


def channels_table(res: dict[str, Any]) -> list[str]:
    """LangGraph's default channel beside its DeltaChannel, and ours, as this run measured them."""
    ch, ld = res.get("chain", {}), res.get("loads", {})
    keys = ("ours", *THEIRS.values())
    table: list[tuple[str, list[str]]] = []
    if "delta" in ch:
        n = ch["n"]
        table += [(f"chain N={n:,}: supersteps/s (median of {len(ch['ours'])})",
                   [f"{statistics.median(ch[k]):.0f}" for k in keys]),
                  (f"chain N={n:,}: CPU per superstep", [_ms(ch["cpu"][k]) for k in keys]),
                  (f"chain N={n:,}: database bytes per checkpoint",
                   [_bytes(ch["bytes"][k]) for k in keys])]
    if "delta" in ld:
        n = ld["n"]
        reads = {k: ld[k]["reads"] for k in keys}
        table += [(f"chain N={n:,}: supersteps/s (one run)",
                   [f"{ld[k]['supersteps_per_s']:.0f}" for k in keys]),
                  (f"chain N={n:,}: database bytes per checkpoint",
                   [_bytes(ld[k]["bytes_per_superstep"]) for k in keys]),
                  (f"head of N={n:,}: get_state / aget_state",
                   [_ms(reads[k]["head"]) for k in keys]),
                  (f"head of N={n:,}: engine loader / aget_tuple",
                   [_ms(reads[k]["load_head"]) for k in keys[:2]]
                   + [f"{_ms(reads['delta']['load_head'])} (without the list)"]),
                  (f"head of N={n:,}: engine loader / aget_tuple with the list replayed",
                   [_ms(reads["ours"]["load_head"]), "(as aget_tuple)",
                    _ms(reads["delta"]["load_head_replay"])]),
                  (f"middle (N/2) of N={n:,}: get_state / aget_state",
                   [_ms(reads[k]["middle"]) for k in keys])]
    if not table:
        return []
    return ["", "LangGraph with the chain's message list on its default channel "
            "(`Annotated[list, operator.add]`, a `BinaryOperatorAggregate`: every checkpoint "
            "holds the whole list) and on its `DeltaChannel` (`DeltaChannel(append_all)`, its "
            "defaults: a checkpoint holds the list only every 100 updates, and a read replays "
            "the writes saved since), beside ours, in this run. Reads on a fresh connection, "
            "minimum of 3; the replayed load is `aget_tuple` then the saver's "
            "`aget_delta_channel_history` and the channel's replay of those writes.", "",
            "| measured | durable-flow | LangGraph, default channel | LangGraph, DeltaChannel |",
            "|---|---|---|---|", *[f"| {name} | {' | '.join(cells)} |" for name, cells in table]]


def render(bench: Bench, rows: list[tuple[str, str, str]], command: str, took: float) -> str:
    start, end = f"<!-- {SECTION}:start -->", f"<!-- {SECTION}:end -->"
    lines = [start, "## Side by side: the DESIGN.md targets in one run", "",
             f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `{command}` "
             f"in {took / 60:.1f} min (load average at the end: "
             f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; the machine is shared, so "
             "absolute times are noisy: the ratios come from the same run).", "",
             "Method: SQLite sides as in `bench/run.py` (`synchronous=FULL`, LangGraph's "
             "`AsyncSqliteSaver`), here in one process, one side after the other, each on a fresh "
             "database; reads on a fresh store, minimum of 3. Loads and a small run beside a "
             "reader: `bench/loads.py` (waiting runs of N supersteps, each head read 5 times on a "
             "new store, median; a small run alone, then beside a task on the same loop that "
             "reads the long run's head over and over). The inbox: "
             "`Runtime.pending_requests()` on a fresh store, median of 5. PostgreSQL: "
             "a chain superstep's `PostgresStore.commit` (`fleet_commit.py`'s) interleaved with "
             "a one-statement INSERT of as many bytes (autocommit) on the same pool, medians of "
             "1,000 pairs; `fleet.py --workers 1,2 --stores "
             "postgres --workloads io`, and the short workflows (three steps, each run awaited "
             "before the next starts) on a fresh database per side on the same server.", "",
             "| target | measured | status |", "|---|---|---|"]
    lines += [f"| {t} | {m} | {s} |" for t, m, s in rows]
    lines += channels_table(bench.res)
    if bench.notes:
        lines += ["", *[f"- {note}" for note in bench.notes]]
    for name, text in bench.profiles.items():
        lines += ["", f"<details><summary>Profile of a miss: {name}</summary>", "", "```",
                  text, "```", "</details>"]
    lines.append(end)
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, to check it runs")
    parser.add_argument("--without", default="", help="leave out these sides: langgraph,dbos")
    parser.add_argument("--out", default=None, help="write RESULTS.md here instead of bench/")
    parser.add_argument("--pg-dsn", default=SERVER_DSN)
    parser.add_argument("--only", default="inbox,loads,chain,pg_commit,fleet,short")
    args = parser.parse_args(argv)
    sizes = ({"inbox_runs": 100, "load_n": 200, "small_n": 50, "big_n": 400, "chain_n": 100,
              "beside_n": 40, "reps": 1, "commits": 60, "fleet_runs": 16, "fleet_reps": 1,
              "short_runs": 10}
             if args.quick else
             {"inbox_runs": 10_000, "load_n": 5_000, "small_n": 1_000, "big_n": 20_000,
              "chain_n": 1_000, "beside_n": 300, "reps": 3, "commits": 1_000, "fleet_runs": 200,
              "fleet_reps": 2, "short_runs": 200})
    for key, value in sizes.items():
        setattr(args, key, value)
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    began = time.perf_counter()
    bench = Bench(args)
    try:
        for name in args.only.split(","):
            bench.step(name, getattr(bench, name))
        rows = targets(bench.res)
        bench.step("profiles of the misses", lambda: bench.profile_misses(rows))
    finally:
        bench.close()
    command = " ".join(["python bench/sidebyside.py", *(argv if argv is not None else sys.argv[1:])])
    section = render(bench, rows, command, time.perf_counter() - began)
    out = Path(args.out) if args.out else HERE
    out.mkdir(parents=True, exist_ok=True)
    replace_section(out / "RESULTS.md", SECTION, section)
    (Path(tempfile.gettempdir()) / "df-bench-sidebyside.json").write_text(
        json.dumps(bench.res, indent=1, default=str))
    for target, measured, status in rows:
        print(f"{status:>14}  {target}: {measured}")


if __name__ == "__main__":
    main()
