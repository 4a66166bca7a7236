"""The engine's side of ``Send``: checking gotos, instance arguments, concurrency bounds.

An instance (``summarize[3]``) is an ordinary task whose ``TaskId`` names its
node and index: the superstep loop looks its node up, and everything it
records (task write, steps, requests, history, events) is keyed by the task
id, so each instance is saved, resumed and answered on its own. Its argument
is encoded when routing schedules it and stored with the checkpoint that
lists it in ``next_tasks`` (``CheckpointMeta.task_args``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import InvalidGotoError, SerializationError
from ..model._frozen import freeze
from ..model._graph import END, NodeSpec, Workflow
from ..model._send import Send, arg_adapter
from ..model._serde import decode, encode
from ..model._task_id import TaskId
from ._state import DAMAGE, corrupted

if TYPE_CHECKING:
    from ..store._protocols import CheckpointMeta, RequestRow

__all__ = ["Gates", "blocked_subworkflows", "gates", "run_gated", "split_goto", "task_arg"]

T = TypeVar("T")
Gates = dict[str, asyncio.Semaphore]


def split_goto(
    node: str, spec: NodeSpec, targets: Sequence[str | Send] | None,
) -> tuple[tuple[str, ...] | None, tuple[Send, ...], tuple[bytes, ...]]:
    """A ``Command``'s goto as plain targets, ``Send``s and their encoded arguments.

    Every target must be declared in the node's ``goto`` (``InvalidGotoError``,
    END allowed only as a plain target); a ``Send`` whose argument cannot be
    stored raises ``SerializationError`` naming the sending node (``node``).
    """
    if targets is None:
        return None, (), ()
    plain: list[str] = []
    sends: list[Send] = []
    for target in targets:
        name = target.node if isinstance(target, Send) else target
        declared = name in spec.goto and name != END
        allowed = declared if isinstance(target, Send) else declared or name == END
        if not isinstance(name, str) or not allowed:
            raise InvalidGotoError(node, repr(name) if not isinstance(name, str) else name,
                                   spec.goto)
        if isinstance(target, Send):
            sends.append(target)
        else:
            plain.append(target)
    data = []
    for send in sends:
        try:
            data.append(encode(send.arg))
        except TypeError as exc:
            raise SerializationError(node, f"the arg of Send({send.node!r})", str(exc)) from None
    return tuple(plain), tuple(sends), tuple(data)


def task_arg(meta: CheckpointMeta, spec: NodeSpec, task: TaskId) -> Any:
    """The argument of the task ``task`` (None for a plain task), read-only.

    Validated into the node's ``arg_type``; stored data that cannot be read
    or no longer fits raises ``CheckpointCorruptedError``.
    """
    data = meta.task_args.get(str(task))
    if data is None:
        return None
    try:
        value = decode(data)
        if spec.arg_type is not None and spec.subworkflow is None:
            value = arg_adapter(spec.arg_type).validate_python(value)
    except DAMAGE as exc:  # a pydantic ValidationError is a ValueError
        raise corrupted(meta.run_id, meta.id, exc, f"the arg of {str(task)!r}") from None
    return freeze(value)


def gates(wf: Workflow, tasks: Iterable[TaskId]) -> Gates:
    """One semaphore per node with ``max_concurrency`` among ``tasks``."""
    out: Gates = {}
    for task in tasks:
        node = task.node
        limit = wf.nodes[node].max_concurrency
        if limit is not None and node not in out:
            out[node] = asyncio.Semaphore(limit)
    return out


async def run_gated(gate: Gates, task: TaskId, start: Callable[[], Awaitable[T]]) -> T:
    """Run ``start()`` once its node's semaphore (if any) lets it in."""
    sem = gate.get(task.node)
    if sem is None:
        return await start()
    async with sem:
        return await start()


def blocked_subworkflows(prefix: str, step: int, tasks: Iterable[TaskId],
                         requests: Iterable[RequestRow]) -> set[TaskId]:
    """The sub-workflow tasks with an open request somewhere inside them.

    A request inside task ``t`` has an id starting ``<prefix><t>@<step>/``;
    the task part is read off each id once, so this stays linear in the
    number of requests however many instances there are.
    """
    wanted = {f"{t}@{step}": t for t in tasks}
    found: set[TaskId] = set()
    for req in requests:
        if req.id.startswith(prefix):
            head, slash, _ = req.id[len(prefix):].partition("/")
            if slash and head in wanted:
                found.add(wanted[head])
    return found
