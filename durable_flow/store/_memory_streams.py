"""The stream log of ``MemoryStore``, until it runs on the SQL base (then this module goes)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["MemoryStreams"]


class MemoryStreams:
    """``append_stream`` and ``read_stream`` on a dict (see ``SqlStore.append_stream``)."""

    _streams: dict[str, list[dict[str, Any]]]

    async def append_stream(self, run_id: str, entries: Sequence[Mapping[str, Any]]) -> int:
        """Append entries to the run's stream log; returns the last ``seq``."""
        log = self.__dict__.setdefault("_streams", {}).setdefault(run_id, [])
        for entry in entries:
            log.append({**entry, "run_id": run_id, "seq": len(log) + 1})
        return len(log)

    async def read_stream(self, run_id: str, after: int = 0,
                          limit: int = 1000) -> list[dict[str, Any]]:
        """At most ``limit`` stream log rows after ``seq`` ``after``."""
        log = self.__dict__.get("_streams", {}).get(run_id, [])
        return [dict(r) for r in log[max(after, 0):max(after, 0) + limit]]
