"""The SQL implementation of ``CheckpointStore``, shared by every SQL backend.

Each store method is a *transaction function*: a generator that yields the
statements to run (:class:`Fetch`, :class:`Execute`, ...) and receives their
results, without doing any I/O itself. A backend's :class:`Driver` opens the
transaction (``write=True`` must take the write lock up front), feeds the
generator until it returns and commits, or rolls back if it raises. So
SQLite can run a whole superstep commit in one hop to its database thread,
and a PostgreSQL driver can run the same functions with ``await``. Having
no side effects, a transaction function can also be run again from the
start: the store hands drivers a call that makes the generator, so a driver
may retry a transaction that did not commit (a lost connection, a deadlock).

The statements are :class:`durable_flow.store.sql._tables.Queries`, compiled for the
backend's :class:`~durable_flow.store.sql._tables.SqlDialect` (or read back from the
statement cache, ``_cache.py``). Dialect specifics stay behind that dialect
(SQLAlchemy's, with its ``INSERT ... ON CONFLICT``) and the driver (PRAGMAs,
``BEGIN IMMEDIATE``, locking).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import Any, Self

from ...model._audit import AuditAnchor
from ...model._budget import Budget, RunUsage
from ...model._decisions import Decision
from ...model._records import ErrorInfo, PendingRequest, RunStatus
from .._approval_rows import Answerer, DecisionDraft
from .._protocols import (
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
    RunRows,
    StepRow,
    TaskWrite,
)
from ._approvals_api import SqlApprovals
from ._cache import statements_for
from ._decisions import audit_trail_tx, decisions_tx
from ._fleet import RunFilter, pause_tx, retry_tx, select_runs_tx, unpause_tx
from ._flow import SqlFlow
from ._inbox import pending_views_tx
from ._ops import (
    RUNS_CHANNEL,
    Driver,
    Execute,
    ExecuteMany,
    Fetch,
    FetchEach,
    Notify,
    Op,
    Row,
    Tx,
    drive,
    drive_async,
    execute,
    execute_many,
    fetch,
    fetch_each,
)
from ._reads import (
    checkpoint_ids_tx,
    child_checkpoints_tx,
    first_checkpoint_tx,
    get_checkpoint_tx,
    get_requests_tx,
    get_steps_tx,
    get_task_writes_tx,
    list_checkpoints_tx,
    load_checkpoint_tx,
    namespace_heads_tx,
    pending_requests_tx,
    thread_head_tx,
)
from ._runs import (
    cancel_run_tx,
    claim_next_tx,
    claim_tx,
    create_run_tx,
    get_run_tx,
    list_runs_tx,
    release_lease_tx,
    renew_lease_tx,
    respond_tx,
    start_failed_tx,
)
from ._shared import insert_checkpoint
from ._spending import add_usage_tx, set_budget_tx
from ._streams import append_stream_tx, read_stream_tx
from ._waits import (
    get_graph_tx,
    get_mail_tx,
    put_graph_tx,
    send_event_tx,
    settle_held_tx,
    wait_event_tx,
)
from ._writes import commit_tx, prune_page_tx, prune_tx, put_step_tx, put_task_writes_tx

__all__ = [
    "RUNS_CHANNEL", "Driver", "Execute", "ExecuteMany", "Fetch", "FetchEach", "Notify", "Op",
    "Row", "SqlStore", "Tx",
    "cancel_run_tx", "claim_next_tx", "claim_tx", "commit_tx", "create_run_tx", "drive",
    "drive_async", "execute", "execute_many", "fetch", "fetch_each", "get_checkpoint_tx",
    "get_requests_tx", "get_run_tx", "get_steps_tx", "get_task_writes_tx", "insert_checkpoint",
    "list_checkpoints_tx", "list_runs_tx", "load_checkpoint_tx", "namespace_heads_tx",
    "pending_requests_tx", "prune_page_tx", "prune_tx", "put_step_tx", "put_task_writes_tx",
    "release_lease_tx", "renew_lease_tx", "respond_tx", "start_failed_tx", "thread_head_tx",
]

# Runs a global prune reads per transaction to find those with checkpoints to remove.
_PRUNE_PAGE = 200

# -- the store --------------------------------------------------------------------------


class SqlStore(SqlApprovals, SqlFlow, abc.ABC):
    """``CheckpointStore`` over SQL: every method is one transaction on the driver.

    Subclasses open the backend in ``setup`` and provide :attr:`driver`.
    """

    def __init__(self, dialect: str) -> None:
        # the compiled statements of the dialect ("sqlite", "postgresql"), from the
        # statement cache when it has them (then SQLAlchemy is not even imported)
        self._q = statements_for(dialect)
        self._dialect_name = dialect  # schedules and limits compile theirs on first use

    @property
    @abc.abstractmethod
    def driver(self) -> Driver:
        """The backend's driver; raises ``StoreError`` before ``setup``."""

    @abc.abstractmethod
    async def setup(self) -> None:
        """Create or upgrade the schema; idempotent."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release connections."""

    async def __aenter__(self) -> Self:
        await self.setup()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def create_run(
        self, run: RunRecord, checkpoints: Sequence[CheckpointWrite], lease: Lease | None,
        *, task_writes: Sequence[TaskWrite] = (), steps: Sequence[StepRow] = (),
        requests: Sequence[RequestRow] = (), decisions: Sequence[DecisionDraft] = (),
    ) -> None:
        """Insert a run with its first checkpoint(s), their recorded rows and lease atomically."""
        await self.driver.run(partial(create_run_tx, self._q, run, checkpoints, lease, task_writes,
                                      steps, requests, decisions), write=True)

    async def get_run(self, run_id: str) -> RunRecord | None:
        """Return the run row, or None."""
        return await self.driver.run(partial(get_run_tx, self._q, run_id), write=False)

    async def list_runs(
        self, *, status: RunStatus | None = None, workflow_name: str | None = None,
        labels: Mapping[str, str] | None = None, since: datetime | None = None,
        until: datetime | None = None, limit: int | None = None,
    ) -> list[RunRecord]:
        """Runs matching the filters, newest first."""
        if labels or since is not None or until is not None or limit is not None:
            f = RunFilter(status, workflow_name, labels, since, until, limit)
            return await self.driver.run(partial(select_runs_tx, self._q, f), write=False)
        return await self.driver.run(partial(list_runs_tx, self._q, status, workflow_name),
                                     write=False)

    async def pause_run(self, run_id: str, *, reason: str | None = None,
                        decision: DecisionDraft | None = None,
                        error: ErrorInfo | None = None) -> RunRecord:
        """Pause the run (see ``RunStore.pause_run``)."""
        return await self.driver.run(partial(pause_tx, self._q, run_id, reason, decision, error),
                                     write=True)

    async def unpause_run(self, run_id: str, *,
                          decision: DecisionDraft | None = None) -> RunRecord:
        """Make a paused run claimable again (see ``RunStore.unpause_run``)."""
        return await self.driver.run(partial(unpause_tx, self._q, run_id, decision), write=True)

    async def retry_run(self, run_id: str) -> RunRecord:
        """Queue a failed run again for a worker (see ``RunStore.retry_run``)."""
        return await self.driver.run(partial(retry_tx, self._q, run_id), write=True)

    async def claim(self, claim: Claim) -> Lease:
        """Take ownership of a run in one transaction (see ``RunStore.claim``)."""
        return await self.driver.run(partial(claim_tx, self._q, claim), write=True)

    async def renew_lease(self, lease: Lease, ttl: float) -> Lease:
        """Extend a held lease; ``LeaseLostError`` if it was taken over."""
        return await self.driver.run(partial(renew_lease_tx, self._q, lease, ttl), write=True,
                                     idempotent=True)

    async def release_lease(self, lease: Lease, *, requeue: bool = False) -> None:
        """Give the lease up; does nothing if it is no longer ours."""
        await self.driver.run(partial(release_lease_tx, self._q, lease, requeue), write=True,
                                     idempotent=True)

    async def claim_next(self, owner: str, ttl: float, workflows: Sequence[tuple[str, str]],
                         *, limit: int, token: str | None = None) -> list[tuple[RunRecord, Lease]]:
        """Claim up to ``limit`` runs for a worker (see ``RunStore.claim_next``).

        With a token the claim is idempotent: tried again after a lost COMMIT
        reply, it returns the runs it took.
        """
        return await self.driver.run(
            partial(claim_next_tx, self._q, owner, ttl, workflows, limit, token), write=True,
            idempotent=token is not None)

    async def start_failed(self, lease: Lease, error: ErrorInfo, *,
                           max_attempts: int) -> RunRecord:
        """Count a failed start and free the lease (see ``RunStore.start_failed``)."""
        return await self.driver.run(
            partial(start_failed_tx, self._q, lease, error, max_attempts), write=True)

    async def respond(self, run_id: str, answers: Mapping[str, bytes],
                      answerer: Answerer | None = None) -> RunRecord:
        """Record answers without executing (see ``RunStore.respond``)."""
        return await self.driver.run(partial(respond_tx, self._q, run_id, answers, answerer),
                                     write=True)

    async def decisions(self, run_id: str) -> list[Decision]:
        """A run's decisions, oldest first (see ``DecisionLog.decisions``)."""
        return await self.driver.run(partial(decisions_tx, self._q, run_id), write=False,
                                     idempotent=True)

    async def audit_trail(self, run_id: str) -> tuple[AuditAnchor, list[Decision]]:
        """The run's anchor and decisions in one read (see ``DecisionLog.audit_trail``)."""
        return await self.driver.run(partial(audit_trail_tx, self._q, run_id), write=False,
                                     idempotent=True)

    async def add_usage(self, lease: Lease, usage: RunUsage) -> RunUsage:
        """Add one model call's usage to the run's totals, in its own transaction."""
        return await self.driver.run(partial(add_usage_tx, self._q, lease, usage), write=True)

    async def set_budget(self, lease: Lease, budget: Budget | None) -> None:
        """Replace the run's budget (idempotent: the same values again change nothing)."""
        await self.driver.run(partial(set_budget_tx, self._q, lease, budget), write=True,
                              idempotent=True)

    async def cancel_run(self, run_id: str, decision: DecisionDraft | None = None) -> RunRecord:
        """Mark the run cancelled, fence out any holder, close its requests (and record it)."""
        return await self.driver.run(partial(cancel_run_tx, self._q, run_id, decision), write=True)

    async def commit(self, commit: Commit) -> None:
        """Write a commit in one transaction; ``LeaseLostError`` writes nothing."""
        await self.driver.run(partial(commit_tx, self._q, commit), write=True)

    async def put_task_writes(self, lease: Lease, writes: Sequence[TaskWrite]) -> None:
        """Save finished tasks' writes in one transaction."""
        await self.driver.run(partial(put_task_writes_tx, self._q, lease, writes), write=True,
                                     idempotent=True)

    async def put_step(self, lease: Lease, step: StepRow) -> None:
        """Record a durable step result."""
        await self.driver.run(partial(put_step_tx, self._q, lease, step), write=True,
                                     idempotent=True)

    async def get_task_writes(self, run_id: str, checkpoint_id: str) -> list[TaskWrite]:
        """Task writes saved against a base checkpoint, in node order."""
        return await self.driver.run(partial(get_task_writes_tx, self._q, run_id, checkpoint_id),
                                     write=False)

    async def get_steps(self, run_id: str, checkpoint_id: str, node: str) -> dict[str, bytes]:
        """Recorded ``ctx.step`` results of one node run from a base checkpoint."""
        return await self.driver.run(partial(get_steps_tx, self._q, run_id, checkpoint_id, node),
                                     write=False)

    async def load_checkpoint(self, run_id: str, checkpoint_id: str) -> LoadedCheckpoint:
        """Read one checkpoint back exactly."""
        return await self.driver.run(partial(load_checkpoint_tx, self._q, run_id, checkpoint_id),
                                     write=False)

    async def get_checkpoint(self, run_id: str, checkpoint_id: str) -> CheckpointMeta | None:
        """Metadata of one checkpoint, or None."""
        return await self.driver.run(partial(get_checkpoint_tx, self._q, run_id, checkpoint_id),
                                     write=False)

    async def thread_head(self, run_id: str, thread: str) -> CheckpointMeta | None:
        """The newest checkpoint of a thread, or None."""
        return await self.driver.run(partial(thread_head_tx, self._q, run_id, thread), write=False)

    async def first_checkpoint(self, run_id: str, thread: str) -> CheckpointMeta | None:
        """The oldest checkpoint of a thread (lowest seq), or None; one index row."""
        return await self.driver.run(partial(first_checkpoint_tx, self._q, run_id, thread),
                                     write=False)

    async def checkpoint_ids(self, run_id: str, part: str, *, limit: int) -> list[str]:
        """At most ``limit`` ids of the run's checkpoints that end with ``part``, else start with it."""
        return await self.driver.run(partial(checkpoint_ids_tx, self._q, run_id, part, limit),
                                     write=False)

    async def list_checkpoints(
        self, run_id: str, *, namespace: str | None = None, thread: str | None = None,
        before: str | None = None, limit: int | None = None,
    ) -> list[CheckpointMeta]:
        """Checkpoint metadata of a run, newest first; a page of them (an index range)."""
        return await self.driver.run(
            partial(list_checkpoints_tx, self._q, run_id, namespace, thread, before, limit),
            write=False)

    async def child_checkpoints(self, run_id: str, parent_id: str) -> list[CheckpointMeta]:
        """The checkpoints written on ``parent_id``, oldest first (a few index rows)."""
        return await self.driver.run(partial(child_checkpoints_tx, self._q, run_id, parent_id),
                                     write=False)

    async def namespace_heads(self, run_id: str) -> list[CheckpointMeta]:
        """The newest checkpoint of each sub-workflow namespace of a run (an index range)."""
        return await self.driver.run(partial(namespace_heads_tx, self._q, run_id), write=False)

    async def get_requests(
        self, run_id: str, *, open_only: bool = False, checkpoint_id: str | None = None
    ) -> list[RequestRow]:
        """Requests of a run, oldest first."""
        return await self.driver.run(
            partial(get_requests_tx, self._q, run_id, open_only, checkpoint_id), write=False)

    async def pending_requests(self, *, workflow_name: str | None = None, limit: int | None = None,
                               after: InboxCursor | None = None) -> list[RequestRow]:
        """Every open request across all runs, oldest first (the inbox); ``limit``/``after`` page it."""
        return await self.driver.run(
            partial(pending_requests_tx, self._q, workflow_name, limit, after), write=False)

    async def pending_views(self, *, workflow_name: str | None = None
                            ) -> list[PendingRequest] | None:
        """The whole inbox as ``PendingRequest`` (``_inbox.py``); None when a row is damaged."""
        return await self.driver.run(partial(pending_views_tx, self._q, workflow_name), write=False)

    async def prune(
        self,
        *,
        run_id: str | None = None,
        keep_last: int | None = None,
        older_than: datetime | None = None,
    ) -> int:
        """Delete old checkpoints nothing needs; return how many.

        One transaction per run that has checkpoints to remove, which locks
        that run alone; the runs are found a page at a time by reads that
        lock nothing. So commits and renewals of other runs never wait behind
        a prune, and no transaction holds more than one run's checkpoints.
        """
        if run_id is not None:
            return await self.driver.run(
                partial(prune_tx, self._q, run_id, keep_last, older_than), write=True)
        removed, after = 0, ""
        while True:
            runs, last = await self.driver.run(partial(
                prune_page_tx, self._q, after, _PRUNE_PAGE, keep_last, older_than), write=False)
            for one in runs:
                removed += await self.driver.run(
                    partial(prune_tx, self._q, one, keep_last, older_than), write=True)
            if last is None:
                return removed
            after = last

    async def send_event(self, run_id: str, name: str, payload: bytes) -> RunRecord:
        """Keep an event in the run's mailbox (see ``Mailbox.send_event``)."""
        return await self.driver.run(partial(send_event_tx, self._q, run_id, name, payload),
                                     write=True)

    async def wait_event(self, lease: Lease, wait: RequestRow) -> RequestRow:
        """Record an event wait; a kept event is delivered to it at once."""
        return await self.driver.run(partial(wait_event_tx, self._q, lease, wait), write=True)

    async def settle(self, lease: Lease) -> bool:
        """Deliver kept events and close due waits of a run we hold (a barrier with parked tasks)."""
        return await self.driver.run(partial(settle_held_tx, self._q, lease), write=True)

    async def append_stream(self, run_id: str, entries: Sequence[Mapping[str, Any]]) -> int:
        """Append entries to the run's stream log, in their own transaction; the last ``seq``."""
        return await self.driver.run(partial(append_stream_tx, self._q, run_id, list(entries)),
                                     write=True)

    async def read_stream(self, run_id: str, after: int = 0,
                          limit: int = 1000) -> list[dict[str, Any]]:
        """At most ``limit`` stream log rows after ``seq`` ``after``, in order."""
        return await self.driver.run(partial(read_stream_tx, self._q, run_id, after, limit),
                                     write=False)

    async def get_mail(self, run_id: str) -> list[MailRow]:
        """A run's events in the order they were sent."""
        return await self.driver.run(partial(get_mail_tx, self._q, run_id), write=False)

    async def put_graph(self, signature: str, workflow_name: str, version: str,
                        description: bytes) -> None:
        """Keep a graph's description; a signature already kept is left as it is."""
        await self.driver.run(partial(put_graph_tx, self._q, signature, workflow_name, version,
                                      description), write=True)

    async def get_graph(self, signature: str) -> bytes | None:
        """The description kept for ``signature``, or None."""
        return await self.driver.run(partial(get_graph_tx, self._q, signature), write=False)

    async def export_rows(self, run_id: str) -> RunRows | None:
        """Every stored row of a run, and its graph (see ``Transfer``); None if unknown."""
        from ._transfer import export_rows_tx, transfer_queries

        return await self.driver.run(partial(export_rows_tx, transfer_queries(self._q.dialect),
                                             run_id), write=False)

    async def import_rows(self, rows: RunRows) -> None:
        """Write a run's rows back in one transaction; ``RunExistsError`` if its id is taken."""
        from ._transfer import import_rows_tx, transfer_queries

        await self.driver.run(partial(import_rows_tx, transfer_queries(self._q.dialect), rows,
                                      self._q), write=True)
