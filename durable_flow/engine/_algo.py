"""Pure planning of a superstep: task writes merged through the reducers, and the next tasks.

No store access and no I/O. :func:`apply_writes` merges the finished tasks'
updates in task order (node id, then instance) into a thread's values and
node histories; :func:`next_tasks` routes from the merged state (edges,
conditions, ``Command.goto``, ``Send`` instances, join buffers). The loop
(``_loop.py``) commits what they return.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ConflictingUpdateError
from ..model._blackboard import StateSchema
from ..model._frozen import freeze
from ..model._graph import Workflow
from ..model._messages import Message
from ..model._routing import Completed, Routed, route
from ._histories import MESSAGES, history_chunk
from ._state import LogGrowth, history_channel
from ._task import TaskResult

__all__ = ["Changes", "apply_writes", "next_tasks", "refers_to_messages"]

#: What a merge changed: the value channels (their bytes when a task's own
#: encoding is the stored one, else None) and the chunks appended to each log.
Changes = tuple[dict[str, bytes | None], dict[str, list[bytes]]]


def refers_to_messages(schema: StateSchema) -> bool:
    """Whether node histories refer to the messages log (it is one), not copy it."""
    return MESSAGES in schema.fields and schema.fields[MESSAGES].is_log


def apply_writes(
    schema: StateSchema, writes: Sequence[TaskResult], values: dict[str, Any],
    histories: dict[str, list[Message]], grown: LogGrowth, *, history_refs: bool,
) -> Changes:
    """Apply ``writes`` in their order through the reducers, into ``values``/``histories``.

    Two writes of one last-write-wins field raise ``ConflictingUpdateError``.
    Appends grow the thread's log buffers in place (O(items appended));
    ``grown`` remembers their lengths before, to undo them. ``history_refs``
    (:func:`refers_to_messages`): a history chunk names its messages' places.
    """
    lww: dict[str, str] = {}
    changed: dict[str, bytes | None] = {}
    appended: dict[str, list[bytes]] = {}
    for r in writes:
        start = len(values.get(MESSAGES, ())) if history_refs else 0  # where its messages go
        task = str(r.node)
        for name, value in r.update.items():
            spec = schema.field(task, name)
            if spec.is_lww:
                if name in lww:
                    raise ConflictingUpdateError(name, [lww[name], task])
                lww[name] = task
                values[name] = freeze(value)
                changed[name] = r.encoded[name]
            elif spec.is_log:
                values[name] = grown.append(values.get(name, ()), value)
                appended.setdefault(name, []).append(r.encoded[name])
            else:
                values[name] = freeze(schema.reduce(task, name, values.get(name), value))
                changed[name] = None
        if r.history:
            histories[task] = grown.append(histories.get(task, ()), r.history)
            appended.setdefault(history_channel(task), []).append(
                history_chunk(r, start) if history_refs else r.history_bytes or b"[]")
    return changed, appended


def next_tasks(wf: Workflow, state: Any, writes: Sequence[TaskResult],
               joins: Mapping[str, Sequence[str]], *,
               held: frozenset[str] = frozenset()) -> Routed:
    """The tasks the finished ``writes`` lead to from the merged ``state`` (a snapshot).

    ``joins`` are the join buffers of the checkpoint merged from; ``held``
    names nodes with a parked task (their fan-ins wait for them).
    """
    done = [Completed(r.node, r.goto, r.reason, r.sends) for r in writes]
    return route(wf, state, done, joins, held=held)
