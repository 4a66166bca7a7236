"""Loading a head: trusted through digests, typed only where read, in pieces."""

from __future__ import annotations

import asyncio
import gc
import itertools
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from durable_flow import (
    Blackboard,
    CheckpointCorruptedError,
    Message,
    RunStatus,
    Runtime,
    SqliteStore,
    WorkflowBuilder,
)
from durable_flow.engine import _lazy, _state
from durable_flow.engine._lazy import LazyLog

VALIDATED: list[int] = []


class Chat(Blackboard):
    count: int = 0
    limit: int = 0
    seen: int = -1


def chain(read_history: bool = False) -> Any:
    b = WorkflowBuilder("lazy-loads", state=Chat)

    @b.node()
    async def step(state: Chat, ctx: Any) -> dict[str, Any]:
        if state.count >= state.limit:
            if read_history:
                history = ctx.history
                assert all(type(m) is Message for m in history)
                return {"seen": len(history), "count": state.count + 1}
            ok = await ctx.request({"q": "go on?"}, response_type=bool)
            return {"count": state.count + 1 if ok else state.count}
        said = Message.assistant(f"m{state.count}", tool_calls=[
            {"id": f"c{state.count}", "name": "f", "arguments": {"n": state.count}}],
            metadata={"n": state.count})
        return {"messages": [said], "count": state.count + 1}

    b.set_entry("step")
    b.add_edge("step", "step", when=lambda s: s.count <= s.limit)
    return b.build()


def counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many messages each build of a log or history made (``messages_of``)."""
    seen: list[int] = []
    original = _state.messages_of

    def counted(*args: Any) -> list[Message]:
        out = original(*args)
        seen.append(len(out))
        return out

    monkeypatch.setattr(_state, "messages_of", counted)
    return seen


def live_messages() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, Message))


async def test_a_resumed_head_types_only_what_the_next_task_reads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "lazy.db"
    async with Runtime(SqliteStore(db, synchronous="normal")) as rt:
        first = await rt.run(chain(), {"limit": 300}, max_supersteps=400)
        assert first.status is RunStatus.WAITING
        head = (await rt.get_run(first.run_id)).head_checkpoint_id
    seen = counting(monkeypatch)
    from durable_flow.engine._loop import RunContext, ThreadRunner
    from durable_flow.store._protocols import Lease
    async with Runtime(SqliteStore(db)) as rt:
        runner = ThreadRunner(RunContext(rt.store, Lease(first.run_id, "", 0, None), "w",
                                         lambda e: None), chain())  # type: ignore[arg-type]
        before = live_messages()
        state = await runner.load(head)
        # nothing is built: the log and the history wait to be read
        assert seen == [] and live_messages() == before
        log, history = state.values["messages"], state.histories["step"]
        assert type(log) is LazyLog and not log.built and len(log) == 300
        assert type(history) is LazyLog and not history.built and len(history) == 300
        snapshot = state.node_view(runner.schema)
        assert snapshot.count == 300 and seen == [] and live_messages() == before
        # read, the log is built once, nested models included
        assert snapshot.messages[-1].content == "m299" and seen == [300]
        assert live_messages() == before + 300
        assert snapshot.messages[5].tool_calls[0].arguments == {"n": 5}
        assert snapshot.messages[5] == Message.assistant("m5", tool_calls=[
            {"id": "c5", "name": "f", "arguments": {"n": 5}}], metadata={"n": 5})
        assert state.node_view(runner.schema).messages is snapshot.messages
        # the history refers to the log: it shares the log's messages
        assert history[299] is snapshot.messages[299] and live_messages() == before + 300
    seen.clear()
    async with Runtime(SqliteStore(db)) as rt:
        # resumed, the node reads its history only: 300 messages built, the log not typed
        done = await resume(rt, chain(read_history=True), first.run_id)
        assert done.status is RunStatus.COMPLETED and done.state.seen == 300, done.error
        assert seen == [300]  # its history only: the log was never typed
        assert [m.content for m in done.state.messages] == [f"m{i}" for i in range(300)]


async def resume(rt: Runtime, workflow: Any, run_id: str) -> Any:
    """Answer the run's open request and continue it."""
    (pending,) = [p for p in await rt.pending_requests() if p.run_id == run_id]
    return await rt.resume(workflow, run_id, responses={pending.id: True})


def _edit(db: Path, sql: str, *args: Any) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute(sql, args)


@pytest.mark.parametrize("table", ["log_chunks", "channel_values"])
async def test_an_edited_byte_is_damage_on_resume_and_get_state(tmp_path: Path, table: str) -> None:
    """A byte changed so the row still validates is caught by the digest alone."""
    db = tmp_path / "edit.db"
    async with Runtime(SqliteStore(db, synchronous="normal")) as rt:
        first = await rt.run(chain(), {"limit": 20}, max_supersteps=40)
        assert first.status is RunStatus.WAITING
    if table == "log_chunks":  # one message's text in a merged segment: still a valid message
        _edit(db, "UPDATE log_chunks SET data = CAST(replace(CAST(data AS TEXT), '\"m3\"', "
                  "'\"mX\"') AS BLOB) WHERE channel = 'messages' AND seq = 0")
    else:  # the limit, still an int
        _edit(db, "UPDATE channel_values SET data = CAST('21' AS BLOB) WHERE channel = 'limit'")
    async with Runtime(SqliteStore(db)) as rt:
        with pytest.raises(CheckpointCorruptedError, match="digest"):
            await rt.get_state(first.run_id)
        with pytest.raises(CheckpointCorruptedError, match="digest"):
            await resume(rt, chain(), first.run_id)
        assert (await rt.get_run(first.run_id)).status is RunStatus.WAITING


async def test_rows_without_digests_are_validated_as_before(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    async with Runtime(SqliteStore(db, synchronous="normal")) as rt:
        first = await rt.run(chain(), {"limit": 10}, max_supersteps=40)
        second = await rt.run(chain(), {"limit": 10}, max_supersteps=40)
    _edit(db, "UPDATE checkpoints SET digests = NULL, row_digest = NULL")  # rows of before
    async with Runtime(SqliteStore(db)) as rt:
        snap = await rt.get_state(first.run_id)
        assert snap.values["messages"][-1]["content"] == "m9"
        done = await resume(rt, chain(read_history=True), first.run_id)
        assert done.status is RunStatus.COMPLETED and done.state.seen == 10
    _edit(db, "UPDATE log_chunks SET data = CAST('[{\"role\": 5}]' AS BLOB) "
              "WHERE channel = 'messages' AND seq = 0 AND run_id = ?", second.run_id)
    async with Runtime(SqliteStore(db)) as rt:
        with pytest.raises(CheckpointCorruptedError):
            await resume(rt, chain(), second.run_id)


async def test_reading_a_long_run_lets_other_tasks_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Other tasks on the loop run between the pieces of a long run's ``get_state``.

    A ticker that takes every turn the loop gives it stands for the other
    runs' supersteps: a read that held the loop from its first piece to its
    last would leave no tick between its pieces (the count does not depend on
    how fast the machine is).
    """
    db = tmp_path / "big.db"
    async with Runtime(SqliteStore(db, synchronous="normal")) as rt:
        big = await rt.run(chain(), {"limit": 2000}, max_supersteps=2100)
        events: list[str] = []
        decode = _lazy.decode

        def piece(data: Any) -> Any:
            events.append("piece")
            return decode(data)

        monkeypatch.setattr(_lazy, "decode", piece)
        stop = asyncio.Event()

        async def ticker() -> None:
            while not stop.is_set():
                events.append("tick")
                await asyncio.sleep(0)

        ticking = asyncio.create_task(ticker())
        reads = 3
        for _ in range(reads):
            events.append("read")
            snap = await rt.get_state(big.run_id)
        stop.set()
        await ticking
    assert len(snap.node_histories["step"]) == 2000
    assert snap.values["messages"][1999]["content"] == "m1999"
    # each read decodes its rows one at a time, the ticker running in between
    cuts = [i for i, e in enumerate(events) if e == "piece"]
    within = [events[a:b] for a, b in itertools.pairwise(cuts) if "read" not in events[a:b]]
    assert len(within) >= reads, len(cuts)  # several pieces a read
    assert sum("tick" in gap for gap in within) >= reads, (reads, len(cuts))


def test_a_field_left_out_until_read_behaves_as_the_built_one() -> None:
    """Every way of reading a snapshot sees a lazy log as the built value."""
    import copy

    from durable_flow.model._blackboard import schema_for
    from durable_flow.model._frozen import freeze
    from durable_flow.model._paths import resolve_path

    said = [Message.user(f"q{i}") for i in range(3)]
    schema = schema_for(Chat)
    plain = schema.build(freeze({"count": 3, "limit": 0, "seen": -1, "messages": said}))

    def lazy() -> Any:
        log = LazyLog(lambda: list(said), 3)
        return schema.build({"count": 3, "limit": 0, "seen": -1, "messages": log}), log

    for read in (lambda b: b.model_dump(), lambda b: b.model_dump_json(), repr, list,
                 lambda b: b == plain, lambda b: copy.copy(b), lambda b: copy.deepcopy(b),
                 lambda b: b.model_copy(), lambda b: resolve_path(b, "messages.2.content"),
                 lambda b: b.messages, freeze):
        board, log = lazy()
        assert not log.built and board.count == 3 and not log.built
        assert read(board) == read(plain), read
        assert log.built, read
    board, _log = lazy()
    assert board.model_fields_set == plain.model_fields_set
    assert plain == board and board.messages is board.messages


def test_a_log_digest_checks_every_prefix_chunked_or_merged() -> None:
    """A checkpoint's digest fits its chunks and any segment merged from them; a byte changed does not."""
    import random

    from durable_flow.engine._lazy import _log_matches, extend_digest

    rng = random.Random(7)
    for _ in range(500):
        chunks: list[bytes] = []
        digests = []
        digest = None
        for _ in range(rng.randint(1, 6)):
            items = [b'"%d"' % rng.randint(0, 999) for _ in range(rng.randint(0, 3))]
            chunks.append(b"[" + b",".join(items) + b"]")
            digest = extend_digest(digest, chunks[-1])
            digests.append(digest)
        segment = b"[" + b",".join(c[1:-1] for c in chunks if len(c) > 2) + b"]"
        for d in digests:  # every checkpoint of the block, before and after the merge
            assert _log_matches(chunks, *d) and _log_matches([segment], *d)
        if digests[-1][1]:
            spoiled = bytearray(segment)
            at = rng.randrange(1, len(spoiled) - 1)
            spoiled[at] ^= 0x01
            assert not _log_matches([bytes(spoiled)], *digests[-1])


async def test_a_fork_is_trusted_like_the_run_it_copies(tmp_path: Path) -> None:
    """A fork's self-contained copy carries digests of what it wrote, and loads lazily."""
    db = tmp_path / "fork.db"
    async with Runtime(SqliteStore(db, synchronous="normal")) as rt:
        first = await rt.run(chain(), {"limit": 30}, max_supersteps=40)
        head = (await rt.get_run(first.run_id)).head_checkpoint_id
        forked = await rt.fork(chain(), first.run_id, head)
        assert forked.status is RunStatus.WAITING
        metas = await rt.store.list_checkpoints(forked.run_id)
        assert metas and all(m.digests for m in metas)
        from durable_flow.engine._loop import RunContext, ThreadRunner
        from durable_flow.store._protocols import Lease
        runner = ThreadRunner(RunContext(rt.store, Lease(forked.run_id, "", 0, None), "w",
                                         lambda e: None), chain())  # type: ignore[arg-type]
        state = await runner.load(metas[0].id)
        assert type(state.values["messages"]) is LazyLog
        assert [m.content for m in state.values["messages"]] == [f"m{i}" for i in range(30)]
        done = await resume(rt, chain(read_history=True), forked.run_id)
        assert done.status is RunStatus.COMPLETED and done.state.seen == 30
