"""The shared SQL layer: transaction functions are plain data flow, any driver runs them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from durable_flow.errors import RunNotFoundError, UnknownRequestError
from durable_flow.model._records import RunStatus
from durable_flow.store._protocols import Claim, Commit, RunUpdate, StatusMark
from durable_flow.store.sql import _base as _sql
from durable_flow.store.sql._base import Execute, ExecuteMany, Fetch, FetchEach, Op
from durable_flow.store.sql._tables import Statement, queries_for
from durable_flow.store.sqlite._sqlite import SQLITE, SqliteStore

from .builders import make_run, request, start_run, task_write


def _sync_perform(conn: sqlite3.Connection):  # type: ignore[no-untyped-def]
    def perform(op: Op) -> object:
        match op:
            case Fetch(stmt, params):
                return conn.execute(stmt.sql, params).fetchall()
            case Execute(stmt, params):
                return conn.execute(stmt.sql, params).rowcount
            case ExecuteMany(stmt, rows):
                return conn.executemany(stmt.sql, rows).rowcount
            case FetchEach(stmt, rows):
                return [conn.execute(stmt.sql, p).fetchall() for p in rows]
        raise AssertionError(op)
    return perform


async def test_an_async_driver_runs_the_same_transaction_functions(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SqliteStore(path) as store:
        await store.create_run(make_run("r1"), [], None)
    q = queries_for(SQLITE)
    conn = sqlite3.connect(path, isolation_level=None)
    sync = _sync_perform(conn)
    performed: list[str] = []

    async def perform(op: Op) -> object:
        performed.append(type(op).__name__)
        return sync(op)

    try:
        assert await _sql.drive_async(_sql.get_run_tx(q, "r1"), perform) == make_run("r1")
        lease = await _sql.drive_async(_sql.claim_tx(q, Claim("r1", "me", 30)), perform)
        assert lease.epoch == 1
        with pytest.raises(RunNotFoundError):
            await _sql.drive_async(_sql.claim_tx(q, Claim("nope", "me", 30)), perform)
    finally:
        conn.close()
    # get_run; claim: the locked row, kept events, the waits past their deadline (to close
    # or escalate), the claim; the unknown run
    assert performed == ["Fetch", "Fetch", "Fetch", "Fetch", "Execute", "Fetch"]


def test_statements_bind_by_name_in_sql_order() -> None:
    q = queries_for(SQLITE)
    stmt = q.lease_renew
    assert stmt.sql.count("?") == len(stmt.names)
    assert stmt.bind({"owner": "o", "epoch": 2, "run_id": "r", "expires": 9, "extra": 1}) == (
        9, "r", 2, "o")
    with pytest.raises(KeyError):
        stmt.bind({"owner": "o"})


def test_literals_become_constants_not_sql_text() -> None:
    q = queries_for(SQLITE)
    assert "cancelled" not in q.run_cancel.sql
    params = q.run_cancel.bind({"run_id": "r", "now": 5})
    assert "cancelled" in params and 1 in params


def test_every_statement_compiles_for_postgresql() -> None:
    from sqlalchemy.dialects import postgresql

    from durable_flow.store.sql._tables import SqlDialect

    q = queries_for(SqlDialect(postgresql.asyncpg.dialect(), postgresql.insert))
    assert "runs.run_id = $1" in q.run_get.sql and "?" not in q.run_get.sql
    assert q.lease_check.sql.endswith("FOR UPDATE")
    assert "ON CONFLICT (run_id, request_id) DO NOTHING" in q.req_insert.sql
    assert q.tw_upsert.names == ("run_id", "checkpoint_id", "node", "data", "created_at")


async def test_commit_statements_of_a_superstep_and_of_a_reopen(tmp_path: Path) -> None:
    """The hot path keeps its statement count; ``reopen`` adds one statement only when used."""
    path = tmp_path / "count.db"
    async with SqliteStore(path) as store:
        chain, lease = await start_run(store, "r1")
        base = chain.head.id
        await store.commit(Commit(lease, requests=[request("r1", base, "q1")]))
        await store.commit(Commit(lease, answers={"q1": b"1"}))
    q = queries_for(SQLITE)
    conn = sqlite3.connect(path, isolation_level=None)
    sync = _sync_perform(conn)
    performed: list[Statement] = []

    def perform(op: Op) -> object:
        performed.append(op.stmt)
        return sync(op)

    def run(commit: Commit) -> list[Statement]:
        performed.clear()
        conn.execute("BEGIN IMMEDIATE")
        try:
            _sql.drive(_sql.commit_tx(q, commit), perform)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return list(performed)

    try:
        base = chain.head.id
        superstep = chain.next(values={"n": 1}, appends={"log": [1]})
        # the top level names the head it extends in the run's own UPDATE: no extra read;
        # a running run only moves its head (no status, wake time or error rewritten)
        assert run(Commit(lease, extends=base, checkpoint=superstep, run=RunUpdate(
            RunStatus.RUNNING, head_checkpoint_id=superstep.meta.id))) == [
            q.run_advance_cas, q.cp_insert, q.value_insert, q.chunk_insert]
        # a row that is not running without an error (here: an error left on it) gets
        # the full UPDATE, which clears it as before
        conn.execute("UPDATE runs SET error = '{}' WHERE run_id = 'r1'")
        again = chain.next(values={"n": 3})
        assert run(Commit(lease, extends=superstep.meta.id, checkpoint=again, run=RunUpdate(
            RunStatus.RUNNING, head_checkpoint_id=again.meta.id))) == [
            q.run_advance_cas, q.run_update_cas, q.cp_insert, q.value_insert]
        assert conn.execute("SELECT error, head_checkpoint_id FROM runs").fetchone() == (
            None, again.meta.id)
        sub_step = chain.next(values={"n": 2})
        assert run(Commit(lease, checkpoint=sub_step)) == [
            q.run_touch, q.cp_head, q.cp_insert, q.value_insert]
        head = sub_step.meta.id
        assert run(Commit(lease, mark=StatusMark(head, RunStatus.WAITING), reopen=["q1"],
                          task_writes=[task_write("r1", head, "a")])) == [
            q.run_touch, q.req_reopen, q.tw_upsert, q.cp_mark]
        with pytest.raises(UnknownRequestError):
            run(Commit(lease, reopen=["q1", "nope"]))
    finally:
        conn.close()
