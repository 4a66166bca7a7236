"""Taking a run again in process when an answer queued it at its waiting commit.

With ``waits="branch"`` (at the top level or in a sub-workflow), an answer for
a parked task may be recorded while the run executes other branches. When it
lands between the engine's last look at the answers and its ``waiting`` commit,
the store leaves the run ``queued``
(``_machine.after_waiting_commit``): right for workers, which take queued runs.
A caller of ``run``, ``resume`` or ``fork`` (and their stream forms) asked
this runtime to execute the run, so it claims the run again and goes on from
its head instead of handing back ``queued``. If the claim is refused (another
executor took the run first), ``queued`` is the answer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from ..errors import RunLockedError, RunNotResumableError
from ..model._graph import Workflow
from ..model._records import Event, RunStatus

if TYPE_CHECKING:
    from ._runtime import Runtime

__all__ = ["going_on"]

async def going_on(rt: Runtime, workflow: Workflow, execution: AsyncIterator[Event],
                   events: bool) -> AsyncIterator[Event]:
    """``execution``'s events; a ``queued`` end (an answer came meanwhile) is continued."""
    final: Event | None = None
    async for event in execution:
        if event.result is not None and event.result.status is RunStatus.QUEUED:
            final = event  # the execution's last event: held back while it is taken again
            continue
        yield event
    if final is None:
        return
    assert final.result is not None
    again = rt._continue(workflow, final.result.run_id, None, False, events=events)
    try:
        first = await anext(again)
    except (RunLockedError, RunNotResumableError):
        yield final  # another executor holds it (or finished it): it is queued for us
        return
    yield first
    async for event in again:
        yield event
