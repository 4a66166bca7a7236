"""Helpers of the map tests (their ``rt`` is the shared fixture: every store kind)."""

from __future__ import annotations

from typing import Any

from durable_flow import Event


async def collect(events: Any) -> list[Event]:
    """Every event of a stream."""
    return [e async for e in events]
