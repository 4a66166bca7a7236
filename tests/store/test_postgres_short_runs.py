"""A short run on PostgreSQL, counted on the wire: a read of one statement is one round trip.

The reads named as one statement go without BEGIN/COMMIT (store/_pg_reads.py);
any other read still runs in its REPEATABLE READ transaction.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
from netproxy import NetProxy
from pgdb import empty_tables

from durable_flow import END, Blackboard, RunStatus, Runtime, WorkflowBuilder
from durable_flow.store import _pg_reads
from durable_flow.store._postgres import PostgresStore
from durable_flow.store.sql._ops import Fetch, Row, Tx
from durable_flow.store.sql._statement import Statement

# a three-step run, from run() to its result: the start (BEGIN, the lease's
# check, the run, its first checkpoint, COMMIT), each node's reads of what an
# earlier attempt left (3 single statements a node after the first), two
# one-statement superstep commits, the completing commit in its transaction,
# the result's run and requests. It was 38 while every read had its own
# BEGIN and COMMIT.
SHORT_RUN_TURNS = 22


class Steps(Blackboard):
    n: int = 0


def three_steps() -> Any:
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


async def test_a_three_step_run_takes_a_counted_number_of_round_trips(pg_dsn: str) -> None:
    await empty_tables(pg_dsn)
    async with NetProxy() as proxy:
        store = PostgresStore(proxy.dsn(pg_dsn), min_size=1, max_size=1)
        async with Runtime(store) as rt:
            wf = three_steps()
            turns = []
            for _ in range(4):  # the first run also prepares each statement
                before = proxy.turns
                result = await rt.run(wf, {})
                turns.append(proxy.turns - before)
                assert result.status is RunStatus.COMPLETED and result.state.n == 3
            assert turns[1:] == [SHORT_RUN_TURNS] * 3, turns
            # a read of one statement is one round trip, every time
            for _ in range(3):
                before = proxy.turns
                record = await store.get_run(result.run_id)
                assert proxy.turns - before == 1
                assert record is not None and record.status is RunStatus.COMPLETED


NOW = Statement("SELECT now()::text", (), {}, ("now",))


def two_reads() -> Tx[tuple[object, object]]:
    first: list[Row] = yield Fetch(NOW, ())
    second: list[Row] = yield Fetch(NOW, ())
    return first[0][0], second[0][0]


def one_read() -> Tx[object]:
    rows: list[Row] = yield Fetch(NOW, ())
    return rows[0][0]


async def test_a_read_of_several_statements_keeps_its_transaction(
        pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    async with NetProxy() as proxy:
        store = PostgresStore(proxy.dsn(pg_dsn), min_size=1, max_size=1)
        async with store:
            driver = store.driver
            await driver.run(partial(two_reads), write=False)  # prepares the statement
            before = proxy.turns
            first, second = await driver.run(partial(two_reads), write=False)
            assert proxy.turns - before == 4  # BEGIN, the two, COMMIT
            assert first == second  # now(): the transaction's start, both in one transaction
            # one named as one statement goes alone; should it ask for a second after all,
            # it runs again in its transaction (its first answer unused)
            monkeypatch.setattr(_pg_reads, "ONE_STATEMENT", {one_read, two_reads})
            for read, turns in ((one_read, 1), (two_reads, 5)):
                before = proxy.turns
                answer = await driver.run(partial(read), write=False)
                assert proxy.turns - before == turns
            first, second = answer
            assert first == second
