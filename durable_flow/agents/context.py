"""What an agent node's model sees: context policies for ``add_agent(..., context=...)``.

Policies combine with ``+``::

    from durable_flow.agents.context import from_state, user_only, window

    b.add_agent("writer", model, instructions="...",
                context=window(6) + user_only() + from_state("brief", "style"))

They apply to the history the agent's ``history=`` mode chooses, in a fixed
order whatever the order written: ``none()`` drops it, ``user_only()`` keeps
the user's messages, ``window(n)`` keeps the last ``n`` (a tool result whose
call fell out of the window goes with it); ``from_state(*keys)`` adds those
blackboard fields (dotted paths allowed) to the system prompt as a context
block. Two windows keep the smaller.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..model._messages import Message

__all__ = ["Context", "from_state", "none", "user_only", "window"]


@dataclass(frozen=True, slots=True)
class Context:
    """A context policy (see the module docstring); build it with the functions below."""

    last: int | None = None
    users_only: bool = False
    keys: tuple[str, ...] = ()
    drop_history: bool = False

    def __add__(self, other: Context) -> Context:
        if not isinstance(other, Context):
            return NotImplemented
        lasts = [n for n in (self.last, other.last) if n is not None]
        return Context(min(lasts) if lasts else None, self.users_only or other.users_only,
                       tuple(dict.fromkeys((*self.keys, *other.keys))),
                       self.drop_history or other.drop_history)

    def select(self, history: Sequence[Message]) -> list[Message]:
        """The part of ``history`` the model sees."""
        if self.drop_history:
            return []
        kept = [m for m in history if m.role == "user"] if self.users_only else list(history)
        if self.last is not None:
            kept = kept[max(0, len(kept) - self.last):] if self.last else []
            while kept and kept[0].role == "tool":  # its call fell out of the window
                kept.pop(0)
        return kept

    def describe(self) -> str:
        """The policy as written with the functions (for ``explain`` and the declarative format)."""
        parts = [*(["none()"] if self.drop_history else []),
                 *(["user_only()"] if self.users_only else []),
                 *([f"window({self.last})"] if self.last is not None else []),
                 *([f"from_state({', '.join(map(repr, self.keys))})"] if self.keys else [])]
        return " + ".join(parts) or "all"


def window(n: int) -> Context:
    """Keep the last ``n`` messages of the history."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"window(n) takes a whole number >= 0, not {n!r}")
    return Context(last=n)


def user_only() -> Context:
    """Keep only the user's messages."""
    return Context(users_only=True)


def from_state(*keys: str) -> Context:
    """Show these blackboard fields (dotted paths allowed) in the system prompt."""
    if not keys or not all(isinstance(k, str) and k for k in keys):
        raise ValueError("from_state(*keys) takes one or more field names")
    return Context(keys=tuple(keys))


def none() -> Context:
    """Send no history at all (only the instructions and the new input)."""
    return Context(drop_history=True)
