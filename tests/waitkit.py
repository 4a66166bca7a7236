"""Shared pieces of the tests of durable time, events, deadlines and versions.

Their stores are the shared fixtures of ``conftest.py`` (``store_factory``,
``rt``: memory, SQLite and PostgreSQL).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from durable_flow import Worker
from durable_flow.store._protocols import CheckpointStore


@asynccontextmanager
async def serving(worker: Worker) -> AsyncIterator[Worker]:
    """Run ``worker.serve()`` in a task for the block; stop it after."""
    task = asyncio.create_task(worker.serve())
    try:
        yield worker
    finally:
        await worker.stop()
        await asyncio.wait_for(task, 10)


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    """Poll ``check`` until it holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            pytest.fail("the condition never held")
        await asyncio.sleep(0.02)


async def store_dump(store: CheckpointStore, run_id: str) -> Any:
    """Everything a resume could write for one run."""
    run = await store.get_run(run_id)
    cps = await store.list_checkpoints(run_id)
    return (run, cps, await store.get_requests(run_id), await store.get_mail(run_id),
            [await store.get_task_writes(run_id, m.id) for m in cps])
