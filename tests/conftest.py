"""Shared fixtures: every behaviour test runs on each available store."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from durable_flow import MemoryStore, Runtime, SqliteStore

STORES = ["memory", "sqlite"]


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
