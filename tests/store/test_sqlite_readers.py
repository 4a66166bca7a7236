"""SqliteStore reads run on their own thread and connection: never behind a commit, nor before one.

Each test blocks one transaction function inside its generator (on its
driver thread, with a ``threading.Event``) and checks that a transaction of
the other kind completes meanwhile. Every wait is bounded, so a driver that
serialises them fails the test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

import pytest

from durable_flow.errors import StoreError
from durable_flow.store._protocols import CheckpointMeta, Commit
from durable_flow.store.sql._base import (
    Fetch,
    Tx,
    create_run_tx,
    get_run_tx,
    list_checkpoints_tx,
)
from durable_flow.store.sql._tables import Statement, queries_for
from durable_flow.store.sqlite._sqlite import SQLITE, SqliteStore

from .builders import make_run, start_run, state_of

T = TypeVar("T")
Q = queries_for(SQLITE)
# How long a test waits for something that must happen (generous for slow
# machines); a blocked transaction gives up after twice that.
WAIT = 10.0


async def _wait(event: threading.Event) -> None:
    """Wait (bounded) for a driver thread to set ``event``."""
    assert await asyncio.to_thread(event.wait, WAIT), "the transaction never got there"


def _hold(entered: threading.Event, release: threading.Event) -> None:
    """Inside a transaction function: say so, then wait (bounded) to be let go."""
    entered.set()
    if not release.wait(2 * WAIT):
        raise AssertionError("the test never released the transaction")


def _blocked_listing(run_id: str, entered: threading.Event, release: threading.Event,
                     ) -> Tx[tuple[list[CheckpointMeta], list[CheckpointMeta]]]:
    """A read that lists a run's checkpoints, blocks, then lists them again."""
    before = yield from list_checkpoints_tx(Q, run_id, None, None)
    _hold(entered, release)
    after = yield from list_checkpoints_tx(Q, run_id, None, None)
    return before, after


def _blocked_create(run_id: str, entered: threading.Event, release: threading.Event) -> Tx[None]:
    """A write that inserts a run, then blocks before its COMMIT."""
    yield from create_run_tx(Q, make_run(run_id), [], None)
    _hold(entered, release)


def _pragma(name: str) -> Tx[object]:
    rows = yield Fetch(Statement(f"PRAGMA {name}", (), {}), ())
    return rows[0][0]


def _sqlite_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("durable-flow-sqlite")}


async def _in_flight(store: SqliteStore, tx: Callable[[], Tx[T]], *, write: bool,
                     entered: threading.Event) -> asyncio.Task[T]:
    """Start ``tx`` on the store's driver and wait until it is blocked inside."""
    task = asyncio.create_task(store.driver.run(tx, write=write))
    await _wait(entered)
    assert not task.done()
    return task


async def test_a_commit_completes_while_a_read_is_in_flight(tmp_path: Path) -> None:
    entered, release = threading.Event(), threading.Event()
    async with SqliteStore(tmp_path / "r.db") as store:
        chain, lease = await start_run(store, "r1")
        reading = await _in_flight(store, partial(_blocked_listing, "r1", entered, release),
                                   write=False, entered=entered)
        try:
            cp = chain.next(values={"count": 1})
            await asyncio.wait_for(store.commit(Commit(lease, checkpoint=cp)), WAIT)
            await asyncio.wait_for(store.create_run(make_run("r2"), [], None), WAIT)
            assert not reading.done()  # the commits did not wait for the read to end
        finally:
            release.set()
        before, after = await asyncio.wait_for(reading, WAIT)
        # one snapshot: the read's second SELECT does not see the commit made meanwhile
        assert before == after == chain.metas[:1]
        assert await store.list_checkpoints("r1") == chain.metas[::-1]
        assert await store.get_run("r2") is not None


async def test_a_read_of_committed_data_completes_while_a_write_is_in_flight(
    tmp_path: Path,
) -> None:
    entered, release = threading.Event(), threading.Event()
    async with SqliteStore(tmp_path / "w.db") as store:
        chain, _ = await start_run(store, "r1")
        writing = await _in_flight(store, partial(_blocked_create, "r2", entered, release),
                                   write=True, entered=entered)
        try:
            run = await asyncio.wait_for(store.get_run("r1"), WAIT)
            assert run is not None and run.head_checkpoint_id == chain.head.id
            loaded = await asyncio.wait_for(store.load_checkpoint("r1", chain.head.id), WAIT)
            assert state_of(loaded) == chain.expected[chain.head.id]
            # nor does it see what the write has not committed yet
            assert await asyncio.wait_for(store.get_run("r2"), WAIT) is None
            assert not writing.done()
        finally:
            release.set()
        await asyncio.wait_for(writing, WAIT)
        assert await store.get_run("r2") == make_run("r2")


async def test_a_read_sees_every_write_that_returned_before_it(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "ryw.db") as store:
        chain, lease = await start_run(store, "r1")
        assert await store.thread_head("r1", "") == chain.head
        for i in range(1, 30):
            cp = chain.next(values={"count": i}, appends={"log": [i]})
            await store.commit(Commit(lease, checkpoint=cp))
            assert await store.thread_head("r1", "") == cp.meta
            loaded = await store.load_checkpoint("r1", cp.meta.id)
            assert state_of(loaded) == chain.expected[cp.meta.id]
            await store.create_run(make_run(f"n{i}"), [], None)
            assert await store.get_run(f"n{i}") == make_run(f"n{i}")


async def test_reads_and_writes_in_parallel_each_see_a_whole_commit(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "mix.db") as store:
        chain, lease = await start_run(store, "r1")

        async def write() -> None:
            for i in range(1, 25):
                await store.commit(Commit(lease, checkpoint=chain.next(values={"count": i})))

        async def read() -> list[int]:
            seen: list[int] = []
            for _ in range(25):
                run = await store.get_run("r1")
                assert run is not None and run.head_checkpoint_id is not None
                loaded = await store.load_checkpoint("r1", run.head_checkpoint_id)
                assert state_of(loaded) == chain.expected[run.head_checkpoint_id]
                seen.append(loaded.meta.seq)
                await asyncio.sleep(0)
            return seen

        _, *readers = await asyncio.wait_for(asyncio.gather(write(), read(), read()), 6 * WAIT)
        for seen in readers:  # a read never sees an older head than the read before it
            assert seen == sorted(seen)
        assert (await store.thread_head("r1", "")) == chain.head


async def test_reads_use_their_own_read_only_connection_with_the_busy_timeout(
    tmp_path: Path,
) -> None:
    async with SqliteStore(tmp_path / "ro.db", busy_timeout=2.5) as store:
        assert await store.driver.run(partial(_pragma, "busy_timeout"), write=False) == 2500
        assert await store.driver.run(partial(_pragma, "journal_mode"), write=False) == "wal"
        assert await store.driver.run(partial(_pragma, "query_only"), write=False) == 1
        # driver.call and writes stay on the writer's connection
        assert await store.driver.call(
            lambda conn: conn.execute("PRAGMA query_only").fetchone()[0]) == 0
        assert await store.driver.run(partial(_pragma, "query_only"), write=True) == 0
        # a transaction run as a read cannot write
        with pytest.raises(StoreError, match="readonly"):
            await store.driver.run(partial(create_run_tx, Q, make_run("r1"), [], None),
                                   write=False)
        assert await store.get_run("r1") is None


async def test_close_stops_both_threads_and_setup_opens_again(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "c.db")
    before = _sqlite_threads()
    await store.setup()
    await store.create_run(make_run("r1"), [], None)
    assert await store.get_run("r1") is not None  # opens the reader's connection
    driver = store.driver
    threads = _sqlite_threads() - before
    assert len(threads) == 2  # the writer and the reader
    await store.close()
    for thread in threads:
        thread.join(WAIT)
        assert not thread.is_alive()
    with pytest.raises(StoreError, match="not set up"):
        await store.get_run("r1")
    with pytest.raises(StoreError, match="not set up"):
        await store.create_run(make_run("r2"), [], None)
    # a caller that kept the closed driver is refused at once, not left waiting
    with pytest.raises(StoreError, match="closed"):
        await asyncio.wait_for(driver.run(partial(get_run_tx, Q, "r1"), write=False), WAIT)
    with pytest.raises(StoreError, match="closed"):
        await asyncio.wait_for(
            driver.run(partial(create_run_tx, Q, make_run("r2"), [], None), write=True), WAIT)
    await store.setup()
    try:
        assert await store.get_run("r1") == make_run("r1")
        await store.create_run(make_run("r2"), [], None)
        assert await store.get_run("r2") == make_run("r2")
    finally:
        await store.close()


class _FailingClose:
    """The writer's connection, whose close closes it and then reports a failure."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def close(self) -> None:
        self.conn.close()
        raise sqlite3.OperationalError("close failed")


async def test_a_failing_close_still_closes_the_reader_and_stops_both_threads(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "f.db")
    before = _sqlite_threads()
    await store.setup()
    await store.create_run(make_run("r1"), [], None)
    assert await store.get_run("r1") is not None
    driver = store.driver
    threads = _sqlite_threads() - before
    driver._conn = _FailingClose(driver._conn)  # type: ignore[assignment]
    with pytest.raises(sqlite3.OperationalError, match="close failed"):
        await store.close()
    assert driver._reader_conn is None
    for thread in threads:
        thread.join(WAIT)
        assert not thread.is_alive()
    async with store:
        assert await store.get_run("r1") == make_run("r1")


async def test_the_log_is_checkpointed_beside_the_commits_not_inside_them(tmp_path: Path) -> None:
    """No commit pays for a checkpoint; the reader's thread keeps the log from growing."""
    from durable_flow.store.sqlite import _sqlite

    db = tmp_path / "wal.db"
    async with SqliteStore(db, synchronous="normal") as store:
        assert await store.driver.call(
            lambda c: c.execute("PRAGMA wal_autocheckpoint").fetchone()[0]) == 0
        chain, lease = await start_run(store, "r1")
        commits = 20 * _sqlite.CHECKPOINT_EVERY
        for i in range(commits):
            await store.commit(Commit(lease, checkpoint=chain.next(
                values={"n": i}, appends={"log": ["x" * 300]})))
        for _ in range(200):  # the last queued checkpoint runs on the reader's thread
            if store.driver._checkpoint is None:
                break
            await asyncio.sleep(0.01)
        conn = sqlite3.connect(db)
        try:  # frames in the log now: only those since the last checkpoint restarted it
            _busy, frames, _done = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        finally:
            conn.close()
        # every commit writes several pages (ten here): without checkpoints the log would
        # hold all of them, with them only those of the last hundred commits or so
        assert 0 <= frames < commits, frames
        loaded = await store.load_checkpoint("r1", chain.head.id)
        assert state_of(loaded) == chain.expected[chain.head.id]
