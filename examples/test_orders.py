"""Tests a team writes for its own workflow: copy this file next to yours and adapt it.

    pytest examples/test_orders.py

* the workflow survives ``kill -9`` at every durable point: ``assert_crash_safe``
  runs it once, then once per point in a child process killed right after
  that point, resumes each run and compares it with the uninterrupted one;
* the next version can continue the runs that are paused on this one:
  ``Runtime.check_upgrade`` plans each run's migration without writing.

The workflow must live in a module the child processes can import (here
``orders``, next to this file) and be deterministic: the same input and
answers give the same values.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import orders

from durable_flow import RunStatus, Runtime, SqliteStore
from durable_flow.testing import assert_crash_safe


def test_an_order_survives_a_crash_at_every_durable_point() -> None:
    points = assert_crash_safe(orders.workflow, {"item": "book", "qty": 2},
                               answers={"approve": True})
    assert points > 5


def test_version_2_can_continue_the_orders_paused_on_version_1(tmp_path: Path) -> None:
    async def check() -> list[object]:
        async with Runtime(SqliteStore(tmp_path / "runs.db")) as rt:
            paused = await rt.run(orders.workflow, {"item": "lamp"})
            assert paused.status is RunStatus.WAITING
            return list(await rt.check_upgrade(orders.workflow_v2))

    assert asyncio.run(check()) == []
