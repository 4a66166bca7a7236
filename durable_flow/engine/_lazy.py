"""Loading a thread's head for the engine: trusted bytes, typed lazily, in pieces.

What this library wrote it trusts on read through a digest, instead of
validating every item again. Each checkpoint the engine writes records in
``CheckpointMeta.digests`` a ``(crc32, length)`` pair per channel it sees:
for a value channel, of the value's bytes; for a log channel, of its items
as the stored chunks join them (the chunks' insides, ``","`` between them,
brackets left out), which is exactly the prefix a merged segment holds
(``store/_segments.py``), so a checkpoint older than the segment checks too.
A commit extends the digests of its base by the bytes it appends: O(bytes
written).

Loading a head (``load_head``, what ``ThreadRunner.load`` uses):

* every channel with a digest is checked against the bytes read; a
  mismatch, a log shorter than its digest, or bytes that do not decode raise
  ``CheckpointCorruptedError`` before anything runs;
* when every channel checks, the ``messages`` log is built without pydantic
  validation (:func:`trusted_messages`, each segment decoded on its own, the
  event loop given a turn between pieces), and node histories stay
  :class:`LazyHistory`: a history becomes ``Message`` objects only when its
  node reads it (``ctx.history``) or a migration copies it; a history grown by
  a merge is not built;
* a checkpoint without digests (written before they existed, or a fork's or
  migration's copy) is validated item by item as before
  (``decode_checkpoint``).
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, overload

import orjson

from ..errors import CheckpointCorruptedError
from ..model._blackboard import Blackboard, StateSchema
from ..model._frozen import FrozenDict, FrozenList, freeze
from ..model._messages import Message, ToolCall
from ..model._serde import TAG_BYTES, as_bytes
from ..store._protocols import CheckpointMeta, LoadedCheckpoint
from ._histories import MESSAGES, expand, has_refs

__all__ = [
    "PIECE", "LazyHistory", "extend_digest", "load_head", "next_digests", "trusted_messages",
    "value_digest", "verified",
]

#: Items built between two turns of the event loop.
PIECE = 2000

Digest = tuple[int, int]


# -- digests ---------------------------------------------------------------------------
def value_digest(data: bytes) -> Digest:
    """The digest of one value's bytes."""
    return zlib.crc32(data), len(data)


def extend_digest(prev: Digest | None, chunk: bytes) -> Digest:
    """A log's digest after ``chunk`` (a JSON array) is appended to it."""
    inner = chunk[1:-1] if len(chunk) > 2 else b""
    if prev is None or prev[1] == 0:
        return (zlib.crc32(inner), len(inner)) if inner else (0, 0)
    if not inner:
        return prev
    return zlib.crc32(b"," + inner, prev[0]), prev[1] + 1 + len(inner)


def next_digests(base: CheckpointMeta, vals: Mapping[str, bytes],
                 appends: Mapping[str, bytes], new_logs: Iterable[str] = ()
                 ) -> dict[str, Digest]:
    """The digests of the checkpoint that writes ``vals`` and ``appends`` on ``base``.

    A channel whose base has no digest (written before digests existed) gets
    none: its earlier bytes were never summed. ``new_logs`` are log channels
    the base does not see (they start empty).
    """
    out = {ch: d for ch, d in base.digests.items()
           if ch in base.value_versions or ch in base.log_lengths}
    for ch, data in vals.items():
        out[ch] = value_digest(data)
    fresh = set(new_logs)
    for ch, data in appends.items():
        prev = out.get(ch)
        if prev is None and (ch in base.log_lengths and ch not in fresh):
            continue
        out[ch] = extend_digest(prev, data)
    return out


def first_digests(vals: Mapping[str, bytes], appends: Mapping[str, bytes]) -> dict[str, Digest]:
    """The digests of a thread's first checkpoint (every channel written)."""
    out = {ch: value_digest(data) for ch, data in vals.items()}
    out.update({ch: extend_digest(None, data) for ch, data in appends.items()})
    return out


def verified(loaded: LoadedCheckpoint) -> bool:
    """Check every digest of ``loaded``; True when every channel it sees has one.

    Raises ``CheckpointCorruptedError`` naming the channel whose bytes do not
    match their digest.
    """
    meta = loaded.meta
    digests = meta.digests
    complete = bool(digests)
    for ch, data in loaded.values.items():
        d = digests.get(ch)
        if d is None:
            complete = False
        elif value_digest(as_bytes(data)) != d:
            raise _mismatch(meta, ch)
    for ch in meta.log_lengths:
        d = digests.get(ch)
        if d is None:
            complete = False
            continue
        chunks = [as_bytes(c) for c in loaded.logs.get(ch, [])]
        if any(c[:1] != b"[" or c[-1:] != b"]" for c in chunks):
            raise _mismatch(meta, ch)
        inner = b",".join(c[1:-1] for c in chunks if len(c) > 2)
        crc, n = d
        if (len(inner) < n or zlib.crc32(memoryview(inner)[:n]) != crc
                or (0 < n < len(inner) and inner[n:n + 1] != b",")):
            raise _mismatch(meta, ch)
    return complete


def _mismatch(meta: CheckpointMeta, channel: str) -> CheckpointCorruptedError:
    return CheckpointCorruptedError(
        meta.run_id, meta.id, f"channel {channel!r}: the stored bytes do not match their digest")


# -- trusted building ------------------------------------------------------------------
_new = object.__new__
_set = object.__setattr__
_NO_DICT: FrozenDict = FrozenDict()
_NO_LIST: FrozenList = FrozenList()
_MESSAGE_KEYS = frozenset(Message.model_fields)
_CALL_KEYS = frozenset(ToolCall.model_fields)


def _model(cls: type[Any], data: dict[str, Any]) -> Any:
    """An instance of a frozen model from data it wrote itself (its fields as dumped)."""
    obj = _new(cls)
    _set(obj, "__dict__", data)
    _set(obj, "__pydantic_fields_set__", set(data))
    _set(obj, "__pydantic_extra__", None)
    _set(obj, "__pydantic_private__", None)
    return obj


def _call(d: Any) -> ToolCall:
    if type(d) is not dict or not d.keys() <= _CALL_KEYS or "id" not in d or "name" not in d:
        raise ValueError(f"not a stored tool call: {d!r:.60}")
    fields = {"id": d["id"], "name": d["name"],
              "arguments": freeze(d["arguments"]) if d.get("arguments") else _NO_DICT}
    if type(fields["id"]) is not str or type(fields["name"]) is not str \
            or type(fields["arguments"]) is not FrozenDict:
        raise ValueError(f"not a stored tool call: {d!r:.60}")
    call = _model(ToolCall, fields)
    _set(call, "__pydantic_fields_set__", set(d))
    return call  # type: ignore[no-any-return]


def _message(d: Any) -> Message:
    """A ``Message`` from its stored dict (only the fields that differ from their defaults)."""
    if type(d) is not dict or not d.keys() <= _MESSAGE_KEYS or "role" not in d:
        raise ValueError(f"not a stored message: {d!r:.60}")
    calls = d.get("tool_calls")
    meta = d.get("metadata")
    fields = {
        "role": d["role"], "content": d.get("content", ""), "name": d.get("name"),
        "tool_calls": FrozenList._wrap([_call(c) for c in calls]) if calls else _NO_LIST,
        "tool_call_id": d.get("tool_call_id"),
        "metadata": freeze(meta) if meta else _NO_DICT,
    }
    if type(fields["metadata"]) is not FrozenDict:
        raise ValueError(f"not a stored message: {d!r:.60}")
    m = _model(Message, fields)
    _set(m, "__pydantic_fields_set__", set(d))
    return m  # type: ignore[no-any-return]


def trusted_messages(items: list[Any]) -> list[Message]:
    """``Message`` objects from items whose bytes matched their digest, without validation.

    The items are what this library wrote (``Message.model_dump`` as stored),
    so only their shape is checked: an item that is not one raises
    ``ValueError`` (the caller's ``CheckpointCorruptedError``).
    """
    return [_message(d) for d in items]


async def _pieces(chunks: list[bytes], length: int) -> list[Message]:
    """The first ``length`` messages of a trusted log, one stored row at a time."""
    out: list[Message] = []
    for chunk in chunks:
        if len(out) >= length:
            break
        items = orjson.loads(chunk)
        if type(items) is not list:
            raise ValueError("a log chunk is not a JSON array")
        items = items[:length - len(out)]
        for i in range(0, len(items), PIECE):
            out.extend(trusted_messages(items[i:i + PIECE]))
            await asyncio.sleep(0)
    if len(out) != length:
        raise ValueError(f"log has {len(out)} items, checkpoint expects {length}")
    return out


# -- lazy histories --------------------------------------------------------------------
class LazyHistory(Sequence[Message]):
    """A node history the engine holds without building it until it is read.

    ``build`` makes the stored items (``length`` of them) into messages on
    first read; ``grow`` (a merge) appends without building, ``shrink`` undoes
    it. The engine passes it only to its own code and to the node's context,
    which copies it into a list when the node asks for its history.
    """

    __slots__ = ("_build", "_built", "_length", "_tail")

    def __init__(self, build: Callable[[], list[Message]], length: int) -> None:
        self._build: Callable[[], list[Message]] | None = build
        self._built: list[Message] | None = None
        self._length = length
        self._tail: list[Message] = []

    @property
    def built(self) -> bool:
        """Whether the stored items were made into messages."""
        return self._built is not None

    def _items(self) -> list[Message]:
        if self._built is None:
            assert self._build is not None
            base = self._build()
            self._build = None
            self._built = FrozenList._wrap([*base, *self._tail])
            self._tail = []
        return self._built

    def __len__(self) -> int:
        if self._built is None:
            return self._length + len(self._tail)
        return len(self._built)

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | Sequence[Message]:
        return self._items()[index]

    def __iter__(self) -> Iterator[Message]:
        return iter(self._items())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        state = "built" if self.built else "not built"
        return f"LazyHistory({len(self)} messages, {state})"

    def grow(self, items: Iterable[Any]) -> None:
        """Append ``items`` (frozen on the way in), building nothing."""
        new = [freeze(v) for v in items]
        if self._built is None:
            self._tail.extend(new)
        else:
            list.extend(self._built, new)

    def shrink(self, length: int) -> None:
        """Drop every item from ``length`` on (a merge that did not commit)."""
        if self._built is None and length >= self._length:
            del self._tail[length - self._length:]
        else:
            list.__delitem__(self._items(), slice(length, None))


# -- the head --------------------------------------------------------------------------
async def load_head(loaded: LoadedCheckpoint, schema: StateSchema,
                    eager: Callable[[LoadedCheckpoint, StateSchema], Any]) -> Any:
    """The engine's typed state of ``loaded``; ``eager`` (``decode_checkpoint``) when untrusted.

    Trusted (every channel has a matching digest, and the blackboard's
    ``messages`` is the standard field): the messages log is built in pieces
    without validation, the other values validated as usual (they are small:
    one value each), and node histories stay lazy.
    """
    from ._state import (
        HISTORY_PREFIX,
        ThreadState,
        corrupted,
        frozen_values,
        log_channels,
        log_name,
        raw_values,
    )

    meta = loaded.meta
    if not verified(loaded):
        return eager(loaded, schema)
    own = schema.cls.model_fields.get(MESSAGES)
    channel = log_channels(meta).get(MESSAGES)
    if channel is not None and (own is None or own.annotation
                                != Blackboard.model_fields[MESSAGES].annotation):
        return eager(loaded, schema)
    await asyncio.sleep(0)
    raw = raw_values(loaded, skip=MESSAGES if channel is not None else None)
    chunks = [as_bytes(c) for c in loaded.logs.get(channel, [])] if channel else []
    if any(TAG_BYTES in c for c in chunks):
        return eager(loaded, schema)  # tagged values in messages: the validated path
    try:
        log = FrozenList._wrap(await _pieces(chunks, meta.log_lengths[channel])) \
            if channel is not None else FrozenList()
        state = schema.cls.model_validate(raw)
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise corrupted(meta.run_id, meta.id, exc,
                        f"channel {channel!r}" if channel else "") from None
    values = frozen_values(schema, state)
    if channel is not None:
        values[MESSAGES] = log
    histories: dict[str, Sequence[Message]] = {}
    for ch, length in meta.log_lengths.items():
        if ch.startswith(HISTORY_PREFIX):
            histories[log_name(ch)[len(HISTORY_PREFIX):]] = LazyHistory(
                _history_builder(loaded, ch, length, log), length)
    return ThreadState(meta=meta, values=values, histories=histories,  # type: ignore[arg-type]
                       value_bytes=dict(loaded.values))


def _history_builder(loaded: LoadedCheckpoint, channel: str, length: int,
                     log: Sequence[Message]) -> Callable[[], list[Message]]:
    def build() -> list[Message]:
        from ._state import corrupted

        meta = loaded.meta
        try:
            chunks = [as_bytes(c) for c in loaded.logs.get(channel, [])]
            joined = b"[" + b",".join(c[1:-1] for c in chunks if len(c) > 2) + b"]"
            items = orjson.loads(joined) if TAG_BYTES not in joined else None
            if items is None:
                from ._state import log_items
                items = log_items(loaded, channel)
                return [Message.model_validate(i) for i in items]
            if has_refs(joined):
                return [m if type(m) is Message else _message(m)
                        for m in expand(items, lambda: log, length)]
            if len(items) < length:
                raise ValueError(f"log has {len(items)} items, checkpoint expects {length}")
            return trusted_messages(items[:length])
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            raise corrupted(meta.run_id, meta.id, exc, f"channel {channel!r}") from None
    return build
