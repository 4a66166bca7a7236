"""Reading back, before a resumed superstep runs any task, everything it will use.

The first superstep after a load uses recorded data: finished tasks' saved
writes, recorded answers, ``ctx.step`` results and the heads of the
sub-workflows it continues, at every nesting level. Damage found while tasks
run would stop the run after a sibling had already saved its write; found
first, it stops the run before anything is written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..model._serde import decode
from ._instances import task_arg
from ._state import DAMAGE, ThreadState, corrupted
from ._task import TaskResult

if TYPE_CHECKING:
    from ._loop import ThreadRunner

__all__ = ["preflight"]


async def preflight(runner: ThreadRunner, st: ThreadState) -> None:
    """Decode what the first superstep from ``st`` reads; damage raises CheckpointCorruptedError.

    The sub-workflow heads it loads are kept in ``runner.rc.preloaded`` for
    the tasks that continue them, so nothing is decoded twice.
    """
    rc, base = runner.rc, st.meta
    store, run_id = rc.store, rc.run_id
    for write in await store.get_task_writes(run_id, base.id):
        TaskResult.from_write(write, runner.schema)
    for req in await store.get_requests(run_id, checkpoint_id=base.id):
        if req.answer is not None:
            _check(run_id, base.id, req.answer, f"the answer to {req.id!r}")
    for node in st.tasks:
        spec = runner.wf.nodes.get(node.node)
        if spec is None:
            continue
        task_arg(base, spec, node)
        qual = runner.qualify(str(node))
        for name, data in (await store.get_steps(run_id, base.id, qual)).items():
            _check(run_id, base.id, data, f"the step {name!r} of {qual!r}")
        if spec.kind == "subworkflow" and spec.subworkflow is not None:
            child = runner.child_runner(spec, st, base.superstep + 1, node)
            head = await store.thread_head(run_id, child.thread)
            if head is not None:
                state = rc.preloaded[child.thread] = await child.load(head.id)
                await preflight(child, state)


def _check(run_id: str, checkpoint_id: str, data: bytes, what: str) -> None:
    try:
        decode(data)
    except DAMAGE as exc:
        raise corrupted(run_id, checkpoint_id, exc, what) from None
