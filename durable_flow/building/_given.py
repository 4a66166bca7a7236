"""What a workflow builder is given, checked where it is given and reported by ``build()``.

Misuse of a builder method (a wrong type, a bad option) does not raise
where it happens: :class:`Problems` records it and hands back a value to go
on with (None, or a harmless stand-in), so ``build()`` reports every
problem in one ``WorkflowValidationError`` together with the graph's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from ..errors import ExpressionError
from ..model._blackboard import Blackboard
from ..model._graph import Condition, ConditionLike, NodeSpec
from ..model._retry import RetryPolicy

__all__ = ["Problems", "bad_state", "is_state"]

T = TypeVar("T")


class Problems:
    """The problems found so far, and the checks that add to them."""

    def __init__(self, found: Iterable[str] = ()) -> None:
        self.found = list(found)

    def append(self, problem: str) -> None:
        """Record one problem (a sentence naming where it is)."""
        self.found.append(problem)

    def __iter__(self) -> Iterator[str]:
        return iter(self.found)

    def __len__(self) -> int:
        return len(self.found)

    def known(self, where: str, options: dict[str, Any], known: frozenset[str]) -> dict[str, Any]:
        """``options`` without the unknown ones, which are reported."""
        unknown = sorted(set(options) - known)
        if not unknown:
            return options
        self.append(f"{where}: unknown option(s) {', '.join(unknown)} "
                    f"(known: {', '.join(sorted(known))})")
        return {k: v for k, v in options.items() if k in known}

    def one_of(self, what: str, value: T, allowed: Sequence[T]) -> T:
        """``value`` when it is one of ``allowed``; the first of them, reported, otherwise."""
        if value in allowed:
            return value
        self.append(f"{what} must be {' or '.join(map(repr, allowed))}, got {value!r:.60}")
        return allowed[0]

    def positive_int(self, what: str, value: object) -> bool:
        """Whether ``value`` is a positive int (not a bool); reported when it is not."""
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            self.append(f"{what} must be a positive int, got {value!r:.60}")
            return False
        return True

    def role_names(self, what: str, names: Iterable[str]) -> tuple[str, ...]:
        """``operators=``/``viewers=`` checked: role names, stripped, each once."""
        if isinstance(names, str):
            names = (names,)
        try:
            found = tuple(names)
        except TypeError:
            self.append(f"{what} must be role names, got {names!r:.60}")
            return ()
        bad = [n for n in found if not isinstance(n, str) or not n.strip()]
        if bad:
            self.append(f"{what} must be non-empty role names, got {bad[0]!r:.60}")
        return tuple(dict.fromkeys(n.strip() for n in found if isinstance(n, str) and n.strip()))

    def condition(self, cond: ConditionLike | None, where: str) -> Condition | None:
        """``cond`` as a condition (a callable or an expression); None, reported, if it is not."""
        if cond is None:
            return None
        try:
            return Condition.of(cond)
        except ExpressionError as exc:
            self.append(f"{where}: {exc.problems[0]}")
        except TypeError as exc:
            self.append(f"{where}: {exc}")
        return None

    def cases(self, source: str, cases: Iterable[tuple[ConditionLike, str]]
              ) -> tuple[tuple[Condition, str], ...]:
        """A switch's ``(condition, target)`` cases, those whose condition is bad left out."""
        built = []
        for case, target in cases:
            cond = self.condition(case, f"switch {source}->{target}")
            if cond is not None:
                built.append((cond, target))
        return tuple(built)

    def arg_type(self, arg_type: Any, where: str) -> Any:
        """``arg_type`` when pydantic can validate into it; None, reported, otherwise."""
        if arg_type is None:
            return None
        from ..model._send import arg_adapter

        try:
            arg_adapter(arg_type)
        except Exception as exc:  # pydantic raises several kinds for a non-type
            self.append(f"{where} arg_type: {arg_type!r:.60} is not a type pydantic "
                        f"can validate into ({type(exc).__name__})")
            return None
        return arg_type

    def field(self, schema: Any, name: str, where: str) -> None:
        """Report ``name`` when it is no field of ``schema`` (a free-form one has them all)."""
        if name not in schema.fields and not schema.free_form:
            self.append(f"{where} field {name!r} does not exist on {schema.cls.__name__}")

    def names(self, value: object, where: str, what: str) -> tuple[str, ...] | None:
        """``value`` as a tuple of names (a string is one name); None, reported, if it is not."""
        if isinstance(value, str):
            return (value,)
        if isinstance(value, Iterable) and not isinstance(value, Mapping):
            items = tuple(value)
            if all(isinstance(v, str) for v in items):
                return items
        self.append(f"{where}: must be a list of {what} (strings), got {value!r:.60}")
        return None

    def mapping(self, value: object, where: str) -> dict[str, str]:
        """``{inner: outer}`` from a mapping or a list of shared names (a string is one name)."""
        if isinstance(value, Mapping):
            if all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
                return dict(value)
            self.append(f"{where}: must map field names to field names (strings), "
                        f"got {value!r:.60}")
            return {}
        names = self.names(value, where, "field names")
        return {name: name for name in names or ()}

    def node_options(self, spec: NodeSpec) -> NodeSpec:
        """``spec`` with a bad ``retry``, ``timeout`` or ``max_concurrency`` reported and dropped."""
        if spec.retry is not None and not isinstance(spec.retry, RetryPolicy):
            self.append(f"node {spec.id!r}: retry must be a RetryPolicy (e.g. "
                        f"RetryPolicy(max_attempts=3)), got {spec.retry!r:.60}")
            spec = dataclasses.replace(spec, retry=None)
        if spec.timeout is not None and not _positive(spec.timeout):
            self.append(f"node {spec.id!r}: timeout must be a positive number of "
                        f"seconds, got {spec.timeout!r:.60}")
            spec = dataclasses.replace(spec, timeout=None)
        limit = spec.max_concurrency
        if limit is not None and not self.positive_int(f"node {spec.id!r}: max_concurrency",
                                                       limit):
            spec = dataclasses.replace(spec, max_concurrency=None)
        return spec


def is_state(cls: object) -> bool:
    """Whether ``cls`` can be a workflow's state: a ``Blackboard`` subclass."""
    return isinstance(cls, type) and issubclass(cls, Blackboard)


def bad_state(cls: object) -> str:
    """The problem with a ``state=`` that is no ``Blackboard`` subclass, with a hint."""
    if isinstance(cls, Blackboard):
        hint = f"; pass the class {type(cls).__name__}, not an instance"
    elif isinstance(cls, type) and issubclass(cls, BaseModel):
        hint = f"; make {cls.__name__} subclass durable_flow.Blackboard instead of BaseModel"
    else:
        hint = ""
    return f"state must be a Blackboard subclass, got {cls!r:.60}{hint}"


def _positive(value: object) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and value > 0)  # NaN fails too
