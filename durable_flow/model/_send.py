"""``Send``: dynamic fan-out, one task per item; checking and encoding each task's arg.

A node returning ``Command(goto=[Send("summarize", doc) for doc in docs])``
starts one *instance* of ``summarize`` per ``Send`` in the next superstep.
Each instance is a task of its own, with its own id (a ``TaskId``,
``summarize[0]``, ``summarize[1]``, ... in ``Send`` order; see ``_task_id``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from ..errors import InvalidInputError, SerializationError
from ._serde import encode

if TYPE_CHECKING:
    from ._graph import NodeSpec, Workflow
    from ._task_id import TaskId

__all__ = ["Send", "arg_adapter", "encode_arg"]


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


def encode_arg(spec: NodeSpec, task: TaskId, arg: Any) -> bytes:
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
                f"the arg of {str(task)!r} does not fit its arg_type "
                f"{_type_name(spec.arg_type)}: {_errors(exc)}") from None
    try:
        return encode(arg)
    except TypeError as exc:
        raise SerializationError(str(task), "arg", str(exc)) from None


def _inner_fields(inner: Workflow, task: TaskId, arg: Any) -> dict[str, Any]:
    """A sub-workflow instance's argument: a mapping of the inner workflow's fields."""
    if arg is None:
        return {}
    if not isinstance(arg, Mapping) or not all(isinstance(k, str) for k in arg):
        raise InvalidInputError(
            f"the arg of {str(task)!r} must be a dict of the fields of workflow {inner.name!r}, "
            f"got {type(arg).__name__}: {arg!r:.60}")
    schema = inner.schema
    unknown = sorted(k for k in arg if k not in schema.fields)
    if unknown and not schema.free_form:
        raise InvalidInputError(
            f"the arg of {str(task)!r} names fields workflow {inner.name!r} lacks: "
            f"{', '.join(unknown)}")
    return dict(arg)


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or repr(tp)


def _errors(exc: ValidationError) -> str:
    return "; ".join(
        (".".join(str(p) for p in e["loc"]) + ": " if e["loc"] else "") + e["msg"]
        for e in exc.errors())
