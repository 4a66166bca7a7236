"""MemoryStore: the reference in-process implementation of ``CheckpointStore``.

It keeps the same rows as the SQL stores (encoded bytes, channel deltas), so
the conformance suite checks one behaviour everywhere. Nothing survives the
process; use ``SqliteStore`` for durability.
"""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from ..errors import (
    CheckpointCorruptedError,
    CheckpointNotFoundError,
    LeaseLostError,
    RunExistsError,
    RunNotFoundError,
    RunNotResumableError,
    UnknownRequestError,
)
from ..model._budget import Budget, RunUsage
from ..model._clock import utcnow
from ..model._records import ErrorInfo, RunStatus
from ..model._serde import decode
from ._machine import after_start_failure, failed_start_error
from ._memory_retention import MemoryRetention
from ._memory_streams import MemoryStreams
from ._protocols import (
    HEAD_MOVED,
    Carry,
    CheckpointMeta,
    CheckpointWrite,
    Claim,
    Commit,
    InboxCursor,
    Lease,
    LoadedCheckpoint,
    MailRow,
    RequestRow,
    RunRecord,
    StepRow,
    TaskWrite,
    check_answerable,
    check_claimable,
    check_respondable,
    claimed_record,
    match_mail,
)
from ._segments import merge_block, merge_rows

__all__ = ["MemoryStore"]


def _name(wait: RequestRow) -> object:
    """The event name a wait waits for (its payload); None when it cannot be read."""
    try:
        return decode(wait.payload)
    except (ValueError, TypeError):
        return None


#: The answer a wait closed by its time holds (with ``timed_out`` set).
_CLOSED = b"null"


def _claimable(run: RunRecord, now: datetime) -> bool:
    """Queued, running with no live lease (its holder died), or waiting and due."""
    if run.status is RunStatus.QUEUED:
        return run.start_after is None or run.start_after <= now
    if run.status is RunStatus.WAITING:
        return run.wake_at is not None and run.wake_at <= now
    return run.status is RunStatus.RUNNING and (
        run.lease_expires_at is None or run.lease_expires_at < now)


class MemoryStore(MemoryStreams, MemoryRetention):
    """Checkpoints in memory: fast, isolated, gone when the process ends."""

    def __init__(self) -> None:
        self._runs: dict[str, RunRecord] = {}
        self._checkpoints: dict[str, CheckpointMeta] = {}
        self._threads: dict[tuple[str, str], list[str]] = {}
        # threads whose ids were not added in increasing order (ids made elsewhere):
        # their pages are found by a scan instead of a bisection
        self._unsorted: set[tuple[str, str]] = set()
        self._values: dict[tuple[str, str, str, int], bytes] = {}
        self._appends: dict[tuple[str, str], list[tuple[int, str, bytes]]] = {}
        self._task_writes: dict[tuple[str, str], dict[str, TaskWrite]] = {}
        self._steps: dict[tuple[str, str, str], dict[str, bytes]] = {}
        self._requests: dict[tuple[str, str], RequestRow] = {}
        self._mail: dict[str, list[MailRow]] = {}
        self._graphs: dict[str, bytes] = {}
        self._lock = asyncio.Lock()

    async def setup(self) -> None:
        """Nothing to create."""

    async def close(self) -> None:
        """Nothing to release; the data stays until the object is dropped."""

    # runs -----------------------------------------------------------------
    async def create_run(
        self, run: RunRecord, checkpoints: Sequence[CheckpointWrite], lease: Lease | None,
        *, task_writes: Sequence[TaskWrite] = (), steps: Sequence[StepRow] = (),
        requests: Sequence[RequestRow] = (),
    ) -> None:
        """Insert a run with its first checkpoint(s), the rows recorded against them and its lease."""
        async with self._lock:
            if run.run_id in self._runs:
                raise RunExistsError(run.run_id)
            if lease is not None:
                run = dataclasses.replace(run, lease_owner=lease.owner, lease_epoch=lease.epoch,
                                          lease_expires_at=lease.expires_at)
            self._runs[run.run_id] = run
            for cp in checkpoints:
                self._insert_checkpoint(cp)
            self._save_task_writes(task_writes)
            for row in steps:
                self._steps.setdefault((row.run_id, row.checkpoint_id, row.node), {})[
                    row.name] = row.data
            for req in requests:
                self._requests.setdefault((run.run_id, req.id), req)

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
    async def claim(self, claim: Claim) -> Lease:
        """Take ownership of a run: status, open requests and lease in one step."""
        async with self._lock:
            run = self._require_run(claim.run_id)
            now = utcnow()
            check_claimable(run, claim, now)
            answers = self._new_answers(run.run_id, claim.answers, now)
            settled = self._settle(run.run_id, now)
            for rid, answer in answers.items():
                self._requests[(run.run_id, rid)] = dataclasses.replace(
                    self._requests[(run.run_id, rid)], answer=answer, answered_at=now)
            if answers or settled or run.status is not RunStatus.WAITING:
                run = dataclasses.replace(run, status=RunStatus.RUNNING, error=None,
                                          updated_at=now, wake_at=None)
            run = dataclasses.replace(run, start_attempts=0, start_after=None)
            lease = Lease(run.run_id, claim.owner, run.lease_epoch + 1,
                          now + timedelta(seconds=claim.ttl))
            self._runs[run.run_id] = dataclasses.replace(
                run, lease_owner=lease.owner, lease_epoch=lease.epoch,
                lease_expires_at=lease.expires_at)
            return lease

    def _new_answers(self, run_id: str, answers: Mapping[str, bytes],
                     now: datetime) -> dict[str, bytes]:
        """The answers to record: open requests within their deadline; repeats are skipped."""
        return {rid: answer for rid, answer in answers.items()
                if check_answerable(run_id, rid, self._requests.get((run_id, rid)), answer, now)}

    async def renew_lease(self, lease: Lease, ttl: float) -> Lease:
        """Extend a held lease."""
        async with self._lock:
            run = self._check_lease(lease)
            new = dataclasses.replace(lease, expires_at=utcnow() + timedelta(seconds=ttl))
            self._runs[lease.run_id] = dataclasses.replace(run, lease_expires_at=new.expires_at)
            return new

    async def release_lease(self, lease: Lease, *, requeue: bool = False) -> None:
        """Give the lease up if it is still ours (``requeue``: running becomes queued)."""
        async with self._lock:
            run = self._runs.get(lease.run_id)
            if run and run.lease_epoch == lease.epoch and run.lease_owner == lease.owner:
                status = RunStatus.QUEUED if requeue and run.status is RunStatus.RUNNING \
                    else run.status
                self._runs[lease.run_id] = dataclasses.replace(
                    run, lease_owner=None, lease_expires_at=None, status=status)

    async def claim_next(self, owner: str, ttl: float, workflows: Sequence[tuple[str, str]],
                         *, limit: int, token: str | None = None) -> list[tuple[RunRecord, Lease]]:
        """Claim up to ``limit`` queued or abandoned runs of these workflow versions."""
        async with self._lock:
            now = utcnow()
            mine = [(r, Lease(r.run_id, owner, r.lease_epoch, r.lease_expires_at))
                    for r in self._runs.values()
                    if token is not None and r.claim_token == token and r.lease_owner == owner
                    and r.lease_expires_at is not None and r.lease_expires_at > now]
            if mine:
                return mine
            wanted = set(workflows)
            candidates = sorted(
                (r for r in self._runs.values()
                 if (r.workflow_name, r.workflow_version) in wanted and _claimable(r, now)),
                key=lambda r: (-r.priority, r.created_at, r.run_id))
            claimed: list[tuple[RunRecord, Lease]] = []
            for run in candidates[:limit]:
                lease = Lease(run.run_id, owner, run.lease_epoch + 1,
                              now + timedelta(seconds=ttl))
                run = claimed_record(run, lease, now, token)
                self._runs[run.run_id] = run
                self._settle(run.run_id, now)
                claimed.append((run, lease))
            return claimed

    async def start_failed(self, lease: Lease, error: ErrorInfo, *,
                           max_attempts: int) -> RunRecord:
        """Count a failed start and free the lease."""
        async with self._lock:
            run = self._check_lease(lease)
            now = utcnow()
            status, attempts, after = after_start_failure(run, now, max_attempts=max_attempts)
            run = dataclasses.replace(
                run, status=status, start_attempts=attempts, start_after=after,
                error=failed_start_error(error, attempts) if status is RunStatus.FAILED
                else error, lease_owner=None, lease_expires_at=None, claim_token=None,
                updated_at=now, wake_at=None)
            self._runs[run.run_id] = run
            return run

    async def respond(self, run_id: str, answers: Mapping[str, bytes]) -> RunRecord:
        """Record answers; a waiting run with no open request left becomes queued."""
        async with self._lock:
            run = self._require_run(run_id)
            now = utcnow()
            check_respondable(run, now)
            for rid, answer in self._new_answers(run_id, answers, now).items():
                self._requests[(run_id, rid)] = dataclasses.replace(
                    self._requests[(run_id, rid)], answer=answer, answered_at=now)
            still_open = any(r.run_id == run_id and r.answer is None and r.kind == "request"
                             for r in self._requests.values())
            if run.status is RunStatus.WAITING and not still_open:
                run = self._queue(run_id, now)
            return run

    async def add_usage(self, lease: Lease, usage: RunUsage) -> RunUsage:
        """Add one model call's usage to the run's totals; the new totals."""
        async with self._lock:
            run = self._check_lease(lease)
            self._runs[lease.run_id] = run = dataclasses.replace(run, usage=run.usage + usage)
            return run.usage

    async def set_budget(self, lease: Lease, budget: Budget | None) -> None:
        """Replace the run's budget."""
        async with self._lock:
            run = self._check_lease(lease)
            self._runs[lease.run_id] = dataclasses.replace(run, budget=budget)

    async def cancel_run(self, run_id: str) -> RunRecord:
        """Mark the run cancelled and fence out any holder."""
        async with self._lock:
            run = self._require_run(run_id)
            if run.status.is_final:
                raise RunNotResumableError(run_id, run.status.value, "cancelled")
            run = dataclasses.replace(
                run, status=RunStatus.CANCELLED, lease_owner=None, lease_expires_at=None,
                lease_epoch=run.lease_epoch + 1, updated_at=utcnow(), wake_at=None)
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
            self._check_head(run, commit)
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
            top = [(commit.checkpoint, commit.carry)] if commit.checkpoint is not None else []
            for write, carry in [*top, *commit.nested]:
                self._insert_checkpoint(write)
                if carry is not None:
                    self._carry(run_id, carry, write.meta.id)
            run = dataclasses.replace(run, updated_at=now)
            if commit.run is not None:
                upd = commit.run
                run = dataclasses.replace(
                    run, status=upd.status, error=upd.error, start_attempts=0, start_after=None,
                    head_checkpoint_id=upd.head_checkpoint_id or run.head_checkpoint_id)
                if upd.release:
                    run = dataclasses.replace(run, lease_owner=None, lease_expires_at=None)
                if upd.workflow_version is not None and upd.signature is not None:
                    run = dataclasses.replace(run, workflow_version=upd.workflow_version,
                                              signature=upd.signature)
            self._runs[run_id] = run
            if commit.run is not None and commit.run.status is RunStatus.WAITING:
                self._waiting(run_id, now)

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
        self, run_id: str, *, namespace: str | None = None, thread: str | None = None,
        before: str | None = None, limit: int | None = None,
    ) -> list[CheckpointMeta]:
        """Checkpoint metadata of a run, newest first; a page of them."""
        keys = [key for key in self._threads if key[0] == run_id] \
            if thread is None else [(run_id, thread)]
        rows: list[CheckpointMeta] = []
        for key in keys:
            ids = self._threads.get(key, [])
            if not ids or (namespace is not None
                           and self._checkpoints[ids[0]].namespace != namespace):
                continue  # a thread's checkpoints share its namespace
            if key in self._unsorted:
                rows.extend(self._checkpoints[c] for c in ids if before is None or c < before)
                continue
            end = len(ids) if before is None else bisect.bisect_left(ids, before)
            start = 0 if limit is None else max(0, end - limit)  # a page: its newest ids
            rows.extend(self._checkpoints[c] for c in ids[start:end])
        rows.sort(key=lambda m: m.id, reverse=True)
        return rows if limit is None else rows[:limit]

    async def namespace_heads(self, run_id: str) -> list[CheckpointMeta]:
        """The newest checkpoint of each sub-workflow namespace of a run, by namespace."""
        newest: dict[str, CheckpointMeta] = {}
        for key, ids in self._threads.items():
            if key[0] == run_id and key[1] and ids:
                meta = self._checkpoints[max(ids) if key in self._unsorted else ids[-1]]
                current = newest.get(meta.namespace)
                if current is None or meta.id > current.id:
                    newest[meta.namespace] = meta
        return [newest[ns] for ns in sorted(newest)]

    async def get_requests(
        self, run_id: str, *, open_only: bool = False, checkpoint_id: str | None = None
    ) -> list[RequestRow]:
        """Requests of a run, oldest first."""
        rows = [r for r in self._requests.values()
                if r.run_id == run_id and (not open_only or r.answer is None)
                and (checkpoint_id is None or r.checkpoint_id == checkpoint_id)]
        return sorted(rows, key=lambda r: (r.created_at, r.id))

    async def pending_requests(self, *, workflow_name: str | None = None, limit: int | None = None,
                               after: InboxCursor | None = None) -> list[RequestRow]:
        """Open requests to people whose deadline is ahead, oldest first; ``limit``/``after`` page it."""
        now = utcnow()
        rows = sorted((r for r in self._requests.values() if r.answer is None
                       and r.kind == "request" and (r.expires_at is None or r.expires_at > now)
                       and (workflow_name is None or r.workflow_name == workflow_name)
                       and (after is None or (r.created_at, r.run_id, r.id) > after)),
                      key=lambda r: (r.created_at, r.run_id, r.id))
        return rows if limit is None else rows[:limit]

    # the mailbox and the graphs ------------------------------------------------------
    async def send_event(self, run_id: str, name: str, payload: bytes) -> RunRecord:
        """Keep an event; delivered at once when no execution holds the run."""
        async with self._lock:
            run = self._require_run(run_id)
            now = utcnow()
            if run.status.is_final:
                raise RunNotResumableError(run_id, run.status.value)
            mail = self._mail.setdefault(run_id, [])
            mail.append(MailRow(run_id, len(mail) + 1, name, payload, now))
            held = run.lease_expires_at is not None and run.lease_expires_at > now
            if not held and self._deliver(run_id, now) and run.status is RunStatus.WAITING:
                run = self._queue(run_id, now)
            return run

    async def wait_event(self, lease: Lease, wait: RequestRow) -> RequestRow:
        """Record an event wait; a kept event is delivered to it at once."""
        async with self._lock:
            self._check_lease(lease)
            key = (lease.run_id, wait.id)
            self._requests.setdefault(key, wait)
            self._deliver(lease.run_id, utcnow(), only=wait.id)
            return self._requests[key]

    async def get_mail(self, run_id: str) -> list[MailRow]:
        """A run's events in the order they were sent."""
        return list(self._mail.get(run_id, []))

    async def put_graph(self, signature: str, workflow_name: str, version: str,
                        description: bytes) -> None:
        """Keep a graph's description; a signature already kept is left as it is."""
        self._graphs.setdefault(signature, description)

    async def get_graph(self, signature: str) -> bytes | None:
        """The description kept for ``signature``, or None."""
        return self._graphs.get(signature)

    # retention --------------------------------------------------------------
    # waits ------------------------------------------------------------------
    def _settle(self, run_id: str, now: datetime) -> bool:
        """A claim's first step: deliver kept events, close due waits; True if a wait closed."""
        delivered = self._deliver(run_id, now)
        closed = 0
        for key, req in list(self._requests.items()):
            if req.run_id == run_id and req.answer is None and req.expires_at is not None \
                    and req.expires_at <= now:
                self._requests[key] = dataclasses.replace(
                    req, answer=_CLOSED, answered_at=now, timed_out=True)
                closed += 1
        return bool(delivered or closed)

    def _deliver(self, run_id: str, now: datetime, *, only: str | None = None) -> int:
        """Deliver kept events to open event waits (only to ``only`` when given)."""
        kept = [m for m in self._mail.get(run_id, []) if m.request_id is None]
        if not kept:
            return 0
        waits = sorted((r for r in self._requests.values()
                        if r.run_id == run_id and r.kind == "event" and r.answer is None
                        and (only is None or r.id == only)),
                       key=lambda r: (r.created_at, r.id))
        names = {w.id: n for w in waits if isinstance(n := _name(w), str)}
        pairs = match_mail(waits, kept, names)
        mail = self._mail[run_id]
        for event, wait in pairs:
            self._requests[(run_id, wait.id)] = dataclasses.replace(
                wait, answer=event.payload, answered_at=now)
            mail[event.seq - 1] = dataclasses.replace(event, request_id=wait.id,
                                                      delivered_at=now)
        return len(pairs)

    def _waiting(self, run_id: str, now: datetime) -> None:
        """After a commit left the run waiting: queue it if an event came, else its wake time."""
        if self._deliver(run_id, now):
            self._queue(run_id, now)
            return
        due = [r.expires_at for r in self._requests.values()
               if r.run_id == run_id and r.answer is None and r.expires_at is not None]
        self._runs[run_id] = dataclasses.replace(self._runs[run_id],
                                                 wake_at=min(due) if due else None)

    def _queue(self, run_id: str, now: datetime) -> RunRecord:
        run = dataclasses.replace(self._runs[run_id], status=RunStatus.QUEUED, updated_at=now,
                                  wake_at=None)
        self._runs[run_id] = run
        return run

    def _carry(self, run_id: str, carry: Carry, checkpoint_id: str) -> None:
        """Move the rows recorded at ``carry.source`` onto ``checkpoint_id``, renaming nodes."""
        def node(old: str) -> str:
            return carry.nodes.get(old, old)

        for key, req in list(self._requests.items()):
            if req.run_id == run_id and req.checkpoint_id == carry.source:
                self._requests[key] = dataclasses.replace(
                    req, checkpoint_id=checkpoint_id, node=node(req.node))
        writes = self._task_writes.pop((run_id, carry.source), {})
        self._task_writes[(run_id, checkpoint_id)] = {
            node(n): dataclasses.replace(w, checkpoint_id=checkpoint_id, node=node(n))
            for n, w in writes.items()}
        for (rid, cp, n) in [k for k in self._steps if k[:2] == (run_id, carry.source)]:
            self._steps[(rid, checkpoint_id, node(n))] = self._steps.pop((rid, cp, n))

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

    def _check_head(self, run: RunRecord, commit: Commit) -> None:
        """Refuse a commit whose run head or thread head moved (before mutating)."""
        lease = commit.lease
        if commit.extends is not None and run.head_checkpoint_id != commit.extends:
            raise LeaseLostError(run.run_id, lease.epoch, HEAD_MOVED)
        writes = [commit.checkpoint] if commit.checkpoint is not None else []
        for meta in (w.meta for w in [*writes, *(w for w, _ in commit.nested)]):
            ids = self._threads.get((run.run_id, meta.thread))
            if (ids[-1] if ids else None) != meta.parent_id:
                raise LeaseLostError(run.run_id, lease.epoch, HEAD_MOVED)

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
        ids = self._threads.setdefault((meta.run_id, meta.thread), [])
        if ids and meta.id < ids[-1]:
            self._unsorted.add((meta.run_id, meta.thread))
        ids.append(meta.id)
        for channel, data in cp.values.items():
            self._values[(meta.run_id, meta.thread, channel, meta.seq)] = data
        chunks = self._appends.setdefault((meta.run_id, meta.thread), [])
        new = [(channel, meta.seq, data) for channel, data in cp.appends.items()]
        first = merge_block(meta.seq)
        if first is not None:  # the block this checkpoint completes: one segment a channel
            at = len(chunks)
            while at and chunks[at - 1][0] >= first:
                at -= 1
            merged = merge_rows([*((ch, seq, data) for seq, ch, data in chunks[at:]), *new])
            if merged is not None:
                del chunks[at:]
                new = merged
        chunks.extend(sorted((seq, channel, data) for channel, seq, data in new))

    def _save_task_writes(self, writes: Sequence[TaskWrite]) -> None:
        for w in writes:
            self._task_writes.setdefault((w.run_id, w.checkpoint_id), {})[w.node] = w
