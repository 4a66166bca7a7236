"""A worker's side of an execution: starting a run it claimed, on the runtime it owns.

``claim_next`` gives a worker the lease before anything was read; these two
steps then check that the worker's code can start the run (a failure here is
a failed start the worker counts, never a run that half-started) and execute
it exactly as ``Runtime.resume`` would.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..engine._loop import RunContext, ThreadOutcome, ThreadRunner
from ..engine._state import ThreadState
from ..model._graph import Workflow
from ..model._records import RunResult, RunStatus
from ..store._protocols import Lease, RunRecord, RunUpdate
from ._audit import check_backed
from ._inputs import last_result
from ._versions import check_graph

if TYPE_CHECKING:
    from ._runtime import Runtime

__all__ = ["Prepared", "execute_claimed", "prepare_claimed"]

#: A claimed run's head and the nested heads its next superstep continues, all checked.
Prepared = tuple[ThreadState, dict[str, ThreadState]]


async def prepare_claimed(rt: Runtime, workflow: Workflow, record: RunRecord) -> Prepared:
    """Check that ``workflow`` can start a claimed run; read what its first superstep uses.

    Raises what keeps the run from starting (``WorkflowMismatchError``,
    ``CheckpointCorruptedError``, ``AuditError``, ...) having run nothing.
    """
    await check_graph(rt.store, workflow, record)
    await check_backed(rt.store, record.run_id)  # AuditError: a failed start, nothing ran
    return await rt._prepared(workflow, record)


async def execute_claimed(rt: Runtime, workflow: Workflow, record: RunRecord, lease: Lease, *,
                          prepared: Prepared, sent_at: float | None = None) -> RunResult:
    """Execute a claimed, prepared run under ``lease``, as ``Runtime.resume`` would.

    ``sent_at``: the ``time.monotonic()`` reading taken as the claim was sent
    (the lease's local deadline counts from it).
    """
    head = record.head_checkpoint_id or ""
    state, preloaded = prepared

    async def go(rc: RunContext) -> ThreadOutcome:
        rc.preloaded.update(preloaded)
        runner = ThreadRunner(rc, workflow, max_supersteps=record.max_supersteps)
        runner.checked(state.meta.id)
        if not state.meta.next_tasks and not state.meta.parked:
            await rc.commit(extends=head, run=RunUpdate(RunStatus.COMPLETED, release=True))
        return await runner.run(state)

    return await last_result(rt._exec.execute(workflow, lease, go, events=False,
                                              sent_at=sent_at))
