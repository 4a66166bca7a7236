"""Shared fixtures: every behaviour test runs on each available store."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from durable_flow import MemoryStore, Runtime, SqliteStore
from durable_flow.store.sql._cache import CACHE_ENV, load_or_compile, statements_for

STORES = ["memory", "sqlite"]

# The statement cache (store/sql/_cache.py) of a test session lives in a temporary
# directory, never in the developer's home; subprocesses of the tests inherit it.
os.environ[CACHE_ENV] = tempfile.mkdtemp(prefix="durable-flow-statements-")
atexit.register(shutil.rmtree, os.environ[CACHE_ENV], ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def _statements_from_the_cache() -> None:
    """SQL stores in the tests run on statements read back from the cache, as a CLI does."""
    for dialect in ("sqlite", "postgresql"):
        load_or_compile(dialect)  # compiles, and writes the file
    statements_for.cache_clear()  # the stores made from now on read it


@pytest.fixture(params=STORES)
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Any]:
    """Make store objects that all see the same data (one MemoryStore, or one SQLite file)."""
    if request.param == "memory":
        shared = MemoryStore()
        return lambda: shared
    path = tmp_path / "runs.db"
    return lambda: SqliteStore(path)


@pytest.fixture
def store(store_factory: Callable[[], Any]) -> Any:
    return store_factory()


@pytest.fixture
async def rt(store: Any) -> AsyncIterator[Runtime]:
    async with Runtime(store) as runtime:
        yield runtime
