"""A PostgreSQL superstep commit is one round trip, counted on the wire through a proxy."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest
from netproxy import NetProxy
from pgdb import empty_tables

from durable_flow import END, Blackboard, RunStatus, Runtime, WorkflowBuilder
from durable_flow.store import _pg_advance
from durable_flow.store._postgres import PostgresStore
from durable_flow.store._segments import merge_block


class Count(Blackboard):
    count: int = 0
    limit: int = 0
    notes: list[str] = []


def chain(proxy: NetProxy | None, seen: list[int]) -> Any:
    b = WorkflowBuilder("round-trips", state=Count)

    @b.node()
    def step(state: Count) -> dict[str, Any]:
        if proxy is not None:
            seen.append(proxy.turns)  # the turns on the wire as this superstep starts
        return {"count": state.count + 1, "notes": [*state.notes[-2:], f"n{state.count}"]}

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
    # between two supersteps: the commit of the first one (checkpoint seq k + 1)
    per_commit = {k + 1: b - a for k, (a, b) in enumerate(pairwise(seen))}
    plain = {seq: n for seq, n in per_commit.items() if seq > 2 and merge_block(seq) is None}
    assert len(plain) > 25
    assert set(plain.values()) == {1}, per_commit


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
