"""A PostgreSQL superstep commit, and a limit grant, are one round trip, counted on the wire."""

from __future__ import annotations

from itertools import pairwise
from typing import Annotated, Any

import asyncpg
import pytest
from netproxy import NetProxy
from pgdb import empty_tables

from durable_flow import END, Blackboard, Message, RunStatus, Runtime, WorkflowBuilder, append
from durable_flow.store._flow_protocols import LimitUse
from durable_flow.store._protocols import Commit, RunUpdate
from durable_flow.store._segments import merge_block
from durable_flow.store.postgres import _advance as _pg_advance
from durable_flow.store.postgres._postgres import PostgresStore
from durable_flow.store.sql import _flow

from .builders import start_run


class Count(Blackboard):
    count: int = 0
    limit: int = 0
    notes: list[str] = []
    log: Annotated[list[str], append] = []


def chain(proxy: NetProxy | None, seen: list[int]) -> Any:
    b = WorkflowBuilder("round-trips", state=Count)

    @b.node()
    def step(state: Count) -> dict[str, Any]:
        if proxy is not None:
            seen.append(proxy.turns)  # the turns on the wire as this superstep starts
        return {"count": state.count + 1, "notes": [*state.notes[-2:], f"n{state.count}"],
                "log": [f"n{state.count}"], "messages": [Message.assistant(f"m{state.count}")]}

    b.set_entry("step")
    b.add_switch("step", [("count < limit", "step")], default=END)
    return b.build()


async def test_a_superstep_commit_is_one_round_trip(pg_dsn: str) -> None:
    async with NetProxy() as proxy:
        store = PostgresStore(proxy.dsn(pg_dsn), min_size=1, max_size=1)
        async with Runtime(store) as rt:
            seen: list[int] = []
            result = await rt.run(chain(proxy, seen), {"limit": 40}, max_supersteps=41)
            assert result.status is RunStatus.COMPLETED, result.error
    # between two supersteps: the commit of the first one (checkpoint seq k + 1); the
    # first use of each statement also prepares it (checkpoint 1, and 7: the first merge)
    per_commit = {k + 1: b - a for k, (a, b) in enumerate(pairwise(seen))}
    assert len(per_commit) == 39
    merging = [seq for seq in per_commit if merge_block(seq) is not None]
    assert merging == [7, 15, 23, 31, 39]  # each of these merges a block of log chunks
    # (the first superstep's also reads what a run's start reads)
    assert {seq: n for seq, n in per_commit.items() if n != 1 and seq > 1} == {7: 2}, per_commit


async def _chunks(dsn: str, run_id: str) -> list[tuple[str, int, bytes]]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT channel, seq, data FROM log_chunks WHERE run_id = $1 "
                                "ORDER BY channel, seq", run_id)
    finally:
        await conn.close()
    return [(r["channel"], r["seq"], bytes(r["data"])) for r in rows]


async def test_one_statement_writes_and_merges_the_rows_the_transaction_writes(
        pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    async with PostgresStore(pg_dsn, max_size=2) as store, Runtime(store) as rt:
        await empty_tables(pg_dsn)
        fast = await rt.run(chain(None, []), {"limit": 70}, run_id="fast", max_supersteps=71)
        with monkeypatch.context() as m:
            m.setattr(_pg_advance, "plain_advance", lambda commit: False)
            usual = await rt.run(chain(None, []), {"limit": 70}, run_id="usual",
                                 max_supersteps=71)
        for result in (fast, usual):
            assert result.status is RunStatus.COMPLETED, result.error
            assert list(result.state.log) == [f"n{i}" for i in range(70)]
        fast_rows = await _chunks(pg_dsn, "fast")
        assert fast_rows == await _chunks(pg_dsn, "usual")
        assert len(fast_rows) < 40  # merged: 8 blocks of 8 (and one of 64) collapsed
        for cp in await rt.history("fast", limit=100):
            snap = await rt.get_state("fast", cp.id)
            assert snap.values["log"] == [f"n{i}" for i in range(cp.superstep)]
            assert [m.content for m in snap.node_histories.get("step", [])] == [
                f"m{i}" for i in range(cp.superstep)]


@pytest.mark.parametrize("committed", [True, False])
async def test_a_statement_whose_outcome_is_unknown_is_decided_by_the_transaction(
        pg_dsn: str, monkeypatch: pytest.MonkeyPatch, committed: bool) -> None:
    # the connection lost with the statement in flight: it committed, or it never arrived
    real = _pg_advance.advance
    unknown: list[str] = []

    async def advance(pool: Any, lost: Any, stmt: Any, commit: Any) -> Any:
        if committed:
            assert await real(pool, lost, stmt, commit) is True
        unknown.append(commit.checkpoint.meta.id)
        return _pg_advance.UNKNOWN

    monkeypatch.setattr(_pg_advance, "advance", advance)
    async with PostgresStore(pg_dsn, max_size=2) as store, Runtime(store) as rt:
        await empty_tables(pg_dsn)
        result = await rt.run(chain(None, []), {"limit": 12}, max_supersteps=13)
        assert result.status is RunStatus.COMPLETED, result.error
        history = await rt.history(result.run_id)
        assert [c.superstep for c in history] == list(range(12, -1, -1))  # each once
        assert result.checkpoint_id == history[0].id
        assert (await rt.get_state(result.run_id)).values["notes"] == ["n9", "n10", "n11"]
    assert len(unknown) >= 9


async def test_a_block_holding_a_damaged_chunk_is_left_as_it_is(
        pg: PostgresStore, pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # as the transaction leaves it (merge_rows: None): a read still reports the damage
    async def scenario(run_id: str) -> list[tuple[str, int, bytes]]:
        chain, lease = await start_run(pg, run_id)
        for n in range(1, 8):
            if n == 7:  # the commit that completes the block 0-7
                conn = await asyncpg.connect(pg_dsn)
                try:
                    await conn.execute("UPDATE log_chunks SET data = 'not json'::bytea "
                                       "WHERE run_id = $1 AND seq = 3", run_id)
                finally:
                    await conn.close()
            base = chain.head.id
            cp = chain.next(appends={"log": [n]})
            await pg.commit(Commit(lease, extends=base, checkpoint=cp, run=RunUpdate(
                RunStatus.RUNNING, head_checkpoint_id=cp.meta.id)))
        return await _chunks(pg_dsn, run_id)

    fast = await scenario("fast")
    monkeypatch.setattr(_pg_advance, "plain_advance", lambda commit: False)
    assert fast == await scenario("usual")
    assert [seq for _, seq, _ in fast] == list(range(1, 8))  # nothing merged
    assert (fast[2][1], fast[2][2]) == (3, b"not json")


async def _turns(proxy: NetProxy, call: Any) -> tuple[int, Any]:
    before = proxy.turns
    value = await call
    return proxy.turns - before, value


@pytest.mark.parametrize("prune", [False, True])
async def test_a_grant_its_renewal_and_its_release_are_one_round_trip_each(
        pg_dsn: str, monkeypatch: pytest.MonkeyPatch, prune: bool) -> None:
    monkeypatch.setattr(_flow, "PRUNE_CHANCE", 1.0 if prune else 0.0)
    await empty_tables(pg_dsn)
    async with NetProxy() as proxy:
        store = PostgresStore(proxy.dsn(pg_dsn), min_size=1, max_size=1)
        async with store:
            def ask(grant_id: str) -> Any:
                return store.request_grant(grant_id, "api", run_id="r", task="t", owner="o",
                                           ttl=30, concurrency=1, per_second=None,
                                           per_minute=100.0)

            # the first use of each statement prepares it (and creates the limit's row)
            assert (await ask("warm")).granted
            await store.renew_grant("warm", 30)
            await store.release_grant("warm", "api")
            # the steady state: a free slot
            turns, decision = await _turns(proxy, ask("g1"))
            assert (turns, decision.granted, decision.use) == (1, True, LimitUse("api", 1, 0))
            assert await _turns(proxy, store.renew_grant("g1", 30)) == (1, True)
            # a request that waits is decided in one round trip too
            turns, decision = await _turns(proxy, ask("g2"))
            assert (turns, decision.granted, decision.reason) == (1, False, "1 of 1 in use")
            assert await _turns(proxy, store.release_grant("g1", "api")) == (1, None)
            assert await _turns(proxy, store.release_grant("g1", "api")) == (1, None)  # again
            assert not await store.renew_grant("g1", 30)
            turns, decision = await _turns(proxy, ask("g2"))
            assert (turns, decision.granted) == (1, True)
    # a release prunes when it draws to: the limit's rows released long ago go, others stay
    conn = await asyncpg.connect(pg_dsn)
    try:
        await conn.execute("UPDATE limit_grants SET released_at = 0 WHERE id = 'warm'")
        async with PostgresStore(pg_dsn, max_size=1) as plain:
            await plain.release_grant("g2", "api")
        left = {r["id"]: r["released_at"] is not None
                for r in await conn.fetch("SELECT id, released_at FROM limit_grants")}
    finally:
        await conn.close()
    assert left == ({"g1": True, "g2": True} if prune else
                    {"warm": True, "g1": True, "g2": True})
