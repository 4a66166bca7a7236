"""Log segments on every store: O(log n) rows per load, every checkpoint exact."""

from __future__ import annotations

import importlib.util
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from migrationkit import downgrade_sqlite

from durable_flow.store._protocols import CheckpointStore, Commit
from durable_flow.store._segments import FANOUT, join_arrays, merge_block, merge_rows
from durable_flow.store.memory._memory import MemoryStore
from durable_flow.store.sql._migrate import HEAD_REVISION
from durable_flow.store.sqlite._sqlite import SqliteStore

from .builders import start_run, state_of


def _digits(n: int) -> int:
    """How many base-FANOUT digits ``n`` has."""
    count = 0
    while n:
        n //= FANOUT
        count += 1
    return count


def row_bound(seq: int) -> int:
    """The most segment rows one channel may hold once the checkpoint ``seq`` committed."""
    return (FANOUT - 1) * _digits(seq + 1)


def _simulate(head: int) -> list[tuple[int, int]]:
    """The (first, last) seqs of the segments of one channel written at every seq."""
    rows: list[tuple[int, int]] = []
    for seq in range(head + 1):
        first = merge_block(seq)
        if first is not None:
            rows = [r for r in rows if r[0] < first] + [(first, seq)]
        else:
            rows.append((seq, seq))
    return rows


def test_segments_are_the_aligned_blocks_of_a_base_fanout_counter() -> None:
    for head in range(3 * FANOUT**3):
        rows = _simulate(head)
        # contiguous, covering every seq once, and no more rows than digits allow
        assert [r[0] for r in rows] == [0] + [r[1] + 1 for r in rows[:-1]]
        assert rows[-1][1] == head
        assert len(rows) <= row_bound(head)
        assert all((last - first + 1) in {FANOUT**k for k in range(5)} for first, last in rows)
    assert merge_block(FANOUT - 2) is None
    assert merge_block(FANOUT - 1) == 0
    assert merge_block(FANOUT**2 - 1) == 0
    assert merge_block(FANOUT**2 + FANOUT - 1) == FANOUT**2


def test_merge_rows_joins_each_channel_in_seq_order() -> None:
    rows = [("b", 3, b'["b3"]'), ("a", 2, b"[]"), ("a", 1, b'["a1",2]'), ("a", 3, b'["a3"]')]
    assert merge_rows(rows) == [("a", 1, b'["a1",2,"a3"]'), ("b", 3, b'["b3"]')]
    assert join_arrays([b"[]", b"[]"]) == b"[]"
    # a damaged row (not a JSON array) leaves the block as it is: the read reports it
    assert merge_rows([("a", 1, b'["x"]'), ("a", 2, b"7")]) is None


async def test_every_checkpoint_of_a_long_thread_loads_exactly_from_few_rows(
    store: CheckpointStore,
) -> None:
    chain, lease = await start_run(store, "r1")
    for i in range(1, 3 * FANOUT**2 + 5):
        appends: dict[str, list[object]] = {}
        if i % 5:
            appends["messages"] = [{"n": i}] * (i % 3)
        if i % 2:
            appends["history:a"] = [f"a{i}"]
        cp = chain.next(values={"count": i} if i % 4 == 0 else {}, appends=appends)
        await store.commit(Commit(lease, checkpoint=cp))
    heads = [m for m in chain.metas if m.seq in {
        0, 1, FANOUT - 2, FANOUT - 1, FANOUT, FANOUT**2 - 1, FANOUT**2, 2 * FANOUT**2 + 3}]
    for meta in [chain.head, *heads, *chain.metas[::11]]:
        loaded = await store.load_checkpoint("r1", meta.id)
        assert loaded.meta == meta
        assert state_of(loaded) == chain.expected[meta.id], meta.seq
        for channel, chunks in loaded.logs.items():
            assert len(chunks) <= row_bound(chain.head.seq), (channel, len(chunks))


async def test_a_sub_thread_merges_its_own_segments(store: CheckpointStore) -> None:
    chain, lease = await start_run(store, "r1")
    for i in range(FANOUT + 3):
        await store.commit(Commit(lease, checkpoint=chain.next(appends={"log": [i]})))
    sub = chain.sub("inner", at_index=3)
    for i in range(2 * FANOUT + 1):
        await store.commit(Commit(lease, checkpoint=sub.next(appends={"log": [f"s{i}"]})))
    for c in (chain, sub):
        for meta in c.metas:
            loaded = await store.load_checkpoint("r1", meta.id)
            assert state_of(loaded) == c.expected[meta.id]
    head = await store.load_checkpoint("r1", sub.head.id)
    assert len(head.logs["log"]) == 3  # two full blocks and the last chunk


LONG = 10_000


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_loading_the_head_of_a_10000_superstep_run_reads_o_log_n_rows(
    kind: str, tmp_path: Path,
) -> None:
    store: CheckpointStore = (MemoryStore() if kind == "memory"
                              else SqliteStore(tmp_path / "long.db", synchronous="normal"))
    await store.setup()
    try:
        chain, lease = await start_run(store, "long")
        for i in range(1, LONG + 1):
            cp = chain.next(appends={"messages": [f"m{i}"], "history:step": [i]},
                            values={"count": i} if i % 100 == 0 else {})
            await store.commit(Commit(lease, checkpoint=cp))
        head = await store.load_checkpoint("long", chain.head.id)
        rows = sum(len(chunks) for chunks in head.logs.values()) + len(head.values)
        # two channels of at most 7 segments per base-8 digit of 10,001 (5 digits), and
        # the values: one row each; one chunk per superstep would be 20,000 rows
        assert rows <= 2 * row_bound(LONG) + 2, rows
        assert state_of(head) == chain.expected[chain.head.id]
        middle = chain.metas[LONG // 2 + 1]
        loaded = await store.load_checkpoint("long", middle.id)
        assert sum(len(c) for c in loaded.logs.values()) <= 2 * row_bound(LONG)
        assert state_of(loaded) == chain.expected[middle.id]
        if kind == "sqlite":
            with sqlite3.connect(tmp_path / "long.db") as conn:
                stored = conn.execute("SELECT count(*) FROM log_chunks WHERE run_id = 'long'"
                                      ).fetchone()[0]
            assert stored <= 2 * row_bound(LONG)
    finally:
        await store.close()


async def test_a_damaged_chunk_is_not_merged_away(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "d.db", synchronous="normal")
    async with store:
        chain, lease = await start_run(store, "r1")
        for i in range(1, FANOUT - 1):
            await store.commit(Commit(lease, checkpoint=chain.next(appends={"log": [i]})))
        with sqlite3.connect(tmp_path / "d.db") as conn:
            conn.execute("UPDATE log_chunks SET data = x'37' WHERE seq = 3")
        # this commit completes the block: its damaged chunk stays, and so do the others
        await store.commit(Commit(lease, checkpoint=chain.next(appends={"log": [99]})))
        loaded = await store.load_checkpoint("r1", chain.head.id)
    assert loaded.logs["log"][2] == b"7"
    assert len(loaded.logs["log"]) == FANOUT - 1


def _migration() -> Any:
    path = Path(__file__).resolve().parents[2] / "migrations/versions/0005_log_segments.py"
    spec = importlib.util.spec_from_file_location("log_segments_0005", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_migration_groups_rows_into_the_blocks_commits_would_have_made() -> None:
    starts = _migration().block_starts
    for head in range(2 * FANOUT**3 + 5):
        assert starts(head) == [first for first, _ in _simulate(head)], head


async def test_upgrading_merges_the_chunks_written_before_segments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A database of one chunk per checkpoint (revision 0004) is merged on open, exactly."""
    db = tmp_path / "old.db"
    async with SqliteStore(db, synchronous="normal") as store:
        with monkeypatch.context() as m:  # the code before segments: never merges
            m.setattr("durable_flow.store.sql._shared.merge_block", lambda seq: None)
            chain, lease = await start_run(store, "old")
            for i in range(1, 2 * FANOUT**2 + 3):
                appends = {"log": [i, str(i)]} if i % 3 else {"log": [], "other": [i]}
                await store.commit(Commit(lease, checkpoint=chain.next(appends=appends)))
            sub = chain.sub("inner", at_index=5)
            for i in range(FANOUT + 1):
                await store.commit(Commit(lease, checkpoint=sub.next(appends={"log": [i]})))
    downgrade_sqlite(db, "0011")  # every migration since, by its own downgrade
    with sqlite3.connect(db) as conn:
        before = conn.execute("SELECT count(*) FROM log_chunks").fetchone()[0]
        conn.execute("UPDATE alembic_version SET version_num = '0004'")
        for column in ("claim_token", "start_attempts", "start_after"):  # added by 0006
            conn.execute(f"ALTER TABLE runs DROP COLUMN {column}")
        conn.execute("ALTER TABLE checkpoints DROP COLUMN parked")  # added by 0009
        conn.execute("ALTER TABLE requests DROP COLUMN parked")
        conn.execute("ALTER TABLE requests DROP COLUMN approval")  # added by 0008, with:
        for table in ("decisions", "notifications", "users"):
            conn.execute(f"DROP TABLE {table}")
        conn.execute("DROP TABLE stream_entries")  # added by 0007, with these columns
        for column in ("input_tokens", "output_tokens", "usd", "budget_tokens", "budget_usd"):
            conn.execute(f"ALTER TABLE runs DROP COLUMN {column}")
        conn.execute("ALTER TABLE checkpoints DROP COLUMN digests")  # added by 0011
    async with SqliteStore(db, synchronous="normal") as store:
        for c in (chain, sub):
            for meta in c.metas:
                loaded = await store.load_checkpoint("old", meta.id)
                assert state_of(loaded) == c.expected[meta.id], meta.seq
        head = await store.load_checkpoint("old", chain.head.id)
        assert len(head.logs["log"]) <= row_bound(chain.head.seq)
    with sqlite3.connect(db) as conn:
        after = conn.execute("SELECT count(*) FROM log_chunks").fetchone()[0]
        version = conn.execute("SELECT version_num FROM alembic_version").fetchone()[0]
    assert version == HEAD_REVISION
    assert before > 2 * FANOUT**2  # one row a chunk
    assert after < before // 4, (before, after)
