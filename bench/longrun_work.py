"""What ``longrun.py`` runs inside its worker processes (one measurement each).

Every function here runs in a fresh process (``longrun.py --worker SPEC``)
and returns a JSON-able dict. The workload is the chain of ``run.py``: one
node looping on itself, each superstep appending one ~200-byte ``Message``
to ``messages`` (so the node's own history grows too) and adding 1 to an
``Annotated[int, add]`` counter, while ``count < n``. ``waiting`` runs then
ask a person once (``ctx.request``) when the count reaches ``n``, so the run
ends ``waiting`` with its head at superstep ``n`` and can be resumed.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import sqlite3
import statistics
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

from workloads_common import CONTENT, peak_rss_mb

from durable_flow import (
    Blackboard,
    MemoryStore,
    Message,
    RunStatus,
    Runtime,
    SqliteStore,
    WorkflowBuilder,
    add,
)

# Each call of the node appends ``time.perf_counter()`` here: the difference of
# two neighbours is the whole cost of one superstep (commit, routing, the next
# task's start), as the caller of ``run`` would see it.
TIMES: list[float] = []
# Set when a run must stop early (the time budget of the ``full`` run): the node
# then asks its question at once and the run ends waiting where it stands.
STOP_AT: list[float] = [float("inf")]
# Called with the count at the start of every call of the node, before it
# appends its message (``scale.py`` takes the store's size at marks there).
HOOKS: list[Callable[[int], Awaitable[None]]] = []


class LongState(Blackboard):
    count: Annotated[int, add] = 0
    done: bool = False


def workflow(n: int, *, waiting: bool = True) -> Any:
    """The chain; ``waiting``: ask once when ``count`` reaches ``n`` (head at superstep n)."""
    b = WorkflowBuilder("bench_longrun", state=LongState)

    async def step(state: LongState, ctx: Any) -> dict[str, Any]:
        for hook in HOOKS:
            await hook(state.count)
        now = time.perf_counter()
        TIMES.append(now)
        if state.count < n and now <= STOP_AT[0]:
            return {"messages": [Message(role="assistant", content=CONTENT)], "count": 1}
        if not waiting:  # stopped early: end the run here
            return {"done": True}
        ok = await ctx.request({"question": "continue?"}, response_type=bool)
        return {"done": ok}

    b.add_node("step", step)
    b.set_entry("step")
    if waiting:
        b.add_edge("step", "step", when=lambda s: not s.done)
    else:
        b.add_edge("step", "step", when=lambda s: s.count < n and not s.done)
    return b.build()


def store_for(path: Path, kind: str) -> Any:
    """``memory``, or a ``SqliteStore`` with ``synchronous`` = ``kind`` (normal, full)."""
    return MemoryStore() if kind == "memory" else SqliteStore(str(path), synchronous=kind)


def file_bytes(folder: str, name: str) -> int:
    """A database's size on disk, its WAL and shared memory files included."""
    return sum(p.stat().st_size for p in Path(folder).glob(f"{name}*"))


# --------------------------------------------------------------------------- statistics
def quantile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def superstep_stats(times: list[float], window: int) -> dict[str, Any]:
    """Per-superstep cost from the node's start times (one difference per superstep)."""
    d = [b - a for a, b in itertools.pairwise(times)]
    if not d:
        return {"supersteps": 0}
    w = max(1, min(window, len(d) // 2))
    worst = max(range(len(d)), key=d.__getitem__)
    tenths = [statistics.fmean(d[i * len(d) // 10:(i + 1) * len(d) // 10] or [0.0])
              for i in range(10)]
    return {"supersteps": len(d), "window": w,
            "first_ms": statistics.fmean(d[:w]) * 1e3, "last_ms": statistics.fmean(d[-w:]) * 1e3,
            "first_median_ms": statistics.median(d[:w]) * 1e3,
            "last_median_ms": statistics.median(d[-w:]) * 1e3,
            "mean_ms": statistics.fmean(d) * 1e3, "median_ms": statistics.median(d) * 1e3,
            "p99_ms": quantile(d, 0.99) * 1e3, "worst_ms": d[worst] * 1e3,
            "worst_at": worst + 1, "tenths_ms": [t * 1e3 for t in tenths],
            "over_10ms": sum(x > 0.010 for x in d)}


async def timed(fn: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = await fn()
    return time.perf_counter() - t0, out


# --------------------------------------------------------------------------- rows returned
ROWS = [0]


class _CountingCursor(sqlite3.Cursor):
    def fetchall(self) -> list[Any]:
        rows = super().fetchall()
        ROWS[0] += len(rows)
        return rows

    def fetchone(self) -> Any:
        row = super().fetchone()
        ROWS[0] += row is not None
        return row

    def fetchmany(self, size: int = 1) -> list[Any]:
        rows = super().fetchmany(size)
        ROWS[0] += len(rows)
        return rows


class _CountingConnection(sqlite3.Connection):
    # Connection.execute does not go through a Python-level cursor(): route it
    def cursor(self, factory: Any = _CountingCursor) -> Any:  # type: ignore[override]
        return super().cursor(factory)

    def execute(self, sql: str, parameters: Any = (), /) -> Any:  # type: ignore[override]
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> Any:  # type: ignore[override]
        return self.cursor().executemany(sql, parameters)


@contextlib.contextmanager
def counting_connections() -> Iterator[None]:
    """Connections opened meanwhile count the rows SQLite hands back (bench side only)."""
    original = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("factory", _CountingConnection)
        return original(*args, **kwargs)

    sqlite3.connect = connect  # type: ignore[assignment]
    try:
        yield
    finally:
        sqlite3.connect = original


async def rows_returned(path: Path, run_id: str, op: Callable[[Runtime], Awaitable[Any]]) -> int:
    """Rows SQLite returned to a fresh store during ``op`` (opening it not counted)."""
    with counting_connections():
        async with Runtime(SqliteStore(str(path), synchronous="normal")) as rt:
            await rt.get_run(run_id)  # opens the store's connection(s): not counted
            ROWS[0] = 0
            await op(rt)
            return ROWS[0]


def stored_rows(path: Path, run_id: str) -> dict[str, Any]:
    """Plain SQL on the file: the rows a head load of the top-level thread has to read."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        head = conn.execute("SELECT head_checkpoint_id FROM runs WHERE run_id = ?",
                            (run_id,)).fetchone()[0]
        seq, versions = conn.execute(
            "SELECT seq, value_versions FROM checkpoints WHERE run_id = ? AND checkpoint_id = ?",
            (run_id, head)).fetchone()
        q = "SELECT count(*) FROM {} WHERE run_id = ? AND thread = '' AND seq <= ?"
        logs = conn.execute(q.format("log_chunks"), (run_id, seq)).fetchone()[0]
        values = conn.execute(q.format("channel_values"), (run_id, seq)).fetchone()[0]
        return {"head_seq": seq, "log_rows": logs, "value_rows": values,
                "value_rows_referenced": len(json.loads(versions))}
    except (sqlite3.Error, TypeError, ValueError) as exc:  # the schema may have moved on
        return {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        conn.close()


# --------------------------------------------------------------------------- samples
async def load_head(store: Any, wf: Any, run_id: str, checkpoint_id: str) -> Any:
    """The engine's own loader (``ThreadRunner.load``), as ``resume`` uses it."""
    from durable_flow.engine._loop import RunContext, ThreadRunner
    from durable_flow.store._protocols import Lease

    lease = Lease(run_id, "", 0, datetime.now(UTC) + timedelta(minutes=5))
    runner = ThreadRunner(RunContext(store, lease, wf.name, lambda e: None), wf)
    return await runner.load(checkpoint_id)


class Sampler:
    """Repeated samples of several reads, interleaved, each kind within a time cap."""

    def __init__(self, reps: int, cap_s: float) -> None:
        self.reps, self.cap_s = reps, cap_s
        self.samples: dict[str, list[float]] = {}
        self.errors: dict[str, str] = {}

    async def take(self, reads: dict[str, Callable[[], Awaitable[float]]]) -> None:
        for rep in range(self.reps):
            for name, read in reads.items():
                got = self.samples.setdefault(name, [])
                if name in self.errors or (rep >= 2 and sum(got) > self.cap_s):
                    continue
                try:
                    got.append(await read())
                except Exception as exc:  # one broken read must not lose the others
                    self.errors[name] = f"{type(exc).__name__}: {exc}"[:500]

    async def once(self, name: str, read: Callable[[], Awaitable[float]]) -> None:
        try:
            self.samples.setdefault(name, []).append(await read())
        except Exception as exc:
            self.errors[name] = f"{type(exc).__name__}: {exc}"[:500]

    def result(self) -> dict[str, Any]:
        return {"samples": {k: v for k, v in self.samples.items() if v}, "errors": self.errors}


# --------------------------------------------------------------------------- workloads
async def build(folder: str, n: int, store: str, window: int, reps: int = 0,
                cap_s: float = 20.0, budget_s: float | None = None) -> dict[str, Any]:
    """Run the chain to ``n`` (ending waiting) and time every superstep.

    On ``memory`` with ``reps`` the in-process reads are sampled too (the
    store lives only in this process). ``budget_s``: stop early once the run
    has taken that long (it then ends waiting where it stands).
    """
    path = Path(folder) / "longrun.db"
    wf = workflow(n)
    TIMES.clear()
    rss0 = peak_rss_mb()
    async with Runtime(store_for(path, store)) as rt:
        t0 = time.perf_counter()
        if budget_s is not None:
            STOP_AT[0] = t0 + budget_s
        cpu0 = time.process_time()
        result = await rt.run(wf, {}, max_supersteps=n + 10)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        assert result.status is RunStatus.WAITING, (result.status, result.error)
        reached = result.state.count
        assert budget_s is not None or reached == n, reached
        out: dict[str, Any] = {
            "n": n, "reached": reached, "store": store, "run_id": result.run_id,
            "seconds": wall, "cpu_s": cpu, "stopped_by_budget": reached < n,
            "rss_mb": peak_rss_mb(), "rss_base_mb": rss0,
            "steps": superstep_stats(TIMES[:reached + 1], window)}
        if store == "memory" and reps:
            out["reads"] = await _memory_reads(rt, wf, result.run_id, n, reps, cap_s)
    if store != "memory":
        out["db_bytes"] = file_bytes(folder, "longrun.db")
    return out


async def _memory_reads(rt: Runtime, wf: Any, run_id: str, n: int, reps: int,
                        cap_s: float) -> dict[str, Any]:
    snap = await rt.get_state(run_id)
    head, req = snap.checkpoint_id, snap.pending_requests[0].id
    s = Sampler(reps, cap_s)
    middle: list[str] = []

    async def full_history() -> float:
        t, infos = await timed(lambda: rt.history(run_id))
        middle.append(next(i.id for i in infos if i.superstep == n // 2))
        return t

    await s.once("history_full", full_history)
    reads: dict[str, Callable[[], Awaitable[float]]] = {
        "get_state": lambda: _t(rt.get_state(run_id)),
        "loader": lambda: _t(load_head(rt.store, wf, run_id, head)),
        "page_first": lambda: _t(rt.history(run_id, limit=50)),
    }
    if middle:
        reads["page_middle"] = lambda: _t(rt.history(run_id, limit=50, before=middle[0]))
    await s.take(reads)

    async def resume() -> float:
        t, r = await timed(lambda: rt.resume(wf, run_id, responses={req: True}))
        assert r.status is RunStatus.COMPLETED and r.state.count == n, (r.status, r.error)
        return t

    await warm_resume()
    await s.once("resume", resume)
    return s.result()


async def warm_resume() -> None:
    """Resume a tiny run first (its own MemoryStore): what ``resume`` imports or
    builds on first use in a process is then not in the timed sample."""
    wf = workflow(1)
    async with Runtime(MemoryStore()) as rt:
        r = await rt.run(wf, {}, max_supersteps=20)
        req = r.pending_requests[0].id
        done = await rt.resume(wf, r.run_id, responses={req: True})
        assert done.status is RunStatus.COMPLETED, done.error


async def _t(aw: Awaitable[Any]) -> float:
    t0 = time.perf_counter()
    await aw
    return time.perf_counter() - t0


async def loads(folder: str, n: int, run_id: str, reps: int,
                cap_s: float = 20.0) -> dict[str, Any]:
    """Reads of a waiting ``n``-superstep run on SQLite, each on a fresh store object."""
    path = Path(folder) / "longrun.db"
    wf = workflow(n)
    out: dict[str, Any] = {"n": n, "stored_rows": stored_rows(path, run_id)}

    async def fresh(op: Callable[[Runtime], Awaitable[Any]]) -> float:
        """``op`` on a new store object; opening its connection(s) is not timed."""
        async with Runtime(SqliteStore(str(path), synchronous="normal")) as rt:
            await rt.get_run(run_id)  # one row: opens the connection, reads nothing else
            return await _t(op(rt))

    async def loader() -> float:
        return await fresh(lambda rt: load_head(rt.store, wf, run_id, head))

    async with Runtime(SqliteStore(str(path), synchronous="normal")) as rt:
        snap = await rt.get_state(run_id)
        infos = await rt.history(run_id)
    head, req = snap.checkpoint_id, snap.pending_requests[0].id
    assert snap.superstep == n and len(snap.values["messages"]) == n, snap.superstep
    middle = next(i.id for i in infos if i.superstep == n // 2)
    out["head_superstep"] = snap.superstep
    s = Sampler(reps, cap_s)
    await s.once("history_full", lambda: fresh(lambda rt: rt.history(run_id)))
    await s.take({
        "get_state": lambda: fresh(lambda rt: rt.get_state(run_id)),
        "loader": loader,
        "page_first": lambda: fresh(lambda rt: rt.history(run_id, limit=50)),
        "page_middle": lambda: fresh(lambda rt: rt.history(run_id, limit=50, before=middle)),
    })
    rows: dict[str, Any] = {}
    for name, op in (("get_state", lambda rt: rt.get_state(run_id)),
                     ("loader", lambda rt: load_head(rt.store, wf, run_id, head)),
                     ("page_first", lambda rt: rt.history(run_id, limit=50))):
        try:
            rows[name] = await rows_returned(path, run_id, op)
        except Exception as exc:
            rows[name] = f"{type(exc).__name__}: {exc}"[:300]
    out["rows_returned"] = rows

    await warm_resume()

    async def resume() -> float:
        async with Runtime(SqliteStore(str(path), synchronous="normal")) as rt:
            await rt.get_run(run_id)
            t, r = await timed(lambda: rt.resume(wf, run_id, responses={req: True}))
        assert r.status is RunStatus.COMPLETED and r.state.count == n, (r.status, r.error)
        return t

    await s.once("resume", resume)
    out.update(s.result())
    return out


async def lg_build(folder: str, n: int) -> dict[str, Any]:
    """LangGraph's chain to ``n`` on AsyncSqliteSaver, synchronous=NORMAL (setup only)."""
    import workloads_langgraph as lg

    path = Path(folder) / "lg.db"
    conn, saver = await lg._saver(path, "NORMAL")
    app = lg.chain_graph(n).compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "t1"}, "recursion_limit": n + 10}
    t, result = await timed(lambda: app.ainvoke({"messages": [], "count": 0}, cfg,
                                                 durability="sync"))
    assert result["count"] == n and len(result["messages"]) == n
    await conn.close()
    return {"n": n, "seconds": t,
            "db_bytes": file_bytes(folder, "lg.db")}


async def lg_reads(folder: str, n: int, reps: int, cap_s: float = 20.0) -> dict[str, Any]:
    """``aget_state`` (head) and ``saver.aget_tuple`` (head), each on a new connection."""
    import workloads_langgraph as lg

    path = Path(folder) / "lg.db"
    graph = lg.chain_graph(n)
    s = Sampler(reps, cap_s)
    await s.take({
        "get_state": lambda: lg._fresh(path, graph, lambda app, _s: app.aget_state(lg._cfg("t1"))),
        "loader": lambda: lg._fresh(path, graph, lambda _a, sv: sv.aget_tuple(lg._cfg("t1"))),
    })
    conn, saver = await lg._saver(path)
    snap = await graph.compile(checkpointer=saver).aget_state(lg._cfg("t1"))
    await conn.close()
    assert len(snap.values["messages"]) == n
    return {"n": n, **s.result()}


async def stall(folder: str, run_id: str, mode: str, n: int, window: int,
                cap_s: float = 30.0) -> dict[str, Any]:
    """A writer's supersteps while another reader reads a long run in the same file.

    ``mode``: ``alone`` (no reader), ``thread`` (a reader thread with its own
    event loop and its own ``Runtime(SqliteStore(same file))``), ``task`` (a
    reader task on the writer's loop using the writer's ``Runtime``). The
    writer stops early after ``cap_s`` seconds (a store whose reads block its
    commits would otherwise take many minutes).
    """
    path = Path(folder) / "longrun.db"
    wf = workflow(n, waiting=False)
    reads: dict[str, list[float]] = {"history_full": [], "page": [], "get_state": []}
    stop = threading.Event()
    ready = threading.Event()
    TIMES.clear()

    async def reader(rt: Runtime) -> None:
        before: str | None = None
        await rt.get_state(run_id)  # warm: the first read opens and checks the store
        ready.set()
        while not stop.is_set():
            reads["history_full"].append(await _t(rt.history(run_id)))
            for _ in range(10):
                if stop.is_set():
                    break
                t0 = time.perf_counter()
                page = await rt.history(run_id, limit=50, before=before)
                reads["page"].append(time.perf_counter() - t0)
                before = page[-1].id if len(page) == 50 else None
            if not stop.is_set():
                reads["get_state"].append(await _t(rt.get_state(run_id)))

    async def own_reader() -> None:
        async with Runtime(SqliteStore(str(path), synchronous="normal")) as rt:
            await reader(rt)

    async with Runtime(SqliteStore(str(path), synchronous="normal")) as rt:
        thread, task = None, None
        if mode == "thread":
            thread = threading.Thread(target=lambda: asyncio.run(own_reader()), daemon=True)
            thread.start()
            ready.wait(60)
        elif mode == "task":
            task = asyncio.create_task(reader(rt))
            await asyncio.to_thread(ready.wait, 60)
        STOP_AT[0] = time.perf_counter() + cap_s
        t, result = await timed(lambda: rt.run(wf, {}, max_supersteps=n + 10))
        stop.set()
        if task is not None:
            await task
        if thread is not None:
            await asyncio.to_thread(thread.join, 120)
        assert result.status is RunStatus.COMPLETED, result.error
    reached = result.state.count
    steps = superstep_stats(TIMES[:reached + 1], window)
    return {"mode": mode, "n": n, "reached": reached, "stopped_by_cap": reached < n,
            "cap_s": cap_s, "seconds": t, "steps": steps,
            "reads": {k: {"count": len(v), "median_ms": statistics.median(v) * 1e3 if v else None,
                          "max_ms": max(v) * 1e3 if v else None} for k, v in reads.items()}}


async def floor(folder: str) -> dict[str, Any]:
    """One raw FULL transaction's cost now (to size the ``full`` run against the budget)."""
    import workloads_common

    return workloads_common.floor(folder, synchronous="FULL", count=200)


WORKLOADS: dict[str, Callable[..., Awaitable[dict[str, Any]]]] = {
    "build": build, "loads": loads, "lg_build": lg_build, "lg_reads": lg_reads,
    "stall": stall, "floor": floor}
