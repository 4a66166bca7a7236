"""Who acts on a request and what may answer it at once: ``Principal``, ``Policy``.

A request may name ``assignees`` (principal ids such as
``"alice@example.com"``) and ``roles`` (role names such as ``"finance"``);
when either is given, only a principal named there or holding one of the
roles may answer (:func:`permits`). ``escalate_to`` entries are principal ids
or ``role:NAME`` (:func:`split_targets`). A :class:`Policy` answers a request
itself when its condition holds over the payload.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidInputError
from ._expr import Expression

__all__ = ["ROLE_PREFIX", "Policy", "Principal", "default_title", "permits", "principal_of", "split_targets",
           "who_may"]

ROLE_PREFIX = "role:"
"""How an ``escalate_to`` entry names a role instead of a principal."""


@dataclass(frozen=True, slots=True)
class Principal:
    """Who acts: a principal id (``"alice@example.com"``) and the roles it holds.

    ``aliases`` are other ids that name the same person (a user's email
    address): a request assigned to one of them is theirs to answer, and
    the answer is recorded by ``id``.
    """

    id: str
    roles: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip():
            raise InvalidInputError(f"a principal id must be a non-empty string, not {self.id!r}")
        object.__setattr__(self, "roles", _names(self.roles, "role"))
        object.__setattr__(self, "aliases", _names(self.aliases, "alias"))


def principal_of(by: Principal | str | None) -> Principal | None:
    """``by`` as a :class:`Principal` (a bare id holds no roles); None stays None."""
    if by is None or isinstance(by, Principal):
        return by
    if isinstance(by, str):
        return Principal(by)
    raise InvalidInputError(f"by= must be a Principal or a principal id, not {type(by).__name__}")


def permits(by: Principal | None, assignees: Iterable[str], roles: Iterable[str]) -> bool:
    """Whether ``by`` may answer a request with these assignees and roles.

    A request that names neither takes any answer (``by`` may be None).
    """
    assignees, roles = tuple(assignees), tuple(roles)
    if not assignees and not roles:
        return True
    if by is None:
        return False
    return (by.id in assignees or any(alias in assignees for alias in by.aliases)
            or any(role in roles for role in by.roles))


def who_may(assignees: Iterable[str], roles: Iterable[str]) -> str:
    """Who may answer, in words: ``"'alice@example.com' or role 'finance'"``."""
    named = [repr(a) for a in assignees] + [f"role {r!r}" for r in roles]
    return " or ".join(named) if named else "anyone"


def split_targets(targets: Iterable[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``escalate_to`` entries as (principal ids, role names); ``role:NAME`` is a role."""
    people: list[str] = []
    roles: list[str] = []
    for target in _names(targets, "escalation target"):
        if target.startswith(ROLE_PREFIX):
            role = target[len(ROLE_PREFIX):].strip()
            if not role:
                raise InvalidInputError(f"escalation target {target!r} names no role")
            roles.append(role)
        else:
            people.append(target)
    return tuple(people), tuple(roles)


def default_title(payload: Any, node: str) -> str:
    """The line a person reads first: the payload's ``question`` or ``title``, else the node."""
    if isinstance(payload, Mapping):
        for key in ("question", "title"):
            value = payload.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip().splitlines()[0]
    return node


@dataclass(frozen=True, slots=True)
class Policy:
    """Answers a request at once, by ``policy:NAME``, when ``when`` holds over the payload.

    ``when`` is a condition in the workflow condition language (see
    :func:`~durable_flow.model._expr.parse_expression`), e.g.
    ``"amount < 100 and currency == 'EUR'"``; ``answer`` is what the request
    returns (it must fit the request's response type). A bad condition raises
    ``ExpressionError`` when the policy is made.
    """

    name: str
    when: str
    answer: Any
    _condition: Expression = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise InvalidInputError(f"a policy needs a name, not {self.name!r}")
        object.__setattr__(self, "_condition", Expression(self.when))

    @property
    def principal(self) -> str:
        """The id its answers are recorded by: ``policy:NAME``."""
        return f"policy:{self.name}"

    def applies(self, payload: Any) -> bool:
        """Whether the condition holds over ``payload`` (never raises)."""
        return self._condition(payload)


def _names(values: Iterable[str], what: str) -> tuple[str, ...]:
    if isinstance(values, str):
        raise InvalidInputError(f"give {what}s as a list, not the string {values!r}")
    names = tuple(values)
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise InvalidInputError(f"a {what} must be a non-empty string, not {name!r}")
    return names
