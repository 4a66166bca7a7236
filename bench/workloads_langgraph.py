"""The same workloads on LangGraph with AsyncSqliteSaver (durability="sync").

The state uses LangGraph's plain ``Annotated[list, operator.add]`` reducer
with dict messages: the cheapest way to append on their side (no
``add_messages`` id matching, no message classes to serialize).

The chain also runs with its message list through LangGraph's
``DeltaChannel`` (``chain(..., channel="delta")``), the same graph
otherwise: a checkpoint's blob then holds no message list, only every
``snapshot_frequency`` updates (its default, 100) a snapshot of it, and a
read rebuilds the list from that snapshot and the writes saved since.
LangGraph turns the message dicts written to a ``DeltaChannel`` into
``AIMessage`` objects with ids (``ensure_message_ids``), so that variant
stores and decodes message objects where the default one keeps dicts.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict

import aiosqlite
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send, interrupt
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

NAME = "LangGraph"
Channel = Literal["default", "delta"]
CHANNELS: tuple[Channel, ...] = ("default", "delta")


def append_all(state: list[dict[str, Any]],
               writes: Sequence[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """``operator.add`` over a batch of writes, as ``DeltaChannel`` calls its reducer."""
    return state + [m for w in writes for m in w]


class ChainState(TypedDict):
    messages: Annotated[list[dict[str, Any]], operator.add]
    count: Annotated[int, operator.add]


class DeltaChainState(TypedDict):
    """``ChainState`` with its message list through ``DeltaChannel`` (its defaults)."""

    messages: Annotated[list[dict[str, Any]], DeltaChannel(append_all)]
    count: Annotated[int, operator.add]


class FanState(TypedDict):
    messages: Annotated[list[dict[str, Any]], operator.add]
    count: Annotated[int, operator.add]
    rounds: Annotated[int, operator.add]


class MapState(TypedDict):
    items: list[int]
    messages: Annotated[list[dict[str, Any]], operator.add]
    count: Annotated[int, operator.add]
    rounds: Annotated[int, operator.add]


class AskState(TypedDict):
    approved: bool


def chain_graph(n: int, channel: Channel = "default") -> StateGraph:
    async def step(state: ChainState) -> dict[str, Any]:
        return {"messages": [{"role": "assistant", "content": CONTENT}], "count": 1}

    async def delta_step(state: DeltaChainState) -> dict[str, Any]:
        # the node's annotation is its input schema: it must name the same channels
        return {"messages": [{"role": "assistant", "content": CONTENT}], "count": 1}

    if channel == "delta":
        g = StateGraph(DeltaChainState)
        g.add_node("step", delta_step)
    else:
        g = StateGraph(ChainState)
        g.add_node("step", step)
    g.add_edge(START, "step")
    g.add_conditional_edges("step", lambda s: "step" if s["count"] < n else END, ["step", END])
    return g


def fanout_graph(rounds: int = FANOUT_ROUNDS, width: int = FANOUT_WIDTH) -> StateGraph:
    async def start(state: FanState) -> dict[str, Any]:
        return {}

    def branch(i: int) -> Any:
        async def fn(state: FanState) -> dict[str, Any]:
            return {"messages": [{"role": "assistant", "content": CONTENT, "name": f"b{i}"}],
                    "count": 1}
        return fn

    async def join(state: FanState) -> dict[str, Any]:
        return {"rounds": 1}

    g = StateGraph(FanState)
    g.add_node("start", start)
    names = [f"b{i}" for i in range(width)]
    for i, name in enumerate(names):
        g.add_node(name, branch(i))
        g.add_edge("start", name)
    g.add_node("join", join)
    g.add_edge(names, "join")
    g.add_edge(START, "start")
    g.add_conditional_edges("join", lambda s: "start" if s["rounds"] < rounds else END,
                            ["start", END])
    return g


def map_graph(rounds: int = MAP_ROUNDS) -> StateGraph:
    """split -> summarize (one Send per item) -> collect, ``rounds`` times."""
    async def split(state: MapState) -> dict[str, Any]:
        return {}

    async def summarize(arg: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [{"role": "assistant", "content": CONTENT,
                              "name": f"s{arg['item']}"}], "count": 1}

    async def collect(state: MapState) -> dict[str, Any]:
        return {"rounds": 1}

    g = StateGraph(MapState)
    g.add_node("split", split)
    g.add_node("summarize", summarize)
    g.add_node("collect", collect)
    g.add_edge(START, "split")
    g.add_conditional_edges("split", lambda s: [Send("summarize", {"item": i})
                                                for i in s["items"]], ["summarize"])
    g.add_edge("summarize", "collect")
    g.add_conditional_edges("collect", lambda s: "split" if s["rounds"] < rounds else END,
                            ["split", END])
    return g


def ask_graph() -> StateGraph:
    async def ask(state: AskState) -> dict[str, Any]:
        ok = interrupt({"question": "approve?"})
        return {"approved": bool(ok)}

    g = StateGraph(AskState)
    g.add_node("ask", ask)
    g.add_edge(START, "ask")
    g.add_edge("ask", END)
    return g


async def _saver(path: Path, synchronous: str = "FULL") -> tuple[aiosqlite.Connection,
                                                                   AsyncSqliteSaver]:
    conn = await aiosqlite.connect(str(path))
    await conn.execute(f"PRAGMA synchronous={synchronous}")
    saver = AsyncSqliteSaver(conn)
    await saver.setup()  # also sets journal_mode=WAL
    return conn, saver


async def _setup_size(path: Path) -> int:
    conn, _ = await _saver(path)
    await conn.close()
    return db_bytes(path)


async def _fresh(path: Path, graph: StateGraph, op: Any) -> float:
    """Time ``op(app, saver)`` on a new connection; connect/compile is not timed."""
    conn, saver = await _saver(path)
    try:
        app = graph.compile(checkpointer=saver)
        t, _ = await timed(lambda: op(app, saver))
        return t
    finally:
        await conn.close()


def _cfg(thread: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint_id:
        c["checkpoint_id"] = checkpoint_id
    return {"configurable": c}


async def _alist(saver: AsyncSqliteSaver, cfg: Any) -> list[Any]:
    return [c async for c in saver.alist(cfg)]


async def _history(app: Any, cfg: Any) -> list[Any]:
    return [s async for s in app.aget_state_history(cfg)]


async def _load_with_list(saver: AsyncSqliteSaver, cfg: Any, channel: Any) -> int:
    """``aget_tuple`` and, for a ``DeltaChannel``, its replay: the list a resume starts from.

    The delta variant's checkpoint blob holds no message list (only a
    snapshot every ``snapshot_frequency`` updates), so its ``aget_tuple``
    alone does not load it; the saver's ``aget_delta_channel_history`` walks
    back to the last snapshot and the channel replays the writes since.
    """
    tup = await saver.aget_tuple(cfg)
    assert tup is not None
    if not isinstance(channel, DeltaChannel):
        return len(tup.checkpoint["channel_values"]["messages"])
    history = (await saver.aget_delta_channel_history(config=tup.config,
                                                      channels=["messages"]))["messages"]
    loaded = channel.from_checkpoint(history.get("seed"))
    loaded.replay_writes(history["writes"])
    return len(loaded.get())


async def chain(folder: str, n: int, reads: int = 0,
                channel: Channel = "default") -> dict[str, Any]:
    """One node looping ``n`` times; ``channel`` picks the message list's channel."""
    path = Path(folder) / "lg.db"
    graph = chain_graph(n, channel)
    size0 = await _setup_size(path)
    rss0 = peak_rss_mb()
    conn, saver = await _saver(path)
    app = graph.compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "t1"}, "recursion_limit": n + 10}
    cpu0 = time.process_time()
    t, result = await timed(lambda: app.ainvoke({"messages": [], "count": 0}, cfg,
                                                 durability="sync"))
    cpu = time.process_time() - cpu0
    assert result["count"] == n and len(result["messages"]) == n
    pragmas = {}
    for k in ("synchronous", "journal_mode"):
        async with conn.execute(f"PRAGMA {k}") as cur:
            pragmas[k] = (await cur.fetchone())[0]
    await conn.close()
    out = chain_stats(n, t, cpu, size0, path, rss0, pragmas)
    out["channel"] = channel
    if reads:
        out.update(await _chain_reads(path, graph, n, reads, channel))
    return out


async def _chain_reads(path: Path, graph: StateGraph, n: int, reads: int,
                       channel: Channel) -> dict[str, Any]:
    """Reads of the head and the middle checkpoint (and the history), each on a fresh connection.

    ``load_head`` is the saver's ``aget_tuple``; the delta variant's also gets
    ``load_head_replay``, the tuple with its message list replayed, since its
    tuple alone holds no list.
    """
    # checkpoint ids, from the metadata column only (not timed)
    conn, saver = await _saver(path)
    async with conn.execute(
            "SELECT checkpoint_id, json_extract(metadata, '$.step') FROM checkpoints "
            "WHERE thread_id = 't1' AND checkpoint_ns = ''") as cur:
        with_steps = list(await cur.fetchall())
    await conn.close()
    head = max(with_steps)[0]
    # their checkpoint of step k holds k messages, as our superstep k does
    middle = next(cid for cid, step in with_steps if step == n // 2)
    spec = graph.compile().channels["messages"]
    samples: dict[str, list[float]] = {k: [] for k in
                                       ("head", "middle", "load_head", "load_middle",
                                        "history", "history_raw")}
    if channel == "delta":
        samples["load_head_replay"] = []
    for _ in range(reads):
        samples["head"].append(await _fresh(path, graph,
                                            lambda app, s: app.aget_state(_cfg("t1"))))
        samples["middle"].append(await _fresh(
            path, graph, lambda app, s: app.aget_state(_cfg("t1", middle))))
        samples["load_head"].append(await _fresh(
            path, graph, lambda app, s: s.aget_tuple(_cfg("t1", head))))
        samples["load_middle"].append(await _fresh(
            path, graph, lambda app, s: s.aget_tuple(_cfg("t1", middle))))
        if channel == "delta":
            samples["load_head_replay"].append(await _fresh(
                path, graph, lambda app, s: _load_with_list(s, _cfg("t1", head), spec)))
        # the delta variant's history rebuilds every checkpoint's list by replay
        # (about 19 s at N=1,000 here): one sample of it, not one per read
        if n <= 1000 and (channel == "default" or not samples["history"]):
            samples["history"].append(await _fresh(
                path, graph, lambda app, s: _history(app, _cfg("t1"))))
            samples["history_raw"].append(await _fresh(
                path, graph, lambda app, s: _alist(s, _cfg("t1"))))
    conn, saver = await _saver(path)
    app = graph.compile(checkpointer=saver)
    snap = await app.aget_state(_cfg("t1", middle))
    assert len(snap.values["messages"]) == n // 2, len(snap.values["messages"])
    loaded = await _load_with_list(saver, _cfg("t1", head), spec)
    assert loaded == n, loaded
    await conn.close()
    return {"reads": {k: min(v) for k, v in samples.items() if v}, "reads_all": samples}


async def fanout(folder: str) -> dict[str, Any]:
    path = Path(folder) / "lg.db"
    graph = fanout_graph()
    size0 = await _setup_size(path)
    conn, saver = await _saver(path)
    app = graph.compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "t1"}, "recursion_limit": 3 * FANOUT_ROUNDS + 10}
    t, result = await timed(lambda: app.ainvoke({"messages": [], "count": 0, "rounds": 0},
                                                cfg, durability="sync"))
    assert result["count"] == FANOUT_WIDTH * FANOUT_ROUNDS, result["count"]
    state = await app.aget_state(_cfg("t1"))
    supersteps = state.metadata["step"] + 1  # their steps start at 0 after the input (-1)
    await conn.close()
    return fanout_stats(t, supersteps, size0, path)


async def map_items(folder: str, items: int = MAP_ITEMS,
                    rounds: int = MAP_ROUNDS) -> dict[str, Any]:
    path = Path(folder) / "lg.db"
    graph = map_graph(rounds)
    size0 = await _setup_size(path)
    conn, saver = await _saver(path)
    app = graph.compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "t1"}, "recursion_limit": 3 * rounds + 10}
    t, result = await timed(lambda: app.ainvoke(
        {"items": list(range(items)), "messages": [], "count": 0, "rounds": 0}, cfg,
        durability="sync"))
    assert result["count"] == items * rounds, result["count"]
    assert len(result["messages"]) == items * rounds
    await conn.close()
    return map_stats(t, rounds, items, size0, path)


async def inbox_build(folder: str, runs: int = INBOX_RUNS) -> dict[str, Any]:
    """Setup only: ``runs`` threads stopped at an interrupt, with synchronous=NORMAL."""
    path = Path(folder) / "lg_inbox.db"
    t0 = time.perf_counter()
    conn, saver = await _saver(path, "NORMAL")
    app = ask_graph().compile(checkpointer=saver)
    for i in range(runs):
        r = await app.ainvoke({"approved": False}, _cfg(f"run-{i:05d}"), durability="sync")
        assert "__interrupt__" in r
    await conn.close()
    return {"build_s": time.perf_counter() - t0, "runs": runs}


async def _pending(app: Any, saver: AsyncSqliteSaver) -> list[tuple[str, Any]]:
    """LangGraph has no inbox: list the threads, read each head, keep its interrupts."""
    async with saver.conn.execute("SELECT DISTINCT thread_id FROM checkpoints") as cur:
        threads = [row[0] for row in await cur.fetchall()]
    out = []
    for thread in threads:
        snap = await app.aget_state(_cfg(thread))
        out.extend((thread, i) for i in snap.interrupts)
    return out


async def inbox(folder: str, rep: int, runs: int = INBOX_RUNS) -> dict[str, Any]:
    path = Path(folder) / "lg_inbox.db"
    graph = ask_graph()
    conn, saver = await _saver(path)
    app = graph.compile(checkpointer=saver)
    t_list, pending = await timed(lambda: _pending(app, saver))
    await conn.close()
    assert len(pending) >= runs - 10, len(pending)
    thread, _ = pending[rep]
    conn, saver = await _saver(path)
    app = graph.compile(checkpointer=saver)
    t_resume, r = await timed(lambda: app.ainvoke(Command(resume=True), _cfg(thread),
                                                   durability="sync"))
    assert r["approved"] is True
    await conn.close()
    return {"list_s": t_list, "pending": len(pending), "resume_s": t_resume}


WORKLOADS = {"chain": chain, "fanout": fanout, "map": map_items, "inbox_build": inbox_build,
             "inbox": inbox}
