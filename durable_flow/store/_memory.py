"""MemoryStore: the reference in-process implementation of ``CheckpointStore``.

It keeps the same rows as the SQL stores (encoded bytes, channel deltas), so
the conformance suite checks one behaviour everywhere. Nothing survives the
process; use ``SqliteStore`` for durability.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from datetime import datetime, timedelta

from ..errors import (
    CheckpointCorruptedError,
    CheckpointNotFoundError,
    LeaseLostError,
    RunLockedError,
    RunNotFoundError,
    UnknownRequestError,
)
from ..model._clock import utcnow
from ..model._records import RunStatus
from ._protocols import (
    CheckpointMeta,
    CheckpointWrite,
    Commit,
    Lease,
    LoadedCheckpoint,
    RequestRow,
    RunRecord,
    StepRow,
    TaskWrite,
)

__all__ = ["MemoryStore"]


class MemoryStore:
    """Checkpoints in memory: fast, isolated, gone when the process ends."""

    def __init__(self) -> None:
        self._runs: dict[str, RunRecord] = {}
        self._checkpoints: dict[str, CheckpointMeta] = {}
        self._threads: dict[tuple[str, str], list[str]] = {}
        self._values: dict[tuple[str, str, str, int], bytes] = {}
        self._appends: dict[tuple[str, str], list[tuple[int, str, bytes]]] = {}
        self._task_writes: dict[tuple[str, str], dict[str, TaskWrite]] = {}
        self._steps: dict[tuple[str, str, str], dict[str, bytes]] = {}
        self._requests: dict[tuple[str, str], RequestRow] = {}
        self._lock = asyncio.Lock()

    async def setup(self) -> None:
        """Nothing to create."""

    async def close(self) -> None:
        """Nothing to release; the data stays until the object is dropped."""

    # runs -----------------------------------------------------------------
    async def create_run(
        self, run: RunRecord, checkpoints: Sequence[CheckpointWrite], lease: Lease | None
    ) -> None:
        """Insert a run with its first checkpoint(s)."""
        async with self._lock:
            if run.run_id in self._runs:
                raise ValueError(f"run {run.run_id} already exists")
            if lease is not None:
                run = dataclasses.replace(run, lease_owner=lease.owner, lease_epoch=lease.epoch,
                                          lease_expires_at=lease.expires_at)
            self._runs[run.run_id] = run
            for cp in checkpoints:
                self._insert_checkpoint(cp)

    async def get_run(self, run_id: str) -> RunRecord | None:
        """Return the run row, or None."""
        return self._runs.get(run_id)

    async def list_runs(
        self, *, status: RunStatus | None = None, workflow_name: str | None = None
    ) -> list[RunRecord]:
        """Runs matching the filters, newest first."""
        rows = [r for r in self._runs.values()
                if (status is None or r.status == status)
                and (workflow_name is None or r.workflow_name == workflow_name)]
        return sorted(rows, key=lambda r: (r.created_at, r.run_id), reverse=True)

    # leases ---------------------------------------------------------------
    async def acquire_lease(self, run_id: str, owner: str, ttl: float) -> Lease:
        """Take the run's lease with a higher epoch."""
        async with self._lock:
            run = self._require_run(run_id)
            now = utcnow()
            live = run.lease_owner is not None and run.lease_expires_at is not None \
                and run.lease_expires_at > now
            if live and run.lease_owner != owner:
                left = (run.lease_expires_at - now).total_seconds() if run.lease_expires_at else 0
                raise RunLockedError(run_id, run.lease_owner or "?", left)
            lease = Lease(run_id, owner, run.lease_epoch + 1, now + timedelta(seconds=ttl))
            self._runs[run_id] = dataclasses.replace(
                run, lease_owner=owner, lease_epoch=lease.epoch, lease_expires_at=lease.expires_at)
            return lease

    async def renew_lease(self, lease: Lease, ttl: float) -> Lease:
        """Extend a held lease."""
        async with self._lock:
            run = self._check_lease(lease)
            new = dataclasses.replace(lease, expires_at=utcnow() + timedelta(seconds=ttl))
            self._runs[lease.run_id] = dataclasses.replace(run, lease_expires_at=new.expires_at)
            return new

    async def release_lease(self, lease: Lease) -> None:
        """Give the lease up if it is still ours."""
        async with self._lock:
            run = self._runs.get(lease.run_id)
            if run and run.lease_epoch == lease.epoch and run.lease_owner == lease.owner:
                self._runs[lease.run_id] = dataclasses.replace(
                    run, lease_owner=None, lease_expires_at=None)

    async def cancel_run(self, run_id: str) -> RunRecord:
        """Mark the run cancelled and fence out any holder."""
        async with self._lock:
            run = self._require_run(run_id)
            run = dataclasses.replace(
                run, status=RunStatus.CANCELLED, lease_owner=None, lease_expires_at=None,
                lease_epoch=run.lease_epoch + 1, updated_at=utcnow())
            self._runs[run_id] = run
            for key, req in list(self._requests.items()):
                if req.run_id == run_id and req.answer is None:
                    del self._requests[key]
            return run

    # writes ---------------------------------------------------------------
    async def commit(self, commit: Commit) -> None:
        """Apply a commit atomically (checks first, then mutates)."""
        async with self._lock:
            run = self._check_lease(commit.lease)
            now = utcnow()
            run_id = run.run_id
            self._check_references(run_id, commit)
            # In the order Commit documents: answers, reopen, drop_open_requests, requests,
            # task_writes, mark, checkpoint, run.
            for rid, answer in commit.answers.items():
                req = self._requests[(run_id, rid)]
                self._requests[(run_id, rid)] = dataclasses.replace(
                    req, answer=answer, answered_at=now)
            for rid in commit.reopen:
                req = self._requests[(run_id, rid)]
                self._requests[(run_id, rid)] = dataclasses.replace(
                    req, answer=None, answered_at=None)
            if commit.drop_open_requests:
                for key, req in list(self._requests.items()):
                    if req.run_id == run_id and req.answer is None:
                        del self._requests[key]
            for req in commit.requests:
                self._requests.setdefault((run_id, req.id), req)
            self._save_task_writes(commit.task_writes)
            if commit.mark is not None:
                meta = self._checkpoints[commit.mark.checkpoint_id]
                self._checkpoints[meta.id] = dataclasses.replace(
                    meta, status=commit.mark.status, error=commit.mark.error)
            if commit.checkpoint is not None:
                self._insert_checkpoint(commit.checkpoint)
            run = dataclasses.replace(run, updated_at=now)
            if commit.run is not None:
                upd = commit.run
                run = dataclasses.replace(
                    run, status=upd.status, error=upd.error,
                    head_checkpoint_id=upd.head_checkpoint_id or run.head_checkpoint_id)
                if upd.release:
                    run = dataclasses.replace(run, lease_owner=None, lease_expires_at=None)
            self._runs[run_id] = run

    async def put_task_writes(self, lease: Lease, writes: Sequence[TaskWrite]) -> None:
        """Save finished tasks' writes."""
        async with self._lock:
            self._check_lease(lease)
            self._save_task_writes(writes)

    async def put_step(self, lease: Lease, step: StepRow) -> None:
        """Record a durable step result."""
        async with self._lock:
            self._check_lease(lease)
            key = (step.run_id, step.checkpoint_id, step.node)
            self._steps.setdefault(key, {})[step.name] = step.data

    # reads ----------------------------------------------------------------
    async def get_task_writes(self, run_id: str, checkpoint_id: str) -> list[TaskWrite]:
        """Task writes saved against a base checkpoint, in node order."""
        writes = self._task_writes.get((run_id, checkpoint_id), {})
        return [writes[n] for n in sorted(writes)]

    async def get_steps(self, run_id: str, checkpoint_id: str, node: str) -> dict[str, bytes]:
        """Recorded step results of one node run."""
        return dict(self._steps.get((run_id, checkpoint_id, node), {}))

    async def load_checkpoint(self, run_id: str, checkpoint_id: str) -> LoadedCheckpoint:
        """Read one checkpoint back exactly."""
        meta = await self.get_checkpoint(run_id, checkpoint_id)
        if meta is None:
            raise CheckpointNotFoundError(run_id, checkpoint_id)
        values: dict[str, bytes] = {}
        for ch, v in meta.value_versions.items():
            data = self._values.get((run_id, meta.thread, ch, v))
            if data is None:
                raise CheckpointCorruptedError(
                    run_id, checkpoint_id, f"value of channel {ch!r} at seq {v} is missing")
            values[ch] = data
        logs: dict[str, list[bytes]] = {}
        for seq, channel, data in self._appends.get((run_id, meta.thread), []):
            if seq <= meta.seq and channel in meta.log_lengths:
                logs.setdefault(channel, []).append(data)
        return LoadedCheckpoint(meta=meta, values=values, logs=logs)

    async def get_checkpoint(self, run_id: str, checkpoint_id: str) -> CheckpointMeta | None:
        """Metadata of one checkpoint, or None."""
        meta = self._checkpoints.get(checkpoint_id)
        return meta if meta is not None and meta.run_id == run_id else None

    async def thread_head(self, run_id: str, thread: str) -> CheckpointMeta | None:
        """The newest checkpoint of a thread."""
        ids = self._threads.get((run_id, thread))
        if not ids:
            return None
        meta = self._checkpoints.get(ids[-1])
        if meta is None:
            raise CheckpointCorruptedError(run_id, ids[-1], "the thread's newest checkpoint is missing")
        return meta

    async def list_checkpoints(
        self, run_id: str, *, namespace: str | None = None, thread: str | None = None
    ) -> list[CheckpointMeta]:
        """Checkpoint metadata of a run, newest first."""
        rows = [m for m in self._checkpoints.values()
                if m.run_id == run_id
                and (namespace is None or m.namespace == namespace)
                and (thread is None or m.thread == thread)]
        return sorted(rows, key=lambda m: m.id, reverse=True)

    async def get_requests(
        self, run_id: str, *, open_only: bool = False, checkpoint_id: str | None = None
    ) -> list[RequestRow]:
        """Requests of a run, oldest first."""
        rows = [r for r in self._requests.values()
                if r.run_id == run_id and (not open_only or r.answer is None)
                and (checkpoint_id is None or r.checkpoint_id == checkpoint_id)]
        return sorted(rows, key=lambda r: (r.created_at, r.id))

    async def pending_requests(self, *, workflow_name: str | None = None) -> list[RequestRow]:
        """Every open request across all runs, oldest first."""
        rows = [r for r in self._requests.values() if r.answer is None
                and (workflow_name is None or r.workflow_name == workflow_name)]
        return sorted(rows, key=lambda r: (r.created_at, r.run_id, r.id))

    # retention --------------------------------------------------------------
    async def prune(
        self,
        *,
        run_id: str | None = None,
        keep_last: int | None = None,
        older_than: datetime | None = None,
    ) -> int:
        """Delete old checkpoints that nothing needs; return how many."""
        async with self._lock:
            protected = self._protected()
            doomed: list[CheckpointMeta] = []
            for (rid, _thread), ids in self._threads.items():
                if run_id is not None and rid != run_id:
                    continue
                candidates = ids[:-keep_last] if keep_last else ids[:-1]
                for cid in candidates:
                    meta = self._checkpoints[cid]
                    if (rid, cid) in protected:
                        continue
                    if older_than is not None and meta.created_at >= older_than:
                        continue
                    doomed.append(meta)
            for meta in doomed:
                self._delete_checkpoint(meta)
            self._drop_unreferenced_values()
            return len(doomed)

    # helpers ----------------------------------------------------------------
    def _require_run(self, run_id: str) -> RunRecord:
        run = self._runs.get(run_id)
        if run is None:
            raise RunNotFoundError(run_id)
        return run

    def _check_lease(self, lease: Lease) -> RunRecord:
        run = self._require_run(lease.run_id)
        if run.lease_epoch != lease.epoch or run.lease_owner != lease.owner:
            raise LeaseLostError(lease.run_id, lease.epoch)
        return run

    def _check_references(self, run_id: str, commit: Commit) -> None:
        """Refuse a commit naming requests or checkpoints that do not exist (before mutating)."""
        for rid in [*commit.answers, *commit.reopen]:
            if (run_id, rid) not in self._requests:
                raise UnknownRequestError(run_id, rid)
        if commit.mark is not None:
            meta = self._checkpoints.get(commit.mark.checkpoint_id)
            if meta is None or meta.run_id != run_id:
                raise CheckpointNotFoundError(run_id, commit.mark.checkpoint_id)

    def _insert_checkpoint(self, cp: CheckpointWrite) -> None:
        meta = cp.meta
        self._checkpoints[meta.id] = meta
        self._threads.setdefault((meta.run_id, meta.thread), []).append(meta.id)
        for channel, data in cp.values.items():
            self._values[(meta.run_id, meta.thread, channel, meta.seq)] = data
        chunks = self._appends.setdefault((meta.run_id, meta.thread), [])
        for channel, data in sorted(cp.appends.items()):
            chunks.append((meta.seq, channel, data))

    def _save_task_writes(self, writes: Sequence[TaskWrite]) -> None:
        for w in writes:
            self._task_writes.setdefault((w.run_id, w.checkpoint_id), {})[w.node] = w

    def _protected(self) -> set[tuple[str, str]]:
        """``(run_id, checkpoint_id)`` of every checkpoint prune must keep.

        Heads, checkpoints of open requests, and the anchors of sub-threads
        whose head is not completed. Task writes protect nothing: pending ones
        are always on a thread head (older ones belong to merged supersteps).
        """
        protected = {(run, ids[-1]) for (run, _thread), ids in self._threads.items() if ids}
        protected |= {(r.run_id, r.checkpoint_id)
                      for r in self._requests.values() if r.answer is None}
        for (run, thread), ids in self._threads.items():
            # "<anchor checkpoint id>/<node>"; node ids may hold "/", checkpoint ids do not.
            if "/" in thread and ids and \
                    self._checkpoints[ids[-1]].status != RunStatus.COMPLETED:
                protected.add((run, thread.partition("/")[0]))
        return protected

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
