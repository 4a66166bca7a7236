"""A short run on PostgreSQL, counted on the wire: a read of one statement is one round trip.

The reads named as one statement go without BEGIN/COMMIT (store/postgres/_reads.py);
any other read still runs in its REPEATABLE READ transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import asyncpg
import orjson
import pytest
from netproxy import NetProxy
from pgdb import empty_tables

from durable_flow import END, Blackboard, RunStatus, Runtime, WorkflowBuilder
from durable_flow.errors import LeaseLostError, RunExistsError
from durable_flow.store._protocols import CheckpointWrite, Commit, Lease, RunRecord, RunUpdate
from durable_flow.store.postgres import _advance as _pg_advance
from durable_flow.store.postgres import _reads as _pg_reads
from durable_flow.store.postgres import _start as _pg_start
from durable_flow.store.postgres._postgres import POSTGRES, PostgresStore
from durable_flow.store.sql._ops import Fetch, Row, Tx
from durable_flow.store.sql._statement import Statement
from durable_flow.store.sql._tables import queries_for

from .builders import Chain, make_run, start_run

# a three-step run, from run() to its result: the one-statement start (the run,
# its lease, its first checkpoint), two one-statement superstep commits, the
# one-statement commit that completes it, the result's run and requests. It
# was 38 while every read had its own BEGIN and COMMIT, a new run read back
# what was recorded against its first checkpoint (nothing), and the start and
# the completing commit were transactions of several statements.
SHORT_RUN_TURNS = 6


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


def _finishing(chain: Chain, lease: Lease, *, extends: str | None = None) -> Commit:
    base = chain.head.id
    cp = chain.next(values={"n": len(chain.metas)}, appends={"log": [1]}, status=RunStatus.COMPLETED)
    return Commit(lease, extends=extends or base, checkpoint=cp, run=RunUpdate(
        RunStatus.COMPLETED, head_checkpoint_id=cp.meta.id, release=True))


async def test_the_commit_that_completes_a_run_is_one_statement(
        pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    Q = queries_for(POSTGRES)
    async with PostgresStore(pg_dsn, min_size=1, max_size=1) as store:
        await empty_tables(pg_dsn)
        for run_id in ("warm", "r1"):  # the first one prepares the statement
            chain, lease = await start_run(store, run_id)
            calls: list[str] = []
            with monkeypatch.context() as m:
                for name in ("execute", "executemany", "fetch", "fetchmany", "fetchrow",
                             "fetchval"):
                    m.setattr(asyncpg.Connection, name,
                              _counted(getattr(asyncpg.Connection, name), calls))
                await store.commit(_finishing(chain, lease))
        assert calls == [Q.commit_finish.sql], calls  # type: ignore[union-attr]
        record = await store.get_run("r1")
        assert record is not None and record.status is RunStatus.COMPLETED
        assert record.head_checkpoint_id == chain.head.id and record.lease_owner is None
        assert (await store.load_checkpoint("r1", chain.head.id)).meta.status is RunStatus.COMPLETED
        # a lost lease or a moved head: the statement writes nothing, the transaction refuses
        chain, lease = await start_run(store, "r2")
        stale = Lease(lease.run_id, lease.owner, lease.epoch - 1, lease.expires_at)
        for commit in (_finishing(chain, stale), _finishing(chain, lease, extends="elsewhere")):
            with pytest.raises(LeaseLostError):
                await store.commit(commit)
            record = await store.get_run("r2")
            assert record is not None and record.status is RunStatus.RUNNING
            assert record.head_checkpoint_id == chain.metas[0].id


def _counted(method: Callable[..., Any], calls: list[str]) -> Callable[..., Any]:
    async def wrapper(self: Any, query: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(query)
        return await method(self, query, *args, **kwargs)
    return wrapper


def _new_run(run_id: str) -> tuple[Chain, RunRecord, Lease]:
    chain = Chain(run_id)
    cp = chain.next(values={"topic": "tides"}, source="input")
    lease = Lease(run_id, "owner-1", 1, datetime.now(UTC) + timedelta(minutes=1))
    run = make_run(run_id, head_checkpoint_id=cp.meta.id, status=RunStatus.RUNNING)
    return chain, run, lease


async def test_the_start_of_a_run_is_one_statement(
        pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    Q = queries_for(POSTGRES)
    async with PostgresStore(pg_dsn, min_size=1, max_size=1) as store:
        await empty_tables(pg_dsn)
        for run_id in ("warm", "r1"):  # the first one prepares the statement
            chain, run, lease = _new_run(run_id)
            calls: list[str] = []
            with monkeypatch.context() as m:
                for name in ("execute", "executemany", "fetch", "fetchmany", "fetchrow",
                             "fetchval"):
                    m.setattr(asyncpg.Connection, name,
                              _counted(getattr(asyncpg.Connection, name), calls))
                await store.create_run(run, [chain_write(chain)], lease)
        assert calls == [Q.commit_start.sql], calls  # type: ignore[union-attr]
        record = await store.get_run("r1")
        assert record is not None and record.status is RunStatus.RUNNING
        assert (record.lease_owner, record.lease_epoch) == ("owner-1", 1)
        assert record.head_checkpoint_id == chain.head.id
        loaded = await store.load_checkpoint("r1", chain.head.id)
        assert orjson.loads(loaded.values["topic"]) == "tides"
        # the id is taken: nothing written, the usual transaction says so
        other, again, lease2 = _new_run("r1")
        with pytest.raises(RunExistsError):
            await store.create_run(again, [chain_write(other)], lease2)
        record = await store.get_run("r1")
        assert record is not None and record.head_checkpoint_id == chain.head.id


@pytest.mark.parametrize("landed", [True, False])
async def test_a_start_whose_outcome_is_unknown_is_decided_by_the_transaction(
        pg_dsn: str, monkeypatch: pytest.MonkeyPatch, landed: bool) -> None:
    real = _pg_start.send

    async def send(pool: Any, lost: Any, stmt: Any, params: Any) -> Any:
        if landed:  # the statement ran (and wrote, unless the id was taken) but no reply came
            await real(pool, lost, stmt, params)
        return _pg_advance.UNKNOWN

    monkeypatch.setattr(_pg_start, "send", send)
    async with PostgresStore(pg_dsn, max_size=2) as store:
        await empty_tables(pg_dsn)
        chain, run, lease = _new_run("r1")
        await store.create_run(run, [chain_write(chain)], lease)
        record = await store.get_run("r1")
        assert record is not None and record.head_checkpoint_id == chain.head.id
        # someone else's run of that id is still refused (the row holds another lease)
        other, again, _ = _new_run("r1")
        with pytest.raises(RunExistsError):
            await store.create_run(again, [chain_write(other)], Lease("r1", "owner-2", 1,
                                                                      lease.expires_at))


def chain_write(chain: Chain) -> CheckpointWrite:
    """The chain's head as a write again (its values: what ``_new_run`` gave it)."""
    return CheckpointWrite(meta=chain.head, values={"topic": orjson.dumps("tides")}, appends={})
