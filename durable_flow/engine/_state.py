"""In-memory state of one thread, and its translation to and from store rows."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from pydantic import TypeAdapter

from ..errors import CheckpointCorruptedError, InvalidInputError, SerializationError
from ..model._blackboard import Blackboard, StateSchema
from ..model._clock import utcnow
from ..model._frozen import FrozenList, LogBuffer, freeze
from ..model._ids import new_checkpoint_id
from ..model._messages import Message, MessageList
from ..model._records import CheckpointSource, RunStatus
from ..model._serde import TAG_BYTES, as_bytes, decode, encode
from ..model._task_id import TaskId
from ..store._protocols import CheckpointMeta, CheckpointWrite, LoadedCheckpoint
from ._histories import MESSAGES, expand, has_refs
from ._lazy import LazyLog, first_digests, verified

__all__ = [
    "DAMAGE", "HISTORY_PREFIX", "REWRITTEN", "LogGrowth", "ThreadState", "corrupted",
    "damaged_item", "decode_checkpoint", "decode_plain", "decode_raw", "encode_field",
    "frozen_values", "log_channels", "log_items", "log_name", "messages_of", "raw_values",
    "self_contained", "stored_tasks",
]

HISTORY_PREFIX = "history:"
# A log a migration rewrote starts over in a channel of its own, ``<name>#<seq>``
# (a store reads a checkpoint's logs only from the channels its log_lengths name);
# field names and node ids never hold "#".
REWRITTEN = "#"
_MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


@dataclass
class ThreadState:
    """A thread's head as the engine holds it: typed values and their bytes.

    ``values`` and ``histories`` are deeply read-only (``freeze``d once when
    they entered the state: input, merge, decoded checkpoint), so they are
    shared, never copied, by every task, later supersteps and results.
    ``tasks`` and ``args`` are the checkpoint's next tasks and their args,
    their stored ids parsed once into ``TaskId``s.
    """

    meta: CheckpointMeta
    values: dict[str, Any]
    histories: dict[str, list[Message]]
    value_bytes: dict[str, bytes] = field(default_factory=dict)
    tasks: tuple[TaskId, ...] = field(init=False)
    args: dict[TaskId, bytes] = field(init=False)

    def __post_init__(self) -> None:
        self.tasks = tuple(map(TaskId.parse, self.meta.next_tasks))
        self.args = {TaskId.parse(t): data for t, data in self.meta.task_args.items()}

    def blackboard(self, schema: StateSchema) -> Blackboard:
        """A deeply read-only Blackboard of the current values (``RunResult.state``).

        It shares the engine's frozen values; ``copy.deepcopy`` or
        ``model_copy(deep=True)`` gives a mutable copy.
        """
        return schema.build(self.values)

    def node_view(self, schema: StateSchema) -> Blackboard:
        """The snapshot given to the tasks of a superstep.

        Nothing is copied: the values are read-only at every depth, so a node
        changing the snapshot in place raises instead of reaching its siblings,
        the next superstep or the store.
        """
        return schema.build(self.values)


class LogGrowth:
    """The log buffers one merge grew, with their lengths before it."""

    __slots__ = ("_before",)

    def __init__(self) -> None:
        self._before: dict[int, tuple[LogBuffer | LazyLog, int]] = {}

    def append(self, current: Sequence[Any], items: Sequence[Any]) -> LogBuffer:
        """``current`` grown by ``items``: in place when it is already a buffer."""
        lazy = type(current) is LogBuffer or type(current) is LazyLog
        buf: LogBuffer | LazyLog = current if lazy else LogBuffer.of(current)  # type: ignore[assignment]
        self._before.setdefault(id(buf), (buf, len(buf)))
        buf.grow(items)
        return buf  # type: ignore[return-value]  # a lazy history stays one

    def undo(self) -> None:
        """Shrink every buffer grown back to its length before the merge."""
        for buf, length in self._before.values():
            buf.shrink(length)


def encode_field(node: str, name: str, value: Any) -> bytes:
    """Encode one field value; failures name the node and field."""
    try:
        return encode(value)
    except TypeError as exc:
        raise SerializationError(node, name, str(exc)) from None


# What reading damaged stored data can raise (JSONDecodeError and UnknownTagError are
# ValueErrors); each is reported as CheckpointCorruptedError naming run and checkpoint.
DAMAGE = (ValueError, TypeError, KeyError, IndexError, ArithmeticError, RecursionError)


def corrupted(run_id: str, checkpoint_id: str, exc: BaseException,
              what: str = "") -> CheckpointCorruptedError:
    """The error for damaged stored data, ``what`` naming the part that is damaged."""
    reason = _reason(exc)
    return CheckpointCorruptedError(run_id, checkpoint_id, f"{what}: {reason}" if what else reason)


def log_name(channel: str) -> str:
    """What a stored log channel holds: a field or ``history:<task>`` (``notes#5`` -> ``notes``)."""
    return channel.partition(REWRITTEN)[0]


def log_channels(meta: CheckpointMeta) -> dict[str, str]:
    """The stored channel of each log a checkpoint sees, by what it holds."""
    return {log_name(channel): channel for channel in meta.log_lengths}


def decode_raw(loaded: LoadedCheckpoint) -> tuple[dict[str, Any], dict[str, list[Message]]]:
    """Plain values and node histories of a checkpoint, without any schema."""
    verified(loaded)
    raw = raw_values(loaded)
    validated: list[list[Message]] = []

    def messages() -> list[Message]:  # the log histories refer to, validated once
        if not validated:
            validated.append(_messages_log(loaded))
        return validated[0]

    return raw, _histories(loaded, messages)


def decode_plain(loaded: LoadedCheckpoint
                 ) -> tuple[dict[str, Any], dict[str, Sequence[Message]]]:
    """Plain values and node histories of a checkpoint (``get_state``), no model built.

    Everything is decoded straight from the stored JSON; a history's items
    become ``Message``s only when read (``MessageList``), damage then raising
    ``CheckpointCorruptedError`` naming run, checkpoint and channel.
    """
    meta = loaded.meta
    verified(loaded)
    histories: dict[str, Sequence[Message]] = {}
    for channel in meta.log_lengths:
        if channel.startswith(HISTORY_PREFIX):
            histories[log_name(channel)[len(HISTORY_PREFIX):]] = MessageList(
                log_items(loaded, channel),
                partial(damaged_item, meta.run_id, meta.id, channel))
    return raw_values(loaded), histories


def damaged_item(run_id: str, checkpoint_id: str, channel: str,
                 exc: Exception) -> CheckpointCorruptedError:
    """The error for an item of a history that is not a message (``MessageList``)."""
    return corrupted(run_id, checkpoint_id, exc, f"channel {channel!r}")


def decode_checkpoint(loaded: LoadedCheckpoint, schema: StateSchema) -> ThreadState:
    """Rebuild a thread state exactly; corrupt data raises CheckpointCorruptedError."""
    verified(loaded)
    own = schema.cls.model_fields.get(MESSAGES)
    typed = (MESSAGES in log_channels(loaded.meta) and own is not None
             and own.annotation == Blackboard.model_fields[MESSAGES].annotation)
    # the messages log, the longest, is validated straight from its bytes
    raw = raw_values(loaded, skip=MESSAGES if typed else None)
    if typed:
        raw[MESSAGES] = _messages_log(loaded)
    try:
        state = schema.cls.model_validate(raw)
    except DAMAGE as exc:  # a ValidationError is a ValueError
        raise corrupted(loaded.meta.run_id, loaded.meta.id, exc) from None
    histories = _histories(loaded, lambda: getattr(state, MESSAGES, None) or [])
    return ThreadState(meta=loaded.meta, values=frozen_values(schema, state),
                       histories={n: FrozenList(h) for n, h in histories.items()},
                       value_bytes=dict(loaded.values))


def raw_values(loaded: LoadedCheckpoint, skip: str | None = None) -> dict[str, Any]:
    """The plain values of a checkpoint: value channels and logs other than histories."""
    meta = loaded.meta
    channel = ""
    try:
        raw: dict[str, Any] = {}
        for channel, data in loaded.values.items():
            raw[channel] = decode(data)
        for channel, length in meta.log_lengths.items():
            name = log_name(channel)
            if not name.startswith(HISTORY_PREFIX) and name != skip:
                raw[name] = _concat(loaded.logs.get(channel, []), length)
    except DAMAGE as exc:
        raise corrupted(meta.run_id, meta.id, exc, f"channel {channel!r}") from None
    return raw


def _messages_log(loaded: LoadedCheckpoint) -> list[Message]:
    """The thread's ``messages`` log as ``Message`` objects (empty when it has none)."""
    channel = log_channels(loaded.meta).get(MESSAGES)
    if channel is None:
        return []
    try:
        return messages_of(loaded.logs.get(channel, []), loaded.meta.log_lengths[channel], list)
    except DAMAGE as exc:
        raise corrupted(loaded.meta.run_id, loaded.meta.id, exc,
                        f"channel {MESSAGES!r}") from None


def _histories(loaded: LoadedCheckpoint,
               messages: Callable[[], Sequence[Any]]) -> dict[str, list[Message]]:
    """The node histories of a checkpoint, references expanded from ``messages``."""
    meta = loaded.meta
    histories: dict[str, list[Message]] = {}
    channel = ""
    try:
        for channel, length in meta.log_lengths.items():
            if channel.startswith(HISTORY_PREFIX):
                histories[log_name(channel)[len(HISTORY_PREFIX):]] = messages_of(
                    loaded.logs.get(channel, []), length, messages)
    except DAMAGE as exc:
        raise corrupted(meta.run_id, meta.id, exc, f"channel {channel!r}") from None
    return histories


def frozen_values(schema: StateSchema, state: Blackboard) -> dict[str, Any]:
    """Every field of a validated blackboard, frozen (the one deep walk of a value)."""
    values = {name: getattr(state, name) for name in schema.fields}
    if schema.free_form and state.model_extra:
        values.update(state.model_extra)
    return {name: freeze(value) for name, value in values.items()}


def messages_of(chunks: list[bytes], length: int,
                messages: Callable[[], Sequence[Any]]) -> list[Message]:
    """A messages log or node history; untagged JSON is validated straight from bytes.

    References to the messages log are expanded from ``messages`` (validated
    messages pass through validation as they are).
    """
    joined = _joined(chunks)
    if has_refs(joined):
        return _MESSAGES.validate_python(expand(_list(decode(joined)), messages, length))
    if TAG_BYTES in joined:
        return _MESSAGES.validate_python(_concat(chunks, length))
    history = _MESSAGES.validate_json(joined)
    if not 0 <= length <= len(history):
        raise ValueError(f"log has {len(history)} items, checkpoint expects {length}")
    return history[:length]


def _joined(chunks: list[bytes]) -> bytes:
    chunks = [c if type(c) is bytes else as_bytes(c) for c in chunks]
    for chunk in chunks:
        if chunk[:1] != b"[" or chunk[-1:] != b"]":
            raise ValueError("a log chunk is not a JSON array")
    return b"[" + b",".join(c[1:-1] for c in chunks if len(c) > 2) + b"]"


def _concat(chunks: list[bytes], length: int) -> list[Any]:
    """The first ``length`` items of a log stored as JSON-array chunks.

    The chunks are joined as bytes and decoded in one call: a long run has
    thousands of small chunks, and one parse is several times faster.
    """
    items = decode(_joined(chunks))
    if not isinstance(items, list):
        raise ValueError("a log chunk is not a JSON array")
    if not 0 <= length <= len(items):
        raise ValueError(f"log has {len(items)} items, checkpoint expects {length}")
    return items[:length]


def log_items(loaded: LoadedCheckpoint, channel: str) -> list[Any]:
    """The plain items a checkpoint sees in one log channel; raises CheckpointCorruptedError.

    A history's references to the messages log are expanded (as plain items).
    """
    try:
        chunks = loaded.logs.get(channel, [])
        length = loaded.meta.log_lengths[channel]
        if channel.startswith(HISTORY_PREFIX) and has_refs(joined := _joined(chunks)):
            return expand(_list(decode(joined)), partial(_plain_messages, loaded), length)
        return _concat(chunks, length)
    except DAMAGE as exc:
        raise corrupted(loaded.meta.run_id, loaded.meta.id, exc, f"channel {channel!r}") from None


def _plain_messages(loaded: LoadedCheckpoint) -> list[Any]:
    """The plain items of the thread's ``messages`` log (none when it has no such log)."""
    channel = log_channels(loaded.meta).get(MESSAGES)
    return log_items(loaded, channel) if channel is not None else []


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError("a log chunk is not a JSON array")
    return value


def _reason(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"{type(exc).__name__}: {text}"


def stored_tasks(tasks: Iterable[TaskId], args: Mapping[TaskId, bytes]
                 ) -> tuple[tuple[str, ...], dict[str, bytes]]:
    """Next tasks and their args as a checkpoint stores them (task ids as text)."""
    return tuple(map(str, tasks)), {str(t): data for t, data in args.items()}


def self_contained(loaded: LoadedCheckpoint, run_id: str, thread: str, *, carried: bool,
                   source: CheckpointSource = "fork") -> CheckpointWrite:
    """A self-contained copy (every channel written) as the first checkpoint of a thread.

    A ``carried`` copy continues its superstep, so a waiting one stays waiting.
    Whole logs are written each in the plain channel of what it holds.
    """
    m = loaded.meta
    status = RunStatus.RUNNING if m.next_tasks else RunStatus.COMPLETED
    if carried and m.status is RunStatus.WAITING:
        status = RunStatus.WAITING
    appends = {log_name(ch): encode(log_items(loaded, ch)) for ch in m.log_lengths}
    meta = dataclasses.replace(
        m, id=new_checkpoint_id(), run_id=run_id, thread=thread, parent_id=None, seq=0,
        created_at=utcnow(), source=source, status=status,
        log_lengths={log_name(ch): n for ch, n in m.log_lengths.items()},
        value_versions=dict.fromkeys(loaded.values, 0), error=None,
        digests=first_digests(loaded.values, appends),
        size=sum(map(len, loaded.values.values())) + sum(map(len, appends.values())))
    return CheckpointWrite(meta=meta, values=dict(loaded.values), appends=appends)


def history_channel(node: str) -> str:
    """The log channel holding ``node``'s own message history."""
    return HISTORY_PREFIX + node


def input_values(schema: StateSchema, data: Mapping[str, Any] | Blackboard) -> dict[str, Any]:
    """Validate run input into typed, frozen values (all fields, defaults filled).

    Input that is neither a mapping nor a Blackboard raises
    ``InvalidInputError`` naming the schema; a mapping whose values do not
    fit raises pydantic's ``ValidationError`` (which names the schema).
    """
    if isinstance(data, Blackboard):
        data = {k: getattr(data, k) for k in data.model_fields_set} | (data.model_extra or {})
    elif not isinstance(data, Mapping):
        name = schema.cls.__name__
        raise InvalidInputError(
            f"input for {name} must be a mapping of its fields (or a {name} instance), "
            f"got {type(data).__name__}: {data!r:.80}")
    return frozen_values(schema, schema.cls.model_validate(dict(data)))
