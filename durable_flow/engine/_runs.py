"""The engine's side of a whole run: its first checkpoint, reading it without a lease, going on.

The runtime creates a run with :func:`first_checkpoint`, reads and checks
what a run goes on from with a :class:`RunReader` (no lease, no writes: the
claim that follows names the head it read, so it is refused if the run moved
on meanwhile), and runs it on under the lease it then holds with
:func:`continue_run`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..model._graph import Workflow
from ..model._records import RunStatus
from ..model._routing import Routed
from ..store._protocols import (
    CheckpointStore,
    CheckpointWrite,
    CommitParts,
    Lease,
    RunRecord,
    RunUpdate,
)
from ._fork import UpdatePlan, plan_update
from ._loop import ThreadOutcome, ThreadRunner
from ._migrate import MigrationPlan, commit_migration, plan_migration
from ._preflight import preflight
from ._run import RunContext
from ._state import ThreadState

__all__ = ["Prepared", "RunReader", "continue_run", "first_checkpoint"]


@dataclass(frozen=True)
class Prepared:
    """What a run goes on from, read before its lease was taken.

    ``checked``: everything its first superstep uses was read and checked
    (``RunReader.prepare``), with the nested heads it continues in
    ``preloaded``; a head not checked (a new run's, a fork's) is read back by
    that superstep itself. ``migration``: committed first, under the lease.
    ``new``: the first checkpoint of a run just created, nothing recorded
    against it.
    """

    state: ThreadState
    max_supersteps: int | None = None
    preloaded: Mapping[str, ThreadState] = field(default_factory=dict)
    checked: bool = True
    migration: MigrationPlan | None = None
    new: bool = False


def first_checkpoint(store: CheckpointStore, workflow: Workflow, lease: Lease,
                     values: dict[str, Any], entry: Routed
                     ) -> tuple[CheckpointWrite, ThreadState]:
    """The input checkpoint of a new run (every channel written) and its state."""
    rc = RunContext(store, lease, workflow.name, None)
    return ThreadRunner(rc, workflow).first_checkpoint(values, entry)


class RunReader:
    """Reads one workflow's runs without a lease: heads, what a run goes on from, plans."""

    def __init__(self, store: CheckpointStore, workflow: Workflow) -> None:
        self.store = store
        self.workflow = workflow

    def _runner(self, run_id: str, max_supersteps: int | None = None) -> ThreadRunner:
        rc = RunContext.reading(self.store, run_id, self.workflow.name)
        return ThreadRunner(rc, self.workflow, max_supersteps=max_supersteps)

    async def head(self, run_id: str, checkpoint_id: str) -> ThreadState:
        """One of the run's checkpoints (a head the store points at) as a typed state."""
        return await self._runner(run_id).load(checkpoint_id)

    async def prepare(self, record: RunRecord) -> Prepared:
        """The run's head and the nested heads its next superstep continues, all checked.

        Damage in anything that superstep reads raises ``CheckpointCorruptedError``
        here, before anything was claimed or written.
        """
        runner = self._runner(record.run_id, record.max_supersteps)
        state = await runner.load(record.head_checkpoint_id or "")
        if state.meta.next_tasks:
            await preflight(runner, state)
        return Prepared(state, record.max_supersteps, runner.rc.preloaded)

    async def plan_migration(self, record: RunRecord) -> MigrationPlan:
        """The migration of ``record`` onto this workflow, checked and built (see ``plan_migration``)."""
        return await plan_migration(RunContext.reading(self.store, record.run_id,
                                                       self.workflow.name), self.workflow, record)

    async def migrated(self, record: RunRecord) -> Prepared:
        """What the run goes on from once migrated onto this workflow (the plan, committed first)."""
        plan = await self.plan_migration(record)
        return Prepared(plan.state, record.max_supersteps, migration=plan)

    async def plan_update(self, run_id: str, head: str, values: Mapping[str, Any],
                          as_node: str | None) -> UpdatePlan:
        """``values`` merged into ``head`` through the reducers (see ``plan_update``)."""
        rc = RunContext.reading(self.store, run_id, self.workflow.name)
        return await plan_update(rc, self.workflow, head, values, as_node)


async def continue_run(rc: RunContext, workflow: Workflow, prepared: Prepared, *,
                       started: Mapping[str, Any] | None = None,
                       answered: Sequence[str] = ()) -> ThreadOutcome:
    """Run ``prepared`` on under ``rc``'s lease until the run completes, waits or fails.

    ``started``: the ``run_started`` event's data (a run just created or
    forked); ``answered``: the requests the claim recorded answers to.
    """
    state = prepared.state
    if started is not None:
        rc.emit("run_started", "", state.meta.superstep, **started)
    for rid in answered:
        rc.emit("request_answered", "", 0, request_id=rid)
    if prepared.migration is not None:
        await commit_migration(rc, workflow, prepared.migration)
    rc.preloaded.update(prepared.preloaded)
    runner = ThreadRunner(rc, workflow, max_supersteps=prepared.max_supersteps)
    if prepared.checked:
        runner.checked(state.meta.id)
    if not state.meta.next_tasks and not state.meta.parked:  # finished before its status was written
        await rc.commit(CommitParts(extends=state.meta.id,
                                    run=RunUpdate(RunStatus.COMPLETED, release=True)))
    return await runner.run(state, new=prepared.new)
