"""The workloads on durable-flow (SqliteStore).

Every function runs inside a fresh worker process started by ``run.py`` and
returns a JSON-able dict of measurements.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

from workloads_common import (
    CONTENT,
    FANOUT_ROUNDS,
    FANOUT_WIDTH,
    INBOX_RUNS,
    MAP_ITEMS,
    MAP_ROUNDS,
    chain_stats,
    db_bytes,
    fanout_stats,
    map_stats,
    peak_rss_mb,
    timed,
)

from durable_flow import (
    Blackboard,
    Command,
    MemoryStore,
    Message,
    RunStatus,
    Runtime,
    Send,
    WorkflowBuilder,
    add,
)
from durable_flow.engine._loop import RunContext, ThreadRunner
from durable_flow.model._clock import utcnow
from durable_flow.store._protocols import Lease

try:  # the public name once the store is exported
    from durable_flow import SqliteStore  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - before the export lands
    from durable_flow.store.sqlite._sqlite import SqliteStore

NAME = "durable-flow"


class ChainState(Blackboard):
    count: Annotated[int, add] = 0


class FanState(Blackboard):
    count: Annotated[int, add] = 0
    rounds: Annotated[int, add] = 0


class MapState(Blackboard):
    items: list[int] = []
    count: Annotated[int, add] = 0
    rounds: Annotated[int, add] = 0


class AskState(Blackboard):
    approved: bool = False


def chain_workflow(n: int) -> Any:
    b = WorkflowBuilder("bench_chain", state=ChainState)

    async def step(state: ChainState, ctx: Any) -> dict[str, Any]:
        return {"messages": [Message(role="assistant", content=CONTENT)], "count": 1}

    b.add_node("step", step)
    b.set_entry("step")
    b.add_edge("step", "step", when=lambda s: s.count < n)
    return b.build()


def fanout_workflow(rounds: int = FANOUT_ROUNDS, width: int = FANOUT_WIDTH) -> Any:
    b = WorkflowBuilder("bench_fanout", state=FanState)

    async def start(state: FanState, ctx: Any) -> None:
        return None

    def branch(i: int) -> Any:
        async def fn(state: FanState, ctx: Any) -> dict[str, Any]:
            return {"messages": [Message(role="assistant", content=CONTENT, name=f"b{i}")],
                    "count": 1}
        return fn

    async def join(state: FanState, ctx: Any) -> dict[str, Any]:
        return {"rounds": 1}

    b.add_node("start", start)
    names = [f"b{i}" for i in range(width)]
    for i, name in enumerate(names):
        b.add_node(name, branch(i))
        b.add_edge("start", name)
    b.add_node("join", join)
    b.add_fan_in(names, "join")
    b.add_edge("join", "start", when=lambda s: s.rounds < rounds)
    b.set_entry("start")
    return b.build()


def map_workflow(rounds: int = MAP_ROUNDS) -> Any:
    """split -> summarize[i] (one Send per item) -> collect, ``rounds`` times."""
    b = WorkflowBuilder("bench_map", state=MapState)

    async def split(state: MapState, ctx: Any) -> Command:
        return Command(goto=[Send("summarize", i) for i in state.items])

    async def summarize(state: MapState, ctx: Any) -> dict[str, Any]:
        return {"messages": [Message(role="assistant", content=CONTENT, name=f"s{ctx.arg}")],
                "count": 1}

    async def collect(state: MapState, ctx: Any) -> dict[str, Any]:
        return {"rounds": 1}

    b.add_node("split", split, goto=["summarize"])
    b.add_node("summarize", summarize, arg_type=int)
    b.add_node("collect", collect)
    b.add_edge("summarize", "collect")
    b.add_edge("collect", "split", when=lambda s: s.rounds < rounds)
    b.set_entry("split")
    return b.build()


def ask_workflow() -> Any:
    b = WorkflowBuilder("bench_ask", state=AskState)

    async def ask(state: AskState, ctx: Any) -> dict[str, Any]:
        ok = await ctx.request({"question": "approve?"}, response_type=bool)
        return {"approved": ok}

    b.add_node("ask", ask)
    b.set_entry("ask")
    return b.build()


def _store(path: Path, synchronous: str = "full") -> Any:
    return SqliteStore(str(path), synchronous=synchronous)


async def _setup_size(path: Path) -> int:
    async with Runtime(_store(path)):
        pass
    return db_bytes(path)


async def _loader(path: Path, wf: Any, run_id: str, checkpoint_id: str) -> float:
    """Engine-internal load (store.load_checkpoint + typed decode) on a fresh store."""
    store = _store(path)
    await store.setup()
    try:
        rc = RunContext(store, Lease(run_id, "", 0, utcnow()), wf.name, lambda e: None)
        runner = ThreadRunner(rc, wf)
        t, state = await timed(lambda: runner.load(checkpoint_id))
        assert state.meta.id == checkpoint_id
        return t
    finally:
        await store.close()


async def _fresh(path: Path, op: Any) -> float:
    """Time ``op(rt)`` on a new store object (new connection); setup is not timed."""
    async with Runtime(_store(path)) as rt:
        t, _ = await timed(lambda: op(rt))
        return t


async def chain(folder: str, n: int, reads: int = 0, profile_run: bool = True) -> dict[str, Any]:
    path = Path(folder) / "ours.db"
    wf = chain_workflow(n)
    size0 = await _setup_size(path)
    rss0 = peak_rss_mb()
    async with Runtime(_store(path)) as rt:
        cpu0 = time.process_time()
        t, result = await timed(lambda: rt.run(wf, {}, max_supersteps=n + 10),
                                profile=profile_run)
        cpu = time.process_time() - cpu0
        assert result.status is RunStatus.COMPLETED, result.error
        assert result.state.count == n and len(result.state.messages) == n
        pragmas = {k: await rt.store._pragma(k) for k in ("synchronous", "journal_mode")}
    out = chain_stats(n, t, cpu, size0, path, rss0, pragmas)
    if reads:
        run_id = result.run_id
        async with Runtime(_store(path)) as rt:
            infos = await rt.history(run_id)
        head = infos[0].id
        middle = next(i.id for i in infos if i.superstep == n // 2)
        samples: dict[str, list[float]] = {k: [] for k in
                                           ("head", "middle", "load_head", "load_middle",
                                            "history")}
        for _ in range(reads):
            samples["head"].append(await _fresh(path, lambda rt: rt.get_state(run_id)))
            samples["middle"].append(await _fresh(path, lambda rt: rt.get_state(run_id, middle)))
            samples["load_head"].append(await _loader(path, wf, run_id, head))
            samples["load_middle"].append(await _loader(path, wf, run_id, middle))
            samples["history"].append(await _fresh(path, lambda rt: rt.history(run_id)))
        async with Runtime(_store(path)) as rt:
            snap = await rt.get_state(run_id, middle)
            assert len(snap.values["messages"]) == n // 2, len(snap.values["messages"])
            assert len(await rt.history(run_id)) == n + 1
        out["reads"] = {k: min(v) for k, v in samples.items()}
        out["reads_all"] = samples
    return out


async def fanout(folder: str) -> dict[str, Any]:
    path = Path(folder) / "ours.db"
    wf = fanout_workflow()
    size0 = await _setup_size(path)
    async with Runtime(_store(path)) as rt:
        t, result = await timed(lambda: rt.run(wf, {}, max_supersteps=3 * FANOUT_ROUNDS + 10))
        assert result.status is RunStatus.COMPLETED, result.error
        assert result.state.count == FANOUT_WIDTH * FANOUT_ROUNDS, result.state.count
        infos = await rt.history(result.run_id)
    supersteps = max(i.superstep for i in infos)
    return fanout_stats(t, supersteps, size0, path)


async def map_items(folder: str, items: int = MAP_ITEMS,
                    rounds: int = MAP_ROUNDS) -> dict[str, Any]:
    path = Path(folder) / "ours.db"
    wf = map_workflow(rounds)
    size0 = await _setup_size(path)
    async with Runtime(_store(path)) as rt:
        t, result = await timed(lambda: rt.run(wf, {"items": list(range(items))},
                                               max_supersteps=3 * rounds + 10))
        assert result.status is RunStatus.COMPLETED, result.error
        assert result.state.count == items * rounds, result.state.count
        assert len(result.state.messages) == items * rounds
    return map_stats(t, rounds, items, size0, path)


async def inbox_build(folder: str, runs: int = INBOX_RUNS) -> dict[str, Any]:
    """Setup only: ``runs`` waiting runs, written with synchronous=NORMAL to be quick."""
    path = Path(folder) / "ours_inbox.db"
    wf = ask_workflow()
    t0 = time.perf_counter()
    async with Runtime(_store(path, "normal")) as rt:
        for _ in range(runs):
            r = await rt.run(wf, {})
            assert r.status is RunStatus.WAITING
    return {"build_s": time.perf_counter() - t0, "runs": runs}


async def inbox(folder: str, rep: int, runs: int = INBOX_RUNS) -> dict[str, Any]:
    """Time the inbox listing and one answer + resume, each on a fresh store."""
    path = Path(folder) / "ours_inbox.db"
    wf = ask_workflow()
    async with Runtime(_store(path)) as rt:
        t_list, pending = await timed(lambda: rt.pending_requests())
    assert len(pending) >= runs - 10, len(pending)
    req = pending[rep]  # each repetition answers a different run
    async with Runtime(_store(path)) as rt:
        t_resume, r = await timed(lambda: rt.resume(wf, req.run_id, responses={req.id: True}))
    assert r.status is RunStatus.COMPLETED and r.state.approved
    return {"list_s": t_list, "pending": len(pending), "resume_s": t_resume}


async def decompose(folder: str, n: int) -> dict[str, Any]:
    """The chain run on MemoryStore, then SqliteStore normal and full: where the time goes."""
    out: dict[str, Any] = {}
    wf = chain_workflow(n)
    for kind in ("memory", "normal", "full"):
        path = Path(folder) / f"decompose-{kind}.db"
        store = MemoryStore() if kind == "memory" else _store(path, kind)
        async with Runtime(store) as rt:
            cpu0 = time.process_time()
            t, result = await timed(lambda rt=rt: rt.run(wf, {}, max_supersteps=n + 10))
            cpu = time.process_time() - cpu0
            assert result.status is RunStatus.COMPLETED, result.error
        out[kind] = {"s_per_superstep": t / n, "cpu_per_superstep": cpu / n}
    return out


WORKLOADS = {"decompose": decompose, "chain": chain, "fanout": fanout, "map": map_items,
             "inbox_build": inbox_build, "inbox": inbox}
