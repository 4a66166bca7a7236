"""Creating a run: its record, input checkpoint and (when executed at once) lease, in one transaction."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..engine._loop import RunContext, ThreadRunner
from ..engine._state import ThreadState
from ..errors import InvalidInputError, RunExistsError
from ..model._budget import Budget
from ..model._clock import utcnow
from ..model._graph import Workflow
from ..model._records import RunStatus
from ..model._routing import Routed
from ..store._protocols import CheckpointStore, Lease, RunRecord
from ._versions import GraphBook

__all__ = ["check_budget_arg", "check_concurrency_key", "create_run"]


def check_budget_arg(budget: Any) -> Budget | None:
    """``budget=`` of ``run``/``submit``: a ``Budget`` or None."""
    if budget is not None and not isinstance(budget, Budget):
        raise InvalidInputError(f"budget must be a Budget, got {budget!r:.60}")
    return budget


def check_concurrency_key(key: Any) -> str | None:
    """``concurrency_key=`` of ``submit``: a non-empty string or None."""
    if key is not None and (not isinstance(key, str) or not key):
        raise InvalidInputError(f"concurrency_key must be a non-empty string, got {key!r:.60}")
    return key


async def create_run(store: CheckpointStore, graphs: GraphBook, workflow: Workflow, lease: Lease,
                     values: dict[str, Any], entry: Routed, digest: str, *, limit: int,
                     workflow_ref: str | None, status: RunStatus, priority: int = 0,
                     budget: Budget | None = None,
                     started_by: str | None = None,
                     labels: Mapping[str, str] | None = None,
                     concurrency_key: str | None = None) -> ThreadState | None:
    """Create a run with its input checkpoint in one transaction.

    ``status`` is ``running`` (the caller executes it, under ``lease``) or
    ``queued`` (for a worker); a run with nothing to run is created
    ``completed``. ``budget`` (else the workflow's) is stored with the run, and
    so are ``started_by``, ``labels``, ``concurrency_key`` (with the workflow's
    ``max_runs_per_key``) and the workflow's ``operators``/``viewers``.
    Returns the new head state, or None when the id is taken.
    """
    from ._fleet import check_labels

    tags = check_labels(labels)  # checked before anything is written
    runner = ThreadRunner(RunContext(store, lease, workflow.name, None), workflow)
    write, state = runner.first_checkpoint(values, entry)
    done = not state.meta.next_tasks
    now = utcnow()
    new = RunRecord(
        run_id=lease.run_id, workflow_name=workflow.name,
        status=RunStatus.COMPLETED if done else status, created_at=now, updated_at=now,
        head_checkpoint_id=write.meta.id, signature=workflow.signature,
        max_supersteps=limit, workflow_ref=workflow_ref, input_digest=digest,
        workflow_version=workflow.version, priority=priority,
        budget=budget if budget is not None else workflow.budget, started_by=started_by,
        operators=workflow.operators, viewers=workflow.viewers, labels=tags,
        concurrency_key=concurrency_key,
        max_per_key=workflow.max_runs_per_key if concurrency_key is not None else None)
    held = lease if new.status is RunStatus.RUNNING else None
    await graphs.keep(workflow)  # so a changed graph can be told apart later
    try:
        await store.create_run(new, [write], held)
    except RunExistsError:
        return None  # another caller created it first
    return state
