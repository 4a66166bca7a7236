"""What a superstep finds recorded for it, and the waits a parking task opens at once.

:func:`recorded_work` reads, for a superstep run again (after a crash or with
answers), the task writes, answers and open requests recorded at its base;
:func:`open_now` commits a parking task's new waits the moment it stops.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import LeaseLostError
from ..model._task_id import TaskId
from ..store._protocols import CommitParts, RequestRow
from ._instances import blocked_subworkflows
from ._parked import inner_ready
from ._task import TaskResult

if TYPE_CHECKING:
    from ._loop import ThreadRunner
    from ._run import RunContext
    from ._state import ThreadState

__all__ = ["open_now", "recorded_work"]


async def recorded_work(
    runner: ThreadRunner, st: ThreadState, step: int
) -> tuple[dict[TaskId, TaskResult], dict[TaskId, dict[int, RequestRow]], set[TaskId]]:
    """Task writes, answers and open requests already recorded for this superstep.

    A sub-workflow task with an open wait inside is blocked, unless a branch
    parked inside it has its answer (it goes on while the others wait).
    """
    store, run_id, base = runner.rc.store, runner.rc.run_id, st.meta
    saved = {r.node: r for r in (TaskResult.from_write(w, runner.schema)
                                 for w in await store.get_task_writes(run_id, base.id))}
    answered: dict[TaskId, dict[int, RequestRow]] = {}
    blocked: set[TaskId] = set()
    # a parked task anchored here (a fork's first checkpoint) is no task of this superstep
    anchored = {TaskId.parse(name) for p in base.parked if p.anchor == base.id
                for name in p.names}
    for req in await store.get_requests(run_id, checkpoint_id=base.id):
        local = TaskId.parse(req.node.rsplit(".", 1)[-1])
        if local in anchored:
            continue
        answered.setdefault(local, {})[req.index] = req
        if req.answer is None:
            blocked.add(local)
    subs = [n for n in st.tasks if runner.wf.nodes[n.node].kind == "subworkflow"]
    if subs:
        open_rows = await store.get_requests(run_id, open_only=True)
        for t in blocked_subworkflows(runner.prefix, step, subs, open_rows):
            if not await inner_ready(runner, t, base.id, step, open_rows):
                blocked.add(t)
    return saved, answered, blocked


async def open_now(rc: RunContext, requests: Sequence[RequestRow]) -> None:
    """Commit a parking task's new waits at once: its question never waits for a sibling.

    The barrier records them again (an existing id is left as it is); a
    crash before it finds them recorded at the superstep's base, as open
    waits of a task that parks again.
    """
    try:
        await rc.commit(CommitParts(requests=[dataclasses.replace(q, parked=True)
                                              for q in requests]))
    except LeaseLostError as exc:
        rc.fence.lose(exc)
        raise
