"""The run's stream log as an execution writes it: entries buffered, appended in batches.

``NodeContext.publish`` adds an entry (``model_delta``, ``tool_started``,
``tool_finished``) to the execution's :class:`StreamBuffer`. A flusher task,
started with the first entry, appends what gathered every ``interval``
seconds (or at once past ``batch`` entries) in a transaction of its own,
never in the superstep commit; before each superstep commit the buffer is
flushed, so whatever a superstep streamed is stored before the superstep
is. The flusher ends when nothing came for an interval. A run that
streams nothing starts no task and writes nothing. A store without
``append_stream`` keeps no log (events still reach ``Runtime.stream``).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from ..model._clock import utcnow
from ..model._serde import encode

__all__ = ["StreamBuffer"]


class StreamBuffer:
    """Entries of one execution waiting to be appended to the run's stream log."""

    def __init__(self, store: Any, run_id: str, epoch: int, *, interval: float = 0.05,
                 batch: int = 256) -> None:
        self.append = getattr(store, "append_stream", None)
        self.run_id = run_id
        self.epoch = epoch
        self.interval = interval
        self.batch = batch
        self.pending: list[dict[str, Any]] = []
        self.lock = asyncio.Lock()
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def add(self, kind: str, namespace: str, superstep: int, node: str,
            data: dict[str, Any]) -> None:
        """Buffer one entry; the flusher appends it soon."""
        if self.append is None:
            return
        self.pending.append({"epoch": self.epoch, "namespace": namespace, "node": node,
                             "superstep": superstep, "kind": kind, "data": encode(data),
                             "ts": utcnow()})
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._flusher())
        if len(self.pending) >= self.batch:
            self.wake.set()

    async def flush(self) -> None:
        """Append everything buffered so far (one transaction; nothing when empty)."""
        async with self.lock:
            entries, self.pending = self.pending, []
            if not entries or self.append is None:
                return
            try:
                await self.append(self.run_id, entries)
            except BaseException:
                self.pending[:0] = entries  # kept for the next flush
                raise

    async def _flusher(self) -> None:
        """Append batches while entries come; ends when none came for one interval."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), self.interval)
            self.wake.clear()
            if not self.pending:
                self.task = None
                return
            try:
                await self.flush()
            except Exception:
                await asyncio.sleep(self.interval)
