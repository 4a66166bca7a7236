"""``MemoryStore``'s retention: ``prune`` and the rows that go with a checkpoint.

Which checkpoints go is decided by ``_retention`` for every store; this
module deletes them from the memory store's dicts, with their task writes,
step results, requests, the values no kept checkpoint references, and the
stream log entries ``stream_floors`` leaves out.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..model._records import RunStatus
from ._protocols import CheckpointMeta, RequestRow, TaskWrite
from ._retention import Scanned, doomed, stream_floors

__all__ = ["MemoryRetention"]


class MemoryRetention:
    """``prune`` for ``MemoryStore`` (a mixin over its dicts)."""

    _checkpoints: dict[str, CheckpointMeta]
    _threads: dict[tuple[str, str], list[str]]
    _values: dict[tuple[str, str, str, int], bytes]
    _appends: dict[tuple[str, str], list[tuple[int, str, bytes]]]
    _task_writes: dict[tuple[str, str], dict[str, TaskWrite]]
    _steps: dict[tuple[str, str, str], dict[str, bytes]]
    _requests: dict[tuple[str, str], RequestRow]
    _lock: Any

    def _trim_stream(self, run_id: str, floor: datetime) -> None:
        raise NotImplementedError  # MemoryStreams

    async def prune(
        self,
        *,
        run_id: str | None = None,
        keep_last: int | None = None,
        older_than: datetime | None = None,
    ) -> int:
        """Delete old checkpoints that nothing needs; return how many."""
        async with self._lock:
            threads = {key: [self._scanned(cid, older_than) for cid in ids]
                       for key, ids in self._threads.items()
                       if run_id is None or key[0] == run_id}
            open_at = {(r.run_id, r.checkpoint_id) for r in self._requests.values()
                       if r.answer is None}
            gone = doomed(threads, open_at, keep_last)
            removed_top = [(c, self._checkpoints[c.id].created_at) for c in gone if not c.thread]
            for row in gone:
                self._delete_checkpoint(self._checkpoints[row.id])
            for key in {(row.run_id, row.thread) for row in gone}:
                if not self._threads[key]:  # a whole sub-workflow went with its anchor
                    del self._threads[key]
                    self._appends.pop(key, None)
            self._drop_unreferenced_values()
            top = {(m.run_id, m.id): m.created_at for m in self._checkpoints.values()
                   if m.thread == ""}
            top.update({(c.run_id, c.id): created for c, created in removed_top})
            for run, floor in stream_floors(top, gone).items():
                self._trim_stream(run, floor)
            return len(gone)


    def _scanned(self, checkpoint_id: str, older_than: datetime | None) -> Scanned:
        m = self._checkpoints[checkpoint_id]
        return Scanned(m.run_id, m.thread, m.id,
                       old=older_than is None or m.created_at < older_than,
                       completed=m.status is RunStatus.COMPLETED)

    def _delete_checkpoint(self, meta: CheckpointMeta) -> None:
        del self._checkpoints[meta.id]
        self._threads[(meta.run_id, meta.thread)].remove(meta.id)
        self._task_writes.pop((meta.run_id, meta.id), None)
        for step_key in [k for k in self._steps if k[0] == meta.run_id and k[1] == meta.id]:
            del self._steps[step_key]
        for req_key in [k for k, r in self._requests.items()
                        if r.run_id == meta.run_id and r.checkpoint_id == meta.id]:
            del self._requests[req_key]

    def _drop_unreferenced_values(self) -> None:
        used = {(m.run_id, m.thread, ch, v)
                for m in self._checkpoints.values() for ch, v in m.value_versions.items()}
        for key in [k for k in self._values if k not in used]:
            del self._values[key]
