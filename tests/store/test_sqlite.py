"""SqliteStore specifics: schema versions, PRAGMAs, corruption, processes, growth."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest

from durable_flow.errors import CheckpointCorruptedError, SchemaVersionError, StoreError
from durable_flow.model._records import RunStatus
from durable_flow.store._protocols import Commit, RunUpdate
from durable_flow.store.sql._migrate import HEAD_REVISION
from durable_flow.store.sql._tables import METADATA, Statement, queries_for
from durable_flow.store.sqlite._sqlite import SQLITE, SqliteStore

from .builders import Chain, make_run, start_run, state_of


def _query(path: Path, sql: str, params: Sequence[object] = ()) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(path)
    try:
        with conn:
            return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def _tables(path: Path) -> set[str]:
    return {str(r[0]) for r in _query(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}


# -- schema ------------------------------------------------------------------------------


async def test_setup_creates_the_schema_on_a_new_file(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    async with SqliteStore(path):
        pass
    assert _tables(path) == set(METADATA.tables) | {"alembic_version"}
    assert _query(path, "SELECT version_num FROM alembic_version") == [(HEAD_REVISION,)]


async def test_reopening_keeps_data_and_one_version_row(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    store = SqliteStore(path)
    await store.setup()
    await store.setup()  # idempotent on an open store
    await store.create_run(make_run("r1"), [Chain("r1").next(values={"a": 1})], None)
    await store.close()
    for _ in range(2):
        async with SqliteStore(path) as again:
            assert (await again.get_run("r1")) == make_run("r1")
    assert _query(path, "SELECT version_num FROM alembic_version") == [(HEAD_REVISION,)]


async def test_an_older_database_is_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _query(path, "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)")
    async with SqliteStore(path) as store:
        assert await store.list_runs() == []
    assert _tables(path) == set(METADATA.tables) | {"alembic_version"}


async def test_a_newer_database_is_refused_naming_both_versions(tmp_path: Path) -> None:
    path = tmp_path / "newer.db"
    async with SqliteStore(path):
        pass
    _query(path, "UPDATE alembic_version SET version_num = '9999_future'")
    store = SqliteStore(path)
    with pytest.raises(SchemaVersionError) as err:
        await store.setup()
    assert (err.value.database_version, err.value.code_version) == ("9999_future", HEAD_REVISION)
    assert "9999_future" in str(err.value) and HEAD_REVISION in str(err.value)
    with pytest.raises(StoreError, match="not set up"):
        await store.get_run("r1")


@pytest.mark.process
def test_opening_a_database_at_head_does_not_load_alembic(tmp_path: Path) -> None:
    path = tmp_path / "fast.db"
    asyncio.run(_setup_and_close(path))
    script = """
        import asyncio, sys
        from durable_flow.store.sqlite._sqlite import SQLITE, SqliteStore
        async def main():
            async with SqliteStore(sys.argv[1]) as store:
                await store.list_runs()
        asyncio.run(main())
        print(sorted(m for m in sys.modules if m.split(".")[0] == "alembic"))
    """
    assert _python(script, str(path)).strip() == "[]"


async def _setup_and_close(path: Path) -> None:
    async with SqliteStore(path):
        pass


# -- configuration -----------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "level"), [("full", 2), ("normal", 1)])
async def test_wal_and_synchronous_as_configured(tmp_path: Path, mode: str, level: int) -> None:
    async with SqliteStore(tmp_path / "p.db", synchronous=mode, busy_timeout=2.5) as store:  # type: ignore[arg-type]
        assert await store._pragma("journal_mode") == "wal"
        assert await store._pragma("synchronous") == level
        assert await store._pragma("busy_timeout") == 2500


def test_bad_arguments_are_refused() -> None:
    from durable_flow.errors import InvalidInputError  # a DurableFlowError and a ValueError

    with pytest.raises(InvalidInputError, match="MemoryStore"):
        SqliteStore(":memory:")
    with pytest.raises(InvalidInputError, match="synchronous"):
        SqliteStore("x.db", synchronous="off")  # type: ignore[arg-type]


async def test_a_store_can_be_set_up_again_after_close(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "again.db")
    async with store:
        await store.create_run(make_run("r1"), [], None)
    with pytest.raises(StoreError, match="not set up"):
        await store.get_run("r1")
    async with store:
        assert await store.get_run("r1") is not None


# -- integrity ---------------------------------------------------------------------------


@pytest.mark.parametrize(("column", "garbage"), [
    ("value_versions", "{not json"), ("log_lengths", '{"log": "three"}'),
    ("nodes", '"a"'), ("status", "exploded"), ("source", "nowhere"), ("error", "[1]"),
])
async def test_a_corrupt_checkpoint_row_is_reported_and_other_runs_work(
    tmp_path: Path, column: str, garbage: str,
) -> None:
    path = tmp_path / "c.db"
    async with SqliteStore(path) as store:
        bad, _ = await start_run(store, "bad")
        good, _ = await start_run(store, "good")
        _query(path, f"UPDATE checkpoints SET {column} = ? WHERE run_id = 'bad'", (garbage,))
        with pytest.raises(CheckpointCorruptedError) as err:
            await store.load_checkpoint("bad", bad.head.id)
        assert (err.value.run_id, err.value.checkpoint_id) == ("bad", bad.head.id)
        assert column in err.value.reason
        with pytest.raises(CheckpointCorruptedError):
            await store.list_checkpoints("bad")
        loaded = await store.load_checkpoint("good", good.head.id)
        assert state_of(loaded) == good.expected[good.head.id]
        assert {r.run_id for r in await store.list_runs()} == {"bad", "good"}


async def test_a_commit_failing_midway_writes_nothing(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "a.db") as store:
        chain, lease = await start_run(store, "r1")
        clash = chain.next(values={"x": 1})
        duplicate = dataclasses.replace(clash, meta=dataclasses.replace(
            clash.meta, id=chain.metas[0].id))
        before = await store.get_run("r1")
        with pytest.raises(StoreError, match="UNIQUE"):
            await store.commit(Commit(lease, checkpoint=duplicate,
                                      run=RunUpdate(RunStatus.COMPLETED)))
        assert await store.get_run("r1") == before
        assert await store.list_checkpoints("r1") == chain.metas[:1]


# -- processes -----------------------------------------------------------------------------


def _python(script: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script), *args],
                          capture_output=True, text=True, timeout=60, check=True)
    return done.stdout


_CHILD = """
    import asyncio, sys
    from datetime import UTC, datetime
    from durable_flow.model._records import RunStatus
    from durable_flow.store.sqlite._sqlite import SQLITE, SqliteStore
    from durable_flow.store._protocols import (
        CheckpointMeta, CheckpointWrite, Claim, Commit, RunRecord)
    from durable_flow.errors import RunLockedError

    async def contend(store, owner):
        try:
            lease = await store.claim(Claim("shared", owner, 60))
            print("won", lease.epoch, flush=True)
        except RunLockedError as exc:
            print("locked", exc.owner, flush=True)

    async def commit_many(store, owner, n=40):
        now = datetime.now(UTC)
        await store.create_run(RunRecord(owner, "wf", RunStatus.RUNNING, now, now, None, "s"),
                               [], None)
        lease = await store.claim(Claim(owner, owner, 60))
        for seq in range(n):
            parent = f"{owner}-{seq - 1:04d}" if seq else None
            meta = CheckpointMeta(f"{owner}-{seq:04d}", owner, "", "", parent, seq, seq, now,
                                  RunStatus.RUNNING, "loop", value_versions={"n": seq},
                                  log_lengths={"log": seq + 1})
            await store.commit(Commit(lease, checkpoint=CheckpointWrite(
                meta, {"n": str(seq).encode()}, {"log": b"[0]"})))
            await store.list_runs()
        print("committed", n, flush=True)

    async def main(path, action, owner):
        async with SqliteStore(path, busy_timeout=30) as store:
            print("ready", flush=True)
            sys.stdin.readline()
            await (contend if action == "contend" else commit_many)(store, owner)

    asyncio.run(main(*sys.argv[1:]))
"""


def _race(path: Path, action: str, owners: list[str]) -> list[str]:
    """Start one process per owner, release them together, return their last lines."""
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(_CHILD), str(path),
                               action, owner], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for owner in owners]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stderr is not None
            line = proc.stdout.readline()
            if line != "ready\n":
                proc.wait(timeout=30)
                pytest.fail(f"a child did not start: {line!r}\n{proc.stderr.read()}")
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        results = [proc.communicate(timeout=120) for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
    for proc, (_, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err
    return [out.strip() for out, _ in results]


@pytest.mark.process
def test_processes_contending_for_one_lease_exactly_one_wins(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"

    async def prepare() -> None:
        async with SqliteStore(path) as store:
            await store.create_run(make_run("shared"), [], None)

    asyncio.run(prepare())
    lines = _race(path, "contend", ["p1", "p2", "p3", "p4"])
    assert [line for line in lines if line.startswith("won")] == ["won 1"], lines
    winner = f"p{lines.index('won 1') + 1}"
    assert sorted(lines) == ["locked " + winner] * 3 + ["won 1"]


@pytest.mark.process
def test_concurrent_commits_from_processes_never_hit_locked(tmp_path: Path) -> None:
    path = tmp_path / "busy.db"
    asyncio.run(_setup_and_close(path))
    owners = ["w1", "w2", "w3", "w4"]
    assert _race(path, "commits", owners) == ["committed 40"] * 4
    counts = _query(path, "SELECT run_id, count(*) FROM checkpoints GROUP BY run_id")
    assert sorted(counts) == [(o, 40) for o in owners]


# -- growth --------------------------------------------------------------------------------


async def _file_bytes_after(tmp_path: Path, n: int) -> int:
    path = tmp_path / f"grow-{n}.db"
    item = "x" * 190
    async with SqliteStore(path) as store:
        chain, lease = await start_run(store, "run")
        for i in range(n):
            cp = chain.next(values={"count": i}, appends={"messages": [item]})
            await store.commit(Commit(lease, checkpoint=cp))
        loaded = await store.load_checkpoint("run", chain.head.id)
        assert state_of(loaded) == chain.expected[chain.head.id]
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        return int(pages * conn.execute("PRAGMA page_size").fetchone()[0])
    finally:
        conn.close()


async def test_storage_grows_linearly_with_checkpoints(tmp_path: Path) -> None:
    empty = await _file_bytes_after(tmp_path, 0)
    per_100 = (await _file_bytes_after(tmp_path, 100) - empty) / 100
    per_1000 = (await _file_bytes_after(tmp_path, 1000) - empty) / 1000
    assert per_1000 <= 1.5 * per_100, (per_100, per_1000)
    assert per_1000 < 2_000  # one ~200-byte item, a small value and metadata per checkpoint


# -- indexes -------------------------------------------------------------------------------


def _plan(path: Path, stmt: Statement) -> str:
    rows = _query(path, "EXPLAIN QUERY PLAN " + stmt.sql, [None] * len(stmt.names))
    return " | ".join(str(row[3]) for row in rows)


async def test_reads_by_run_thread_status_and_the_inbox_use_indexes(tmp_path: Path) -> None:
    path = tmp_path / "plan.db"
    await _setup_and_close(path)
    q = queries_for(SQLITE)
    by_index = [q.run_get, q.cp_get, q.cp_head, *q.cp_list.values(), q.chunk_upto, q.value_get,
                q.run_list[(True, False)], q.run_list[(False, True)], q.tw_get, q.step_get,
                *q.req_list.values(), q.req_inbox[(True, False, False)], q.run_update, q.cp_mark]
    for stmt in by_index:
        assert _plan(path, stmt).startswith("SEARCH"), stmt.sql
    # The whole inbox walks only the partial index of open requests; a page after
    # a cursor starts in that index where the cursor points.
    for paged in (False, True):
        whole = q.req_inbox[(False, False, paged)]
        assert _plan(path, whole) == "SCAN requests USING INDEX ix_requests_open"
        after = _plan(path, q.req_inbox[(False, True, paged)])
        assert after.startswith("SEARCH requests USING INDEX ix_requests_open ("), after
        for cursor in (False, True):
            plan = _plan(path, q.req_inbox[(True, cursor, paged)])
            assert plan.startswith("SEARCH requests USING INDEX ix_requests_open_workflow"), plan
    # a checkpoint's children: a row of the thread's chain, the partial index of copies
    assert _plan(path, q.cp_at_seq).startswith(
        "SEARCH checkpoints USING INDEX ux_checkpoints_thread_seq"), _plan(path, q.cp_at_seq)
    assert _plan(path, q.cp_resumed).startswith(
        "SEARCH checkpoints USING INDEX ix_checkpoints_resumed"), _plan(path, q.cp_resumed)


async def test_an_unopenable_path_raises_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="cannot open"):
        await SqliteStore(tmp_path / "missing-dir" / "x.db").setup()


async def test_concurrent_setups_open_one_connection(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "once.db")
    await asyncio.gather(store.setup(), store.setup(), store.setup())
    driver = store.driver
    await store.setup()
    assert store.driver is driver
    await store.close()
