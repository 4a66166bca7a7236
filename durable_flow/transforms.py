"""State transforms: small, declarative reshapings of the blackboard between nodes.

A transform works on a copy of the blackboard's values and its node writes
what changed. Transforms compose left to right with ``>>`` and are added as a
node with ``builder.add_transform(id, t)``::

    from durable_flow.transforms import default, guard, merge_into, rename

    tidy = rename(draft="text") >> default(tone="neutral") >> guard(
        "text != ''", "there is no text to send")
    builder.add_transform("tidy", tidy)

Removing a key (``pick``, ``drop``, ``rename``, ``merge_into(drop=True)``)
resets a last-write-wins field to its default (to ``None`` on a free-form
blackboard); fields with a reducer, such as ``messages``, are never reset
and cannot be written by a transform (their reducer would apply the whole
value again).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel

from .engine._context import NodeContext
from .errors import ExpressionError, GuardError, StateUpdateError
from .model._blackboard import Blackboard, schema_for
from .model._graph import Condition, ConditionLike, NodeSpec
from .model._retry import RetryPolicy

__all__ = [
    "GuardError",
    "Step",
    "Transform",
    "default",
    "drop",
    "guard",
    "merge_into",
    "pick",
    "rename",
    "transform",
]

ALL = "*"
"""In ``Step.writes``: the step may write any field."""


@dataclass(frozen=True, slots=True)
class Step:
    """One transform step: a function of the working values, and what it reads and writes.

    ``apply(values, node)`` changes the dict ``values`` in place. ``reads``
    and ``writes`` are declared for the build-time data-flow check
    (``writes`` containing ``"*"`` means any field).
    """

    label: str
    apply: Callable[[dict[str, Any], str], None]
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Transform:
    """A sequence of steps applied left to right; compose with ``>>``."""

    steps: tuple[Step, ...]

    def __rshift__(self, other: Transform) -> Transform:
        if not isinstance(other, Transform):
            return NotImplemented
        return Transform(self.steps + other.steps)

    def __str__(self) -> str:
        return " >> ".join(s.label for s in self.steps)

    def apply(self, values: Mapping[str, Any], node: str = "<transform>") -> dict[str, Any]:
        """The values after every step (a new dict; ``values`` is not changed)."""
        working = dict(values)
        for step in self.steps:
            step.apply(working, node)
        return working

    @property
    def reads(self) -> tuple[str, ...]:
        """Fields read from the blackboard (not those an earlier step wrote)."""
        written: set[str] = set()
        out: list[str] = []
        for step in self.steps:
            out += [f for f in step.reads if f not in written and f not in out]
            written.update(step.writes)
        return tuple(out)

    @property
    def writes(self) -> tuple[str, ...] | None:
        """Fields it may write, or None when any field (``pick``)."""
        out: list[str] = []
        for step in self.steps:
            if ALL in step.writes:
                return None
            out += [f for f in step.writes if f not in out]
        return tuple(out)

    def node_spec(self, id: str, *, retry: RetryPolicy | None = None, timeout: float | None = None,
                  skip_if: ConditionLike | None = None) -> NodeSpec:
        """The workflow node for this transform (kind ``"transform"``)."""
        problems: list[str] = []
        skip: Condition | None = None
        if skip_if is not None:
            try:
                skip = Condition.of(skip_if)
            except (ExpressionError, TypeError) as exc:
                problems.append(f"transform {id!r} skip_if: {exc}")

        async def run_transform(state: Any, ctx: NodeContext) -> dict[str, Any]:
            return self.update(state, ctx.node)

        run_transform.__qualname__ = run_transform.__name__ = f"transform_{id}"
        meta = {"transform": self, "reads_from": dict.fromkeys(self.reads, "transform"),
                "problems": tuple(problems)}
        return NodeSpec(id=id, fn=run_transform, kind="transform", retry=retry, timeout=timeout,
                        skip_if=skip, produces=self.writes, consumes=self.reads,
                        meta=MappingProxyType(meta))

    def update(self, state: Any, node: str = "<transform>") -> dict[str, Any]:
        """The update this transform makes to ``state`` (a Blackboard or a mapping)."""
        before = _values(state)
        after = self.apply(before, node)
        schema = schema_for(type(state)) if isinstance(state, Blackboard) else None
        defaults = schema.default_values() if schema is not None else {}
        update: dict[str, Any] = {}
        for name in before.keys() | after.keys():
            spec = schema.fields.get(name) if schema is not None else None
            if spec is not None and not spec.is_lww:
                if name in after and after[name] is not before.get(name):
                    raise StateUpdateError(node, name, "a transform cannot write a reducer field")
                continue
            if name not in after:
                new = defaults.get(name)
                if before[name] != new:
                    update[name] = new
            elif name not in before or after[name] != before[name]:
                update[name] = after[name]
        return update


def _values(state: Any) -> dict[str, Any]:
    if isinstance(state, BaseModel):
        values = {name: getattr(state, name) for name in type(state).model_fields}
        return values | dict(state.model_extra or {})
    if isinstance(state, Mapping):
        return dict(state)
    raise TypeError(f"a transform works on a Blackboard or a mapping, not {type(state).__name__}")


def _one(label: str, fn: Callable[[dict[str, Any], str], None], reads: Iterable[str] = (),
         writes: Iterable[str] = ()) -> Transform:
    return Transform((Step(label, fn, tuple(reads), tuple(writes)),))


def pick(*keys: str) -> Transform:
    """Keep only ``keys``; every other last-write-wins field is reset."""
    keep = set(keys)

    def apply(values: dict[str, Any], node: str) -> None:
        for name in [k for k in values if k not in keep]:
            del values[name]

    return _one(f"pick({', '.join(keys)})", apply, writes=(ALL,))


def drop(*keys: str) -> Transform:
    """Remove ``keys`` (reset them to their defaults)."""

    def apply(values: dict[str, Any], node: str) -> None:
        for name in keys:
            values.pop(name, None)

    return _one(f"drop({', '.join(keys)})", apply, writes=keys)


def rename(mapping: Mapping[str, str] | None = None, /, **names: str) -> Transform:
    """Move values to new keys: ``rename(old="new")`` or ``rename({"old": "new"})``."""
    moves = {**(mapping or {}), **names}

    def apply(values: dict[str, Any], node: str) -> None:
        taken = {old: values.pop(old) for old in moves if old in values}
        for old, value in taken.items():
            values[moves[old]] = value

    label = ", ".join(f"{o}->{n}" for o, n in moves.items())
    return _one(f"rename({label})", apply, reads=moves, writes=[*moves, *moves.values()])


def default(mapping: Mapping[str, Any] | None = None, /, **values: Any) -> Transform:
    """Fill keys that are missing, None or empty (``""``, ``[]``, ``{}``) with a value."""
    fill = {**(mapping or {}), **values}

    def apply(working: dict[str, Any], node: str) -> None:
        for name, value in fill.items():
            current = working.get(name)
            if current is None or (isinstance(current, str | list | dict) and not current):
                working[name] = value

    return _one(f"default({', '.join(fill)})", apply, writes=fill)


def merge_into(target: str, *keys: str, sep: str | None = None, drop: bool = False) -> Transform:
    """Combine several keys into ``target``: a dict of them, or their texts joined by ``sep``.

    Without ``sep`` the target gets ``{key: value}`` for every present key;
    with ``sep`` it gets the non-empty values as text joined by ``sep``.
    ``drop=True`` also removes the source keys.
    """

    def apply(values: dict[str, Any], node: str) -> None:
        present = {k: values[k] for k in keys if k in values}
        if sep is None:
            merged: Any = present
        else:
            merged = sep.join(str(v) for v in present.values() if v not in (None, ""))
        if drop:
            for name in keys:
                values.pop(name, None)
        values[target] = merged

    writes = [target, *keys] if drop else [target]
    return _one(f"merge_into({target} <- {', '.join(keys)})", apply, reads=keys, writes=writes)


def transform(key: str, fn: Callable[[Any], Any], *, to: str | None = None) -> Transform:
    """Set ``to`` (default: ``key`` itself) to ``fn(value of key)``."""
    target = to or key

    def apply(values: dict[str, Any], node: str) -> None:
        values[target] = fn(values.get(key))

    name = getattr(fn, "__name__", "fn")
    arrow = f" -> {target}" if target != key else ""
    return _one(f"transform({key}, {name}{arrow})", apply, reads=(key,), writes=(target,))


def guard(predicate: str | Callable[[Any], bool], message: str | None = None) -> Transform:
    """Fail the node with ``GuardError`` when ``predicate`` is false.

    ``predicate`` is a condition expression over the values (``"score > 3"``)
    or a function of a read-only mapping of them.
    """
    cond = Condition(predicate)
    text = message or f"{cond.label} is false"

    def apply(values: dict[str, Any], node: str) -> None:
        if not cond(MappingProxyType(values)):
            raise GuardError(node, text)

    reads = tuple(p.split(".")[0] for p in sorted(cond.paths))
    return _one(f"guard({cond.label})", apply, reads=reads)
