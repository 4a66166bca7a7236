"""The stream log of ``MemoryStore``, until it runs on the SQL base (then this module goes)."""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

__all__ = ["MemoryStreams"]


class MemoryStreams:
    """``append_stream`` and ``read_stream`` on a dict (see ``SqlStore.append_stream``)."""

    _streams: dict[str, list[dict[str, Any]]]

    async def append_stream(self, run_id: str, entries: Sequence[Mapping[str, Any]]) -> int:
        """Append entries to the run's stream log; returns the last ``seq``."""
        log = self.__dict__.setdefault("_streams", {}).setdefault(run_id, [])
        seq = log[-1]["seq"] if log else 0
        for entry in entries:
            seq += 1
            log.append({**entry, "run_id": run_id, "seq": seq})
        return seq

    async def read_stream(self, run_id: str, after: int = 0,
                          limit: int = 1000) -> list[dict[str, Any]]:
        """At most ``limit`` stream log rows after ``seq`` ``after``."""
        log = self.__dict__.get("_streams", {}).get(run_id, [])
        start = bisect.bisect_right(log, after, key=lambda r: int(r["seq"]))
        return [dict(r) for r in log[start:start + limit]]

    def _trim_stream(self, run_id: str, floor: datetime) -> None:
        """Drop the run's entries written before ``floor`` (prune; see ``stream_floors``).

        The last entry stays, so the numbering goes on after it.
        """
        log = self.__dict__.get("_streams", {}).get(run_id)
        if log:
            log[:] = [r for r in log[:-1] if r["ts"] >= floor] + log[-1:]
