"""The store under test: every conformance test runs once per store kind.

To add a backend, add its name to STORE_KINDS and a branch to ``_make``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from durable_flow.store._memory import MemoryStore
from durable_flow.store._protocols import CheckpointStore
from durable_flow.store._sqlite import SqliteStore

STORE_KINDS = ["memory", "sqlite"]


def _make(kind: str, tmp_path: Path) -> CheckpointStore:
    if kind == "memory":
        return MemoryStore()
    if kind == "sqlite":
        return SqliteStore(tmp_path / "store.db")
    raise ValueError(kind)


@pytest.fixture(params=STORE_KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[CheckpointStore]:
    s = _make(request.param, tmp_path)
    await s.setup()
    try:
        yield s
    finally:
        await s.close()
