"""``Send``: dynamic fan-out, one task per item; and the ids of those tasks.

A node returning ``Command(goto=[Send("summarize", doc) for doc in docs])``
starts one *instance* of ``summarize`` per ``Send`` in the next superstep.
Each instance is a task of its own, with its own id: the node id followed by
its index in ``Send`` order, ``summarize[0]``, ``summarize[1]``, ... Node ids
never hold ``[``, so the node of any task id is the part before it.

Task ids sort in instance order (``summarize[2]`` before ``summarize[10]``)
with :func:`task_key`; plain node ids sort as text, as they always did.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from ..errors import InvalidInputError, SerializationError
from ._serde import encode

if TYPE_CHECKING:
    from ._graph import NodeSpec, Workflow

__all__ = [
    "Send",
    "arg_adapter",
    "encode_arg",
    "group_tasks",
    "instance_id",
    "node_of",
    "task_key",
]


@dataclass(frozen=True, slots=True)
class Send:
    """Start one instance of ``node`` in the next superstep, with ``arg`` as its ``ctx.arg``.

    Return it in ``Command(goto=[...])``, alone, in a list, or mixed with
    plain targets; ``node`` must be one of the sending node's declared
    ``goto`` targets. The instances of one superstep are numbered in ``Send``
    order (``summarize[0]``, ``summarize[1]``, ...), run concurrently (at most
    the node's ``max_concurrency`` at once) and their updates merge through
    the reducers in that order. ``arg`` is validated into the node's
    ``arg_type`` when it declares one; for a sub-workflow node it is a dict of
    inner fields applied over the node's ``inputs``. It must be storable.
    """

    node: str
    arg: Any = None


def instance_id(node: str, index: int) -> str:
    """The task id of the ``index``-th instance of ``node`` in its superstep."""
    return f"{node}[{index}]"


def node_of(task: str) -> str:
    """The node a task id runs: ``summarize[3]`` -> ``summarize``; a plain id is itself."""
    return task.partition("[")[0]


def task_key(task: str) -> tuple[str, int]:
    """Sort key of a task id: by node, then instance index (a plain task first)."""
    node, bracket, rest = task.partition("[")
    if not bracket:
        return node, -1
    return node, int(rest[:-1]) if rest[:-1].isdigit() else -1


_INSTANCE = re.compile(r"(?P<node>[^\[\]]+)\[(?P<index>\d+)\]")


def group_tasks(tasks: Iterable[str]) -> list[str]:
    """Task ids for people: runs of consecutive instances shown as ``summarize[0..39]``."""
    out: list[str] = []
    run: tuple[str, int, int] | None = None  # node, first index, last index

    def close() -> None:
        if run is not None:
            node, first, last = run
            out.append(instance_id(node, first) if first == last
                       else f"{node}[{first}..{last}]")

    for task in tasks:
        m = _INSTANCE.fullmatch(task)
        if m is not None and run is not None and run[0] == m["node"] \
                and int(m["index"]) == run[2] + 1:
            run = (run[0], run[1], run[2] + 1)
            continue
        close()
        run = (m["node"], int(m["index"]), int(m["index"])) if m is not None else None
        if m is None:
            out.append(task)
    close()
    return out


_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def arg_adapter(arg_type: Any) -> TypeAdapter[Any]:
    """The (cached) pydantic adapter validating arguments into ``arg_type``."""
    try:
        adapter = _ADAPTERS.get(arg_type)
    except TypeError:  # an unhashable type annotation: not cached
        return TypeAdapter(arg_type)
    if adapter is None:
        adapter = _ADAPTERS[arg_type] = TypeAdapter(arg_type)
    return adapter


def encode_arg(spec: NodeSpec, task: str, arg: Any) -> bytes:
    """Check ``arg`` for the instance ``task`` of ``spec`` and encode it for the checkpoint.

    An argument that does not fit the node's ``arg_type`` (or, for a
    sub-workflow, is not a mapping of its inner fields) raises
    ``InvalidInputError`` naming the instance; one that cannot be stored
    raises ``SerializationError``.
    """
    if spec.subworkflow is not None:
        arg = _inner_fields(spec.subworkflow.workflow, task, arg)
    elif spec.arg_type is not None:
        try:
            arg = arg_adapter(spec.arg_type).validate_python(arg)
        except ValidationError as exc:
            raise InvalidInputError(
                f"the arg of {task!r} does not fit its arg_type "
                f"{_type_name(spec.arg_type)}: {_errors(exc)}") from None
    try:
        return encode(arg)
    except TypeError as exc:
        raise SerializationError(task, "arg", str(exc)) from None


def _inner_fields(inner: Workflow, task: str, arg: Any) -> dict[str, Any]:
    """A sub-workflow instance's argument: a mapping of the inner workflow's fields."""
    if arg is None:
        return {}
    if not isinstance(arg, Mapping) or not all(isinstance(k, str) for k in arg):
        raise InvalidInputError(
            f"the arg of {task!r} must be a dict of the fields of workflow {inner.name!r}, "
            f"got {type(arg).__name__}: {arg!r:.60}")
    schema = inner.schema
    unknown = sorted(k for k in arg if k not in schema.fields)
    if unknown and not schema.free_form:
        raise InvalidInputError(
            f"the arg of {task!r} names fields workflow {inner.name!r} lacks: "
            f"{', '.join(unknown)}")
    return dict(arg)


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or repr(tp)


def _errors(exc: ValidationError) -> str:
    return "; ".join(
        (".".join(str(p) for p in e["loc"]) + ": " if e["loc"] else "") + e["msg"]
        for e in exc.errors())
