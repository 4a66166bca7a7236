"""What ``scale.py`` runs inside its worker processes (one measurement each).

The workload is the chain of ``longrun_work.py`` (one node appending one
~200-byte ``Message`` a superstep, asking once at the end so the run ends
``waiting`` with its head at superstep N), on ``SqliteStore`` (a file in a
folder) or ``PostgresStore`` (a database the driver created). Every function
returns a JSON-able dict.
"""

from __future__ import annotations

import asyncio
import contextlib
import cProfile
import gc
import io
import json
import pstats
import sqlite3
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from longrun_work import (
    HOOKS,
    STOP_AT,
    TIMES,
    Sampler,
    _t,
    load_head,
    superstep_stats,
    timed,
    warm_resume,
    workflow,
)

from durable_flow import PostgresStore, RunStatus, Runtime, SqliteStore

DB = "scale.db"


def make_store(kind: str, where: str) -> Any:
    """``sqlite``: ``scale.db`` in folder ``where``; ``postgres``: the database at DSN ``where``."""
    if kind == "sqlite":
        return SqliteStore(str(Path(where) / DB), synchronous="normal")
    return PostgresStore(where, max_size=2)


class Bytes:
    """The size of the store: SQLite's used pages, or PostgreSQL's ``pg_database_size``."""

    def __init__(self, kind: str, where: str) -> None:
        self.kind, self.where = kind, where
        self.conn: Any = None

    async def __call__(self) -> int:
        if self.kind == "sqlite":
            if self.conn is None:
                self.conn = sqlite3.connect(f"file:{Path(self.where) / DB}?mode=ro", uri=True)
            # the database's pages as a reader sees them (the WAL's committed pages
            # included, its slack not): what the file holds once checkpointed
            pages = self.conn.execute("PRAGMA page_count").fetchone()[0]
            free = self.conn.execute("PRAGMA freelist_count").fetchone()[0]
            return int((pages - free) * self.conn.execute("PRAGMA page_size").fetchone()[0])
        if self.conn is None:
            import asyncpg

            self.conn = await asyncpg.connect(self.where)
        return int(await self.conn.fetchval("SELECT pg_database_size(current_database())"))

    async def close(self) -> None:
        if self.conn is not None:
            res = self.conn.close()
            if res is not None:
                await res


async def _one_value(kind: str, where: str, sql: str, *params: Any) -> Any:
    """The first column of the first row of ``sql`` (``{}`` marks each parameter), plain SQL."""
    if kind == "sqlite":
        conn = sqlite3.connect(f"file:{Path(where) / DB}?mode=ro", uri=True)
        try:
            return conn.execute(sql.format(*("?" * len(params))), params).fetchone()[0]
        finally:
            conn.close()
    import asyncpg

    pg = await asyncpg.connect(where)
    try:
        return await pg.fetchval(sql.format(*(f"${i + 1}" for i in range(len(params)))),
                                 *params)
    finally:
        await pg.close()


async def checkpoint_id_at(kind: str, where: str, run_id: str, superstep: int) -> str:
    """The id of the run's top-level checkpoint at ``superstep`` (to page from)."""
    return str(await _one_value(kind, where, "SELECT checkpoint_id FROM checkpoints WHERE "
                                "run_id = {} AND thread = '' AND seq = {}", run_id, superstep))


async def checkpoint_count(kind: str, where: str, run_id: str) -> int:
    """How many checkpoints the run has."""
    return int(await _one_value(kind, where, "SELECT count(*) FROM checkpoints WHERE "
                                "run_id = {}", run_id))


def profile_summary(prof: cProfile.Profile, lines: int = 12) -> str:
    """The functions with the most time of their own, as ``pstats`` prints them."""
    out = io.StringIO()
    try:
        stats = pstats.Stats(prof, stream=out)
    except TypeError:  # never enabled: the run was too short for the window
        return "(nothing recorded)"
    stats.strip_dirs().sort_stats("tottime").print_stats(lines)
    text = out.getvalue()
    return text[text.find("   ncalls"):].rstrip() if "   ncalls" in text else text.rstrip()


@contextlib.contextmanager
def full_collections() -> Iterator[list[tuple[int, float]]]:
    """Python's full (generation 2) garbage collections meanwhile: (superstep, ms) each.

    The superstep is the count of node starts so far (``TIMES``): a collection
    at ``k`` falls in the superstep ``superstep_stats`` reports at ``k``.
    """
    seen: list[tuple[int, float]] = []
    started = [0.0]

    def note(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        elif info["generation"] == 2:
            seen.append((len(TIMES), (time.perf_counter() - started[0]) * 1e3))

    gc.callbacks.append(note)
    try:
        yield seen
    finally:
        gc.callbacks.remove(note)


def collections_brief(seen: list[tuple[int, float]]) -> dict[str, Any]:
    """How many full collections, their total and longest time, and where the longest fell."""
    if not seen:
        return {"count": 0}
    at, worst = max(seen, key=lambda s: s[1])
    return {"count": len(seen), "total_ms": sum(ms for _, ms in seen), "worst_ms": worst,
            "worst_at": at, "all": seen[-50:]}


# --------------------------------------------------------------------------- workloads
async def build(kind: str, where: str, n: int, window: int, marks: list[int],
                budget_s: float | None = None, small: int = 1000) -> dict[str, Any]:
    """A ``small``-superstep run, then the long run to ``n`` (or to ``budget_s``), timed.

    Each superstep's cost is the difference of two neighbouring node starts
    (``longrun_work.TIMES``). The store's size is taken at every mark (and at
    the end), less its size before the long run began. The ``window``
    supersteps just after the first window and just before the last one are
    profiled (cProfile), so a miss of the flat-cost target can say where the
    time went without the profiler touching the timed windows.
    """
    size = Bytes(kind, where)
    async with Runtime(make_store(kind, where)) as rt:
        ref = await rt.run(workflow(small), {}, max_supersteps=small + 10)
        assert ref.status is RunStatus.WAITING, ref.error
        base = await size()
        sizes: list[dict[str, int]] = []
        profs = {"early": cProfile.Profile(), "late": cProfile.Profile()}
        late_at = n - 2 * window
        wanted = set(marks)

        async def hook(c: int) -> None:
            if c in wanted:
                sizes.append({"superstep": c, "bytes": await size() - base})
            if late_at < 2 * window:  # too short: the windows would overlap the timed ones
                return
            for name, start in (("early", window), ("late", late_at)):
                if c == start:
                    profs[name].enable()
                elif c == start + window:
                    profs[name].disable()

        HOOKS[:] = [hook]
        TIMES.clear()
        t0 = time.perf_counter()
        if budget_s is not None:
            STOP_AT[0] = t0 + budget_s
        cpu0 = time.process_time()
        with full_collections() as seen:
            result = await rt.run(workflow(n), {}, max_supersteps=n + 10)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        assert result.status is RunStatus.WAITING, (result.status, result.error)
        reached = result.state.count
        if not sizes or sizes[-1]["superstep"] != reached:
            sizes.append({"superstep": reached, "bytes": await size() - base})
    await size.close()
    return {"n": n, "reached": reached, "kind": kind, "run_id": result.run_id,
            "small_id": ref.run_id, "small": small, "seconds": wall, "cpu_s": cpu,
            "stopped_by_budget": reached < n, "budget_s": budget_s,
            "steps": superstep_stats(TIMES[:reached + 1], window), "sizes": sizes,
            "profiles": {k: profile_summary(p) for k, p in profs.items()},
            "gc": collections_brief(seen)}


async def reads(kind: str, where: str, run_id: str, small_id: str, n: int, small: int,
                reps: int, cap_s: float = 60.0) -> dict[str, Any]:
    """Head loads and history pages of the long run (``n``) and of the ``small`` run.

    Every sample runs on a new store object (opening it is not timed);
    ``get_state``, the engine loader, the first page and a page from the
    middle of each run are sampled interleaved.
    """
    heads: dict[str, str] = {}
    async with Runtime(make_store(kind, where)) as rt:
        for rid in (run_id, small_id):
            heads[rid] = (await rt.get_run(rid)).head_checkpoint_id or ""
    s = {"n": Sampler(reps, cap_s), "small": Sampler(reps, cap_s)}
    for label, rid, count in (("small", small_id, small), ("n", run_id, n)):
        head = heads[rid]
        middle = await checkpoint_id_at(kind, where, rid, count // 2)
        async with Runtime(make_store(kind, where)) as rt:
            page = await rt.history(rid, limit=50, before=middle)
        assert page and page[0].superstep < count // 2 + 2, [p.superstep for p in page[:3]]
        await s[label].take({
            "get_state": lambda rid=rid: _fresh(kind, where, rid, lambda rt: rt.get_state(rid)),
            "loader": lambda rid=rid, head=head: _fresh(
                kind, where, rid, lambda rt: load_head(rt.store, workflow(n), rid, head)),
            "page_first": lambda rid=rid: _fresh(kind, where, rid, lambda rt: rt.history(rid, limit=50)),
            "page_middle": lambda rid=rid, middle=middle: _fresh(
                kind, where, rid, lambda rt: rt.history(rid, limit=50, before=middle)),
        })
    return {"n": n, "small": small, "samples": {k: v.result() for k, v in s.items()}}


async def _fresh(kind: str, where: str, run_id: str,
                 op: Callable[[Runtime], Awaitable[Any]]) -> float:
    """``op`` timed on a new store object (opening it and reading the run's row not timed)."""
    async with Runtime(make_store(kind, where)) as rt:
        await rt.get_run(run_id)
        return await _t(op(rt))


async def finish(kind: str, where: str, run_id: str, small_id: str, n: int, small: int,
                 keep: int) -> dict[str, Any]:
    """``resume`` of both runs with their answer (one sample each), then ``prune`` of the long one.

    ``prune(run_id, keep_last=keep)`` on the long run (completed by its
    resume): its time, the checkpoints before and after, the head's state
    and the first history page after it.
    """
    await warm_resume()
    out: dict[str, Any] = {"n": n, "small": small, "resume": {}}
    for label, rid, count in (("small", small_id, small), ("n", run_id, n)):
        async with Runtime(make_store(kind, where)) as rt:
            snap = await rt.get_state(rid)
            req = snap.pending_requests[0].id
            t, r = await timed(lambda rt=rt, rid=rid, count=count, req=req: rt.resume(
                workflow(count), rid, responses={req: True}))
        assert r.status is RunStatus.COMPLETED and r.state.count == count, r.error
        out["resume"][label] = t
    before = await checkpoint_count(kind, where, run_id)
    async with Runtime(make_store(kind, where)) as rt:
        t, removed = await timed(lambda: rt.prune(run_id, keep_last=keep))
        snap = await rt.get_state(run_id)
        page = await rt.history(run_id, limit=50)
    out["prune"] = {"seconds": t, "keep": keep, "removed": removed, "before": before,
                    "after": await checkpoint_count(kind, where, run_id),
                    "head_superstep": snap.superstep, "messages": len(snap.values["messages"]),
                    "page_after": len(page)}
    return out


async def profile_read(kind: str, where: str, run_id: str, what: str, n: int) -> dict[str, Any]:
    """One ``get_state`` or engine load of the long run under cProfile: where its time goes."""
    async with Runtime(make_store(kind, where)) as rt:
        run = await rt.get_run(run_id)
        prof = cProfile.Profile()
        prof.enable()
        if what == "get_state":
            await rt.get_state(run_id)
        else:
            await load_head(rt.store, workflow(n), run_id, run.head_checkpoint_id or "")
        prof.disable()
    return {"what": what, "summary": profile_summary(prof)}


async def beside(kind: str, where: str, run_id: str, n: int, small: int, window: int,
                 reader: bool, cap_s: float, profile: bool = False,
                 freeze: bool = False) -> dict[str, Any]:
    """A ``small``-superstep run in the same store, alone or while another process reads the long run.

    The reader (``scale.py --reader``) loops: ``history(limit=50)`` pages walking
    back with ``before=``, then ``get_state`` of the long run, until told to stop.
    ``profile``: the small run under cProfile (its summary in ``profile``).
    ``freeze``: this process's heap frozen before the small run, as ``durable-flow
    worker`` freezes its start-up heap before serving.
    """
    prof = cProfile.Profile() if profile else None
    proc = None
    if reader:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(Path(__file__).with_name("scale.py")), "--reader",
            json.dumps({"kind": kind, "where": where, "run_id": run_id}),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        assert proc.stdout is not None
        ready = await proc.stdout.readline()
        assert ready.strip() == b"ready", ready
    wf = workflow(small, waiting=False)
    TIMES.clear()
    async with Runtime(make_store(kind, where)) as rt:
        await rt.get_run(run_id)
        if freeze:
            from durable_flow.cli._worker import freeze_startup_heap

            freeze_startup_heap()
        STOP_AT[0] = time.perf_counter() + cap_s
        if prof is not None:
            prof.enable()
        with full_collections() as seen:
            t, result = await timed(lambda: rt.run(wf, {}, max_supersteps=small + 10))
        if prof is not None:
            prof.disable()
    assert result.status is RunStatus.COMPLETED, result.error
    done: dict[str, Any] = {}
    if proc is not None:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(b"stop\n")
        await proc.stdin.drain()
        done = json.loads(await proc.stdout.readline())
        await asyncio.wait_for(proc.wait(), 120)
    reached = result.state.count
    return {"reader": reader, "freeze": freeze, "small": small, "reached": reached, "seconds": t,
            "steps": superstep_stats(TIMES[:reached + 1], window), "reads": done,
            "gc": collections_brief(seen),
            "profile": profile_summary(prof) if prof is not None else None}


async def read_loop(kind: str, where: str, run_id: str) -> None:
    """The reader of ``beside``: reads the long run until a line on stdin says stop."""
    stop = asyncio.Event()
    counts: dict[str, list[float]] = {"page": [], "get_state": []}

    def wait_stop() -> None:
        sys.stdin.readline()

    async with Runtime(make_store(kind, where)) as rt:
        await rt.history(run_id, limit=1)
        print("ready", flush=True)
        stopper = asyncio.ensure_future(asyncio.to_thread(wait_stop))
        stopper.add_done_callback(lambda _f: stop.set())
        before: str | None = None
        while not stop.is_set():
            for _ in range(10):
                t0 = time.perf_counter()
                page = await rt.history(run_id, limit=50, before=before)
                counts["page"].append(time.perf_counter() - t0)
                before = page[-1].id if len(page) == 50 else None
                if stop.is_set():
                    break
            if not stop.is_set():
                counts["get_state"].append(await _t(rt.get_state(run_id)))
    print(json.dumps({k: {"count": len(v), "median_ms": statistics.median(v) * 1e3 if v else None}
                      for k, v in counts.items()}), flush=True)


WORKLOADS: dict[str, Callable[..., Awaitable[dict[str, Any]]]] = {
    "build": build, "reads": reads, "finish": finish, "profile_read": profile_read,
    "beside": beside}
