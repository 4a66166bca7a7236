"""Reading a run's durable stream log: ``Runtime.read_stream`` and ``Runtime.follow_stream``.

Entries are numbered per run from 1; a reader keeps the last ``seq`` it saw
and asks again with ``after=seq``, so a client that reconnects misses
nothing and sees nothing twice. ``read_stream`` marks the deltas of a model
attempt that a later one replaced (a crash, a lost connection) as ``cut``;
``follow_stream`` yields entries as they are stored (a later ``epoch`` or
``attempt`` for the same node, superstep and round says the earlier one was
cut), polling until the run stops running.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

from ..errors import RunNotFoundError
from ..model._clock import utcnow
from ..model._records import RunStatus, StreamEntry
from ..model._serde import decode

__all__ = ["StreamEntry", "executing", "follow_stream", "read_stream"]  # the record, for Runtime

_PAGE = 1000
_LIVE = frozenset({RunStatus.RUNNING, RunStatus.QUEUED})


def _entry(row: Mapping[str, Any]) -> StreamEntry:
    return StreamEntry(run_id=row["run_id"], seq=int(row["seq"]), kind=row["kind"],
                       node=row["node"], namespace=row["namespace"],
                       superstep=int(row["superstep"]), ts=row["ts"], data=decode(row["data"]),
                       epoch=int(row["epoch"]))


def _round(e: StreamEntry) -> tuple[str, str, int, str] | None:
    if e.kind != "model_delta":
        return None
    return (e.namespace, e.node, e.superstep, str(e.data.get("round", "")))


def mark_cut(entries: list[StreamEntry]) -> list[StreamEntry]:
    """The entries, with deltas of attempts a later attempt of their round replaced marked."""
    last: dict[tuple[str, str, int, str], tuple[int, int]] = {}
    for e in entries:
        key = _round(e)
        if key is not None:
            last[key] = max(last.get(key, (0, 0)), (e.epoch, int(e.data.get("attempt", 1))))
    out = []
    for e in entries:
        key = _round(e)
        cut = key is not None and (e.epoch, int(e.data.get("attempt", 1))) < last[key]
        out.append(StreamEntry(e.run_id, e.seq, e.kind, e.node, e.namespace, e.superstep, e.ts,
                               e.data, e.epoch, cut) if cut else e)
    return out


async def _page(store: Any, run_id: str, after: int, limit: int) -> list[StreamEntry]:
    reader = getattr(store, "read_stream", None)
    if reader is None:
        return []
    return [_entry(r) for r in await reader(run_id, after, limit)]


async def read_stream(store: Any, run_id: str, after: int = 0) -> list[StreamEntry]:
    """Every entry of the run's stream log after ``seq`` ``after``, cut attempts marked."""
    if await store.get_run(run_id) is None:
        raise RunNotFoundError(run_id)
    out: list[StreamEntry] = []
    while True:
        page = await _page(store, run_id, after, _PAGE)
        out += page
        if len(page) < _PAGE:
            return mark_cut(out)
        after = page[-1].seq


async def follow_stream(store: Any, run_id: str, after: int = 0, *,
                        poll: float = 0.2) -> AsyncIterator[StreamEntry]:
    """Entries after ``after`` as they are stored, until the run is no longer running.

    A ``running`` run whose lease expired is executed by nobody (its process
    died): nothing more comes until someone resumes it, so the stream ends.
    """
    while True:
        record = await store.get_run(run_id)
        if record is None:
            raise RunNotFoundError(run_id)
        page = await _page(store, run_id, after, _PAGE)
        for entry in page:
            yield entry
        if page:
            after = page[-1].seq
        if len(page) < _PAGE and not executing(record):
            # the status was read before the page: nothing it stored can come after
            return
        if not page:
            await asyncio.sleep(poll)


def executing(record: Any) -> bool:
    """Whether a run is queued for, or held by, a live execution (its lease not expired)."""
    if record.status is RunStatus.RUNNING and record.lease_expires_at is not None:
        return bool(record.lease_expires_at > utcnow())
    return record.status in _LIVE
