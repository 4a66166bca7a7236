"""MemoryStore: the SQL store's own transaction functions, on an in-memory database of its own."""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import sys
import threading

import pytest

from durable_flow.errors import StoreError
from durable_flow.store._protocols import CheckpointStore
from durable_flow.store.memory._memory import MemoryStore
from durable_flow.store.sql._base import Execute, SqlStore, Tx
from durable_flow.store.sql._statement import Statement

from .builders import make_run, start_run


def test_every_store_method_is_the_sql_stores_own() -> None:
    """No transaction rule of MemoryStore exists twice: each method is SqlStore's."""
    methods = [name for name, _ in inspect.getmembers(CheckpointStore, inspect.isfunction)
               if not name.startswith("_") and name not in ("setup", "close")]
    assert len(methods) > 20
    assert [m for m in methods if getattr(MemoryStore, m) is not getattr(SqlStore, m)] == []


async def test_data_lives_as_long_as_the_object_and_stores_are_apart() -> None:
    store, other = MemoryStore(), MemoryStore()
    await start_run(store, "r1")
    await store.close()
    await store.setup()
    assert (await store.get_run("r1")) is not None
    assert await other.get_run("r1") is None and await other.list_runs() == []


def _delete_then_fail() -> Tx[None]:
    yield Execute(Statement("DELETE FROM runs", (), {}), ())
    yield Execute(Statement("INSERT INTO no_such_table VALUES (1)", (), {}), ())


async def test_a_write_that_fails_midway_is_rolled_back() -> None:
    store = MemoryStore()
    await start_run(store, "r1")
    with pytest.raises(StoreError, match="SQLite failed"):
        await store.driver.run(_delete_then_fail, write=True)
    assert [r.run_id for r in await store.list_runs()] == ["r1"]
    # and the next write is a transaction of its own
    await store.create_run(make_run("r2"), [], None)
    assert len(await store.list_runs()) == 2


def test_threads_with_loops_of_their_own_share_one_store() -> None:
    store = MemoryStore()
    errors: list[BaseException] = []

    def work(prefix: str) -> None:
        async def go() -> None:
            for i in range(100):
                await store.create_run(make_run(f"{prefix}{i}"), [], None)
                assert (await store.get_run(f"{prefix}{i}")) is not None
        try:
            asyncio.run(go())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(p,)) for p in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(asyncio.run(store.list_runs())) == 200


@pytest.mark.process
def test_with_a_warm_statement_cache_a_memory_store_imports_no_sqlalchemy() -> None:
    code = ("import sys, asyncio; from durable_flow import MemoryStore; s = MemoryStore(); "
            "asyncio.run(s.list_runs()); "
            "print([m for m in sys.modules if m.split('.')[0] in ('sqlalchemy', 'sqlmodel')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
