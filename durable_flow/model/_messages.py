"""Chat messages shared by the blackboard, node histories and agents.

Messages are immutable all the way down: their ``metadata``, ``tool_calls``
and tool-call ``arguments`` are read-only containers from the moment they are
validated, so one message can be shared by the global list, node histories
and every task without a copy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Annotated, Any, Literal, overload

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from ._frozen import FrozenDict, FrozenList, freeze, frozen_when

__all__ = ["Message", "MessageList", "Role", "ToolCall"]

Role = Literal["system", "user", "assistant", "tool"]

_Frozen = AfterValidator(freeze)
_NO_ARGUMENTS = FrozenDict()
_NO_CALLS = FrozenList()


def _no_arguments() -> dict[str, Any]:
    return _NO_ARGUMENTS  # shared: it is immutable


def _no_calls() -> list[ToolCall]:
    return _NO_CALLS


class ToolCall(BaseModel):
    """A tool invocation requested by an assistant message."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: Annotated[dict[str, Any], _Frozen] = Field(default_factory=_no_arguments)


class Message(BaseModel):
    """One chat message: the unit of the global list and of node histories."""

    model_config = ConfigDict(frozen=True)

    role: Role
    content: str = ""
    name: str | None = None
    tool_calls: Annotated[list[ToolCall], _Frozen] = Field(default_factory=_no_calls)
    tool_call_id: str | None = None
    metadata: Annotated[dict[str, Any], _Frozen] = Field(default_factory=_no_arguments)

    @classmethod
    def user(cls, content: str, **kw: Any) -> Message:
        """Build a user message."""
        return cls(role="user", content=content, **kw)

    @classmethod
    def assistant(cls, content: str = "", **kw: Any) -> Message:
        """Build an assistant message."""
        return cls(role="assistant", content=content, **kw)

    @classmethod
    def system(cls, content: str, **kw: Any) -> Message:
        """Build a system message."""
        return cls(role="system", content=content, **kw)

    @classmethod
    def tool(cls, content: str, *, tool_call_id: str, **kw: Any) -> Message:
        """Build a tool-result message answering ``tool_call_id``."""
        return cls(role="tool", content=content, tool_call_id=tool_call_id, **kw)


def _frozen_message(m: Message) -> bool:
    # a frozen list's items and a frozen dict's values are frozen by construction
    return type(m.metadata) is FrozenDict and type(m.tool_calls) is FrozenList


def _frozen_call(c: ToolCall) -> bool:
    return type(c.arguments) is FrozenDict


frozen_when(Message, _frozen_message)
frozen_when(ToolCall, _frozen_call)


class MessageList(Sequence[Message]):
    """A node history as ``get_state`` returns it: the stored items, read as messages.

    Nothing is validated when the snapshot is built: an item becomes a
    ``Message`` the first time it is read (then kept), so a snapshot of a long
    run builds no model it does not show. ``plain()`` gives the stored items
    as JSON values. An item that is not a message raises what ``damaged``
    makes of the error (``CheckpointCorruptedError`` naming run and checkpoint).
    """

    __slots__ = ("_built", "_damaged", "_items")

    def __init__(self, items: list[Any], damaged: Callable[[Exception], Exception]) -> None:
        self._items = items
        self._built: list[Message | None] = [None] * len(items)
        self._damaged = damaged

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            return [self._message(i) for i in range(*index.indices(len(self._items)))]
        i = range(len(self._items))[index]  # IndexError past the end, as a list
        return self._message(i)

    def __iter__(self) -> Iterator[Message]:
        return (self._message(i) for i in range(len(self._items)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MessageList):
            return self._items == other._items
        if not isinstance(other, (list, tuple, Sequence)) or isinstance(other, str):
            return NotImplemented
        return len(other) == len(self) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"MessageList({self._items!r})"

    def plain(self) -> list[Any]:
        """The stored items as plain JSON values (dicts), building nothing."""
        return list(self._items)

    def _message(self, i: int) -> Message:
        built = self._built[i]
        if built is None:
            try:
                built = self._built[i] = Message.model_validate(self._items[i])
            except ValueError as exc:  # a ValidationError is a ValueError
                raise self._damaged(exc) from None
        return built
